"""The model families (model.family): one entry each; a new family is one module and a line here."""

from __future__ import annotations

from pathlib import Path

import torch

from runner.model.base import Family
from runner.model.ensemble import EnsembleFamily
from runner.model.gbm import GBMFamily
from runner.model.layout import Layout
from runner.model.network import build_model

WEIGHTS_FILE = "weights.pt"


class NetworkFamily:
    name = "network"
    files: tuple[str, ...] = (WEIGHTS_FILE,)

    def save(self, model, directory: Path) -> None:
        torch.save(model.state_dict(), directory / WEIGHTS_FILE)

    def load(self, directory: Path, layout: Layout, settings):
        network = build_model(layout, settings)
        state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        network.load_state_dict(state)
        return network.eval()


FAMILIES: dict[str, Family] = {f.name: f for f in (NetworkFamily(), GBMFamily(), EnsembleFamily())}
