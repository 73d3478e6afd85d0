"""One optimisation step on the strategy's device and precision (the forward pass it extends is scoring's: runner/scoring/forward.py)."""

from __future__ import annotations

import torch

from runner.model.layout import Layout
from runner.model.network import ensemble_prediction
from runner.scoring.forward import AUTOCAST, ForwardPass
from runner.training.averaging import WeightAverage
from runner.training.optimization import output_loss


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX): there autocast to
    bf16 speeds a step up; elsewhere it is emulated, and slower than float32."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu's own probes
    return any(getattr(torch.cpu, check, lambda: False)() for check in checks)


def training_precision(precision: str, device: torch.device) -> tuple[str, str]:
    """trainer.precision made concrete for `device`, with the reason: `auto` is bf16 on a CPU
    with native bf16 (the 1M-row default trains 1.2x-1.5x faster, the accuracy suite within
    0.002 on 10 of 11 tables: docs/accuracy.md), else 32 (on CUDA, not measured here, bf16
    and fp16 are the user's call)."""
    if precision != "auto":
        return precision, f"trainer.precision={precision}"
    if device.type == "cpu" and native_bf16():
        return "bf16", "this CPU multiplies bf16 natively"
    if device.type == "cpu":
        return "32", "this CPU has no native bf16 (AVX512-BF16 or AMX)"
    return "32", f"full precision on {device.type}"


class Step(ForwardPass):
    model: torch.nn.Module  # the network: the one family trained step by step

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

    def evaluation(self) -> ForwardPass:
        """What validation scores: the weight average when there is one, else the model, in
        full precision (the precision is the steps'): the best epoch is then chosen on what
        the saved model will answer."""
        module = self.model if self.average is None else self.average.module
        return ForwardPass(module, self.device)
