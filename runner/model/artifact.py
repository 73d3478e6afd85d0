"""A trained model's directory (<run>/model): its family's files (the network's weights, the
trees' booster, an ensemble's members), feature metadata and the resolved config, all that
scoring needs without the cache, Hydra or Ray."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from omegaconf import DictConfig, OmegaConf

from runner.config import ModelConfig
from runner.errors import UserError
from runner.model.base import ScoringModel
from runner.model.layout import Layout
from runner.model.registry import LEGACY_FAMILY, family

MODEL_FILES = ("meta.json", "config.yaml")  # and its family's files


@dataclass
class SavedModel:
    model: ScoringModel  # the trained model of any family, in eval mode
    layout: Layout
    meta: dict  # feature types, vocabularies, statistics
    settings: ModelConfig


def load_model_dir(model_dir: str | os.PathLike | None) -> SavedModel:
    """The saved model, or a clear error naming what is missing."""
    if not model_dir:
        raise UserError("this command needs model_dir=<run dir>/model from a finished training run")
    path = Path(os.path.expanduser(str(model_dir)))
    config = path / "config.yaml"
    saved = cast(
        DictConfig, OmegaConf.load(config).model if config.is_file() else OmegaConf.create({})
    )
    kind = family(str(saved.get("family", LEGACY_FAMILY)))  # saved before families: a network
    needed = (*kind.files, *MODEL_FILES)
    missing = [name for name in needed if not (path / name).is_file()]
    if missing:
        inside = path / "model"
        if (inside / "meta.json").is_file() and (inside / "config.yaml").is_file():
            raise UserError(
                f"model_dir={model_dir} is a run directory; did you mean "
                f"model_dir={Path(str(model_dir)) / 'model'}?"
            )
        raise UserError(
            f"model_dir={model_dir} is not a model directory (missing {', '.join(missing)}); "
            "pass the model/ folder of a finished training run"
        )
    meta = json.loads((path / "meta.json").read_text())
    if "ensemble_size" not in saved:  # saved before the ensemble existed: a single network
        saved.ensemble_size = 1
    if "family" not in saved:  # saved before the families existed (the default is now auto)
        saved.family = LEGACY_FAMILY
    settings = cast(
        ModelConfig, OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ModelConfig), saved))
    )
    layout = Layout.from_meta(meta, settings)
    return SavedModel(kind.load(path, layout, settings), layout, meta, settings)
