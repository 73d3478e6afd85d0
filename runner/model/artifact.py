"""A trained model's directory (<run>/model): weights, feature metadata and the resolved
config, all that scoring needs without the cache, Hydra or Ray."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from omegaconf import OmegaConf

from runner.config import ModelConfig
from runner.errors import UserError
from runner.model.layout import Layout
from runner.model.network import TabularModel, build_model

MODEL_FILES = ("weights.pt", "meta.json", "config.yaml")


@dataclass
class SavedModel:
    network: TabularModel  # weights loaded, in eval mode
    layout: Layout
    meta: dict  # feature types, vocabularies, statistics
    settings: ModelConfig


def load_model_dir(model_dir: str | os.PathLike | None) -> SavedModel:
    """The saved model, or a clear error naming what is missing."""
    if not model_dir:
        raise UserError("this command needs model_dir=<run dir>/model from a finished training run")
    path = Path(os.path.expanduser(str(model_dir)))
    missing = [name for name in MODEL_FILES if not (path / name).is_file()]
    if missing:
        inside = path / "model"
        if all((inside / name).is_file() for name in MODEL_FILES):  # a run dir: its model/
            raise UserError(
                f"model_dir={model_dir} is a run directory; did you mean "
                f"model_dir={Path(str(model_dir)) / 'model'}?"
            )
        raise UserError(
            f"model_dir={model_dir} is not a model directory (missing {', '.join(missing)}); "
            "pass the model/ folder of a finished training run"
        )
    meta = json.loads((path / "meta.json").read_text())
    saved = OmegaConf.load(path / "config.yaml").model
    if "ensemble_size" not in saved:  # saved before the ensemble existed: a single network
        saved.ensemble_size = 1
    settings = cast(
        ModelConfig, OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ModelConfig), saved))
    )
    layout = Layout.from_meta(meta, settings)
    network = build_model(layout, settings)
    network.load_state_dict(torch.load(path / "weights.pt", map_location="cpu", weights_only=True))
    network.eval()
    return SavedModel(network, layout, meta, settings)
