"""One optimisation step on the strategy's device and precision (inference is scoring's)."""

from __future__ import annotations

import torch

from runner.model.layout import Layout
from runner.model.network import ensemble_prediction
from runner.scoring.inference import AUTOCAST, Inference
from runner.training.averaging import WeightAverage
from runner.training.optimization import output_loss


class Step(Inference):
    def __init__(
        self,
        model,
        optimizer,
        layout: Layout,
        device: torch.device,
        precision: str,
        average: WeightAverage | None = None,
    ):
        super().__init__(model, device, AUTOCAST[precision])
        self.optimizer, self.layout, self.average = optimizer, layout, average
        # fp16 needs a gradient scaler on CUDA; elsewhere the scaler is a no-op.
        self.scaler = torch.amp.GradScaler(
            device.type, enabled=precision == "fp16" and device.type == "cuda"
        )

    def train(self, inputs: dict, targets: dict) -> dict[str, torch.Tensor]:
        inputs, targets = self.to_device(inputs), self.to_device(targets)
        self.optimizer.zero_grad()
        with self.autocast():
            logits = self.model(inputs)
        loss = output_loss(self.layout, {k: v.float() for k, v in logits.items()}, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.average is not None:
            self.average.update()
        if next(iter(logits.values())).dim() == 3:  # an ensemble's members: metrics score
            with torch.no_grad():  # the ensemble's prediction
                logits = ensemble_prediction(self.layout, {k: v.float() for k, v in logits.items()})
        return {k: v.detach().float().cpu() for k, v in logits.items()}

    def evaluation(self) -> Inference:
        """What validation scores: the weight average when there is one, else the model."""
        if self.average is None:
            return self
        return Inference(self.average.module, self.device, self.autocast_dtype)
