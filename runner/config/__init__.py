"""Structured-config schemas, registered in Hydra's ConfigStore: the one source of defaults.

Every option file in conf/<group>/ starts from one of these schemas (via its
defaults list) and sets only what differs, so a misspelt key or a wrong type
fails at composition time with a message naming the key. `check_config` closes
the rest: keys added with `+` that no schema knows, and values out of range,
each reported as one line that names the key.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, cast

from runner.config.backends import (
    AutoBackendConfig,
    HorovodBackendConfig,
    LocalBackendConfig,
    RayBackendConfig,
    RaySettings,
)
from runner.config.catboost import CatBoostConfig
from runner.config.checks import II, MISSING, component_settings
from runner.config.commands import (
    EXPORT_FORMATS,
    ExplainConfig,
    ExportConfig,
    InitConfig,
    PredictConfig,
    ReportConfig,
    ServeConfig,
    SweepConfig,
)
from runner.config.dataset import DatasetConfig, FeatureConfig, SplitConfig
from runner.config.gbm import GBMConfig
from runner.config.loading import AutoLoaderConfig, LocalLoaderConfig, RayLoaderConfig
from runner.config.model import (
    CLASS_WEIGHTS,
    ENSEMBLE_AUTO,
    MODEL_FAMILIES,
    RARE_CLASS_RATIO,
    TREE_OUTPUT_TYPES,
    ModelConfig,
    rare,
)
from runner.config.processing import (
    ArrowProcessorConfig,
    AutoProcessorConfig,
    DaskProcessorConfig,
    ModinProcessorConfig,
    PandasProcessorConfig,
)
from runner.config.run import RunConfig
from runner.config.store import register_configs, unknown_group_option
from runner.config.sweeper import TUNE_SCHEDULERS, TUNE_SEARCHES, TuneSweeperConfig
from runner.config.tracking import LOGGER_SCHEMAS, MLFLOW_SCHEMES, MlflowConfig, TensorBoardConfig
from runner.config.trainer import (
    COMPRESSIONS,
    LR_SCALING,
    OPTIMIZERS,
    PLACEMENTS,
    PRECISIONS,
    SCHEDULES,
    DDPTrainerConfig,
    EarlyStoppingConfig,
    HorovodTrainerConfig,
    LocalTrainerConfig,
    TrainerConfig,
    trainer_settings,
)
from runner.errors import UserError
from runner.overrides import unknown_key_line

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = [
    "ArrowProcessorConfig",
    "AutoBackendConfig",
    "AutoLoaderConfig",
    "AutoProcessorConfig",
    "built",
    "check_config",
    "CLASS_WEIGHTS",
    "component_settings",
    "COMPRESSIONS",
    "DaskProcessorConfig",
    "DatasetConfig",
    "DDPTrainerConfig",
    "EarlyStoppingConfig",
    "ENSEMBLE_AUTO",
    "ExplainConfig",
    "EXPORT_FORMATS",
    "ExportConfig",
    "FeatureConfig",
    "CatBoostConfig",
    "GBMConfig",
    "HorovodBackendConfig",
    "HorovodTrainerConfig",
    "II",
    "InitConfig",
    "LocalBackendConfig",
    "LocalLoaderConfig",
    "LocalTrainerConfig",
    "LOGGER_SCHEMAS",
    "LR_SCALING",
    "MISSING",
    "MLFLOW_SCHEMES",
    "MlflowConfig",
    "MODEL_FAMILIES",
    "ModelConfig",
    "ModinProcessorConfig",
    "OPTIMIZERS",
    "PandasProcessorConfig",
    "PLACEMENTS",
    "PRECISIONS",
    "PredictConfig",
    "rare",
    "RARE_CLASS_RATIO",
    "RayBackendConfig",
    "RayLoaderConfig",
    "RaySettings",
    "register_configs",
    "ReportConfig",
    "RunConfig",
    "SCHEDULES",
    "ServeConfig",
    "SplitConfig",
    "SweepConfig",
    "TensorBoardConfig",
    "trainer_settings",
    "TrainerConfig",
    "TREE_OUTPUT_TYPES",
    "TUNE_SCHEDULERS",
    "TUNE_SEARCHES",
    "TuneSweeperConfig",
    "unknown_group_option",
]


def _unknown_keys(node, path: str):
    """(dotted key, known keys) for every key of a schema-typed node that its schema lacks
    (Hydra's `+key=value` adds such keys without a complaint)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        known = (
            {f.name for f in dataclasses.fields(schema)}
            if dataclasses.is_dataclass(schema)
            else None
        )
        for key in node.keys():
            dotted = f"{path}{key!s}"
            child = node._get_node(key)
            assert child is not None  # the key came from keys()
            if known is not None and key not in known:
                yield dotted, sorted(known)
            elif not child._is_missing() and not child._is_interpolation():
                yield from _unknown_keys(child, f"{dotted}.")
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            yield from _unknown_keys(node._get_node(i), f"{path}{i}.")


def built(node, **options):
    """A component from its config node (`_target_`); a UserError its constructor raised
    comes out as itself, not inside Hydra's InstantiationException (whose text adds the
    target's name), and a `_target_` that cannot be imported (a tracker of one's own, say)
    as a UserError that names the key."""
    import re

    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from runner.errors import user_error_in

    try:
        return instantiate(node, **options)
    except InstantiationException as error:
        found = user_error_in(error)
        if found is not None:
            raise found from None
        if isinstance(error.__cause__, ImportError):
            key = re.search(r"full_key: (\S+)", str(error))
            where = f"{key.group(1)}._target_" if key else "_target_"
            lines = str(error.__cause__).splitlines()  # Hydra's: "Error loading 'x':", the cause
            cause = lines[1] if len(lines) > 1 else lines[0] if lines else "ImportError"
            raise UserError(
                f"{where}={node.get('_target_')} cannot be imported ({cause}); check the "
                "name, and that its module is on PYTHONPATH"
            ) from None
        raise


def check_config(cfg: DictConfig) -> RunConfig:
    """The composed config as typed settings: an unknown key or a value out of range
    is a UserError naming it (and the closest known key)."""
    for key, known in _unknown_keys(cfg, ""):
        raise UserError(unknown_key_line(key, list(known)))
    from omegaconf import OmegaConf

    return cast(RunConfig, OmegaConf.to_object(cfg))  # a structured config: its dataclass
