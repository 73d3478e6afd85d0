"""A model family from outside runner/ (tests/test_family_plugin.py): least squares on the
numeric inputs for one number output, `model.family=toy_linear`. The whole family: a scoring
model, its save/load, and its fit."""

from __future__ import annotations

from pathlib import Path

import torch

from runner.errors import UserError
from runner.model.layout import NUMERIC
from runner.training.fitted import fitted_result

WEIGHTS = "linear.pt"


class LinearModel(torch.nn.Module):
    def __init__(self, columns: int, output: str):
        super().__init__()
        self.output = output
        self.linear = torch.nn.Linear(columns, 1)

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {self.output: self.linear(inputs[NUMERIC].float())}  # normalized units


class ToyLinearFamily:
    name = "toy_linear"
    files: tuple[str, ...] = (WEIGHTS,)
    export_formats: tuple[str, ...] = ("torchscript",)
    explain_method = ""  # none
    packages: tuple[str, ...] = ()

    def fit(self, job):
        layout = job.layout
        outputs = layout.outputs
        if len(outputs) != 1 or outputs[0].type != "number" or not layout.numeric:
            raise UserError("model.family=toy_linear fits one number output from numeric inputs")
        train, validation = job.read("train"), job.read("validation")
        x = train.inputs[NUMERIC].double()
        x = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
        y = train.targets[outputs[0].name].double().reshape(-1, 1)
        solution = torch.linalg.lstsq(x, y).solution.float()
        model = LinearModel(len(layout.numeric), outputs[0].name)
        with torch.no_grad():
            model.linear.weight.copy_(solution[:-1].T)
            model.linear.bias.copy_(solution[-1])
        return fitted_result(model.eval(), layout, job.meta, train, validation, {}, 1)

    def save(self, model, directory: Path) -> None:
        torch.save(model.state_dict(), directory / WEIGHTS)

    def load(self, directory: Path, layout, settings) -> LinearModel:
        model = LinearModel(len(layout.numeric), layout.outputs[0].name)
        model.load_state_dict(torch.load(directory / WEIGHTS, weights_only=True))
        return model.eval()


FAMILY = ToyLinearFamily()
