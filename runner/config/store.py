"""What Hydra sees: the schemas in its ConfigStore, --help, and the groups' options."""

from __future__ import annotations

from pathlib import Path

from runner.command_table import help_template
from runner.config.backends import (
    AutoBackendConfig,
    HorovodBackendConfig,
    LocalBackendConfig,
    RayBackendConfig,
)
from runner.config.dataset import DatasetConfig
from runner.config.loading import AutoLoaderConfig, LocalLoaderConfig, RayLoaderConfig
from runner.config.model import ModelConfig
from runner.config.processing import (
    ArrowProcessorConfig,
    AutoProcessorConfig,
    DaskProcessorConfig,
    ModinProcessorConfig,
    PandasProcessorConfig,
)
from runner.config.run import RunConfig
from runner.config.sweeper import TuneSweeperConfig
from runner.config.tracking import LOGGER_SCHEMAS
from runner.config.trainer import (
    DDPTrainerConfig,
    HorovodTrainerConfig,
    LocalTrainerConfig,
    TrainerConfig,
)
from runner.overrides import closest_choice


def register_configs() -> None:
    # Schemas live at the root (<group>_<option>_schema), not in the groups: Hydra lists a
    # group's every entry as its options, in --help and in its errors. Hydra is imported here:
    # a training worker unpickles these dataclasses and never needs it (0.1 s of its start).
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=RunConfig)
    cs.store(name="backend_local_schema", node=LocalBackendConfig)
    cs.store(name="backend_ray_schema", node=RayBackendConfig)
    cs.store(name="backend_auto_schema", node=AutoBackendConfig)
    cs.store(name="backend_horovod_schema", node=HorovodBackendConfig)
    cs.store(name="processor_pandas_schema", node=PandasProcessorConfig)
    cs.store(name="processor_dask_schema", node=DaskProcessorConfig)
    cs.store(name="processor_arrow_schema", node=ArrowProcessorConfig)
    cs.store(name="processor_modin_schema", node=ModinProcessorConfig)
    cs.store(name="processor_auto_schema", node=AutoProcessorConfig)
    cs.store(name="trainer_schema", node=TrainerConfig)
    cs.store(name="trainer_local_schema", node=LocalTrainerConfig)
    cs.store(name="trainer_horovod_schema", node=HorovodTrainerConfig)
    cs.store(name="trainer_ddp_schema", node=DDPTrainerConfig)
    cs.store(name="loader_local_schema", node=LocalLoaderConfig)
    cs.store(name="loader_ray_schema", node=RayLoaderConfig)
    cs.store(name="loader_auto_schema", node=AutoLoaderConfig)
    cs.store(name="dataset_schema", node=DatasetConfig)
    cs.store(name="model_schema", node=ModelConfig)
    for name, schema in LOGGER_SCHEMAS.items():
        cs.store(name=f"logger_{name}_schema", node=schema)
    cs.store(name="hydra_sweeper_tune_schema", node=TuneSweeperConfig)
    # --help: what the runner does, its first commands and its groups (conf/config.yaml picks it).
    cs.store(
        group="hydra/help", name="runner", node={"app_name": "run.py", "template": help_template()}
    )


def unknown_group_option(args: list[str], conf_dir: Path) -> str | None:
    """`processor=spark` (or `trainer=ddp,spark` in a sweep): the one line that names the
    override and the group's real options, said before Hydra's own message (the options, then
    its search path). None when every group option exists, or when this cannot tell: a config
    dir or search path of the user's adds options, or the override syntax is Hydra's to judge."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, ValueType

    if any(a.startswith(("--config-dir", "-cd", "hydra.searchpath")) for a in args):
        return None
    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if not a.startswith("-")]
        )
    except Exception:  # noqa: BLE001 - Hydra reports a syntax error itself
        return None
    groups = {
        d.name: sorted(f.stem for f in d.glob("*.yaml"))
        for d in conf_dir.iterdir()
        if d.is_dir() and d.name != "hydra"
    }
    for override in overrides:
        options = groups.get(override.key_or_group)
        if options is None or override.is_delete():
            continue
        if override.value_type == ValueType.ELEMENT:
            values = [override.get_value_element_as_str()]
        elif override.value_type == ValueType.SIMPLE_CHOICE_SWEEP:
            sweep = override.value()
            assert isinstance(sweep, ChoiceSweep)  # what SIMPLE_CHOICE_SWEEP holds
            values = [str(v) for v in sweep.list]
        else:
            continue  # glob(), range(): Hydra expands them against the options itself
        for value in values:
            if value not in options:
                hint = closest_choice(override.key_or_group, value, options)
                return (
                    f"{override.key_or_group}={value} is not an option; {hint}the options of "
                    f"{override.key_or_group} are: {', '.join(options)}"
                )
    return None
