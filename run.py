"""The one entry point: python run.py [command=experiment|preprocess|train|evaluate|predict] [overrides]."""

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runner.config import register_configs
from runner.errors import UserError

register_configs()
log = logging.getLogger("runner")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    from pathlib import Path

    from runner.commands import run_command
    from runner.redact import redact_hydra_dir

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.output_subdir is not None:
        redact_hydra_dir(Path(hydra_cfg.runtime.output_dir) / hydra_cfg.output_subdir)
    try:
        run_command(cfg, hydra_cfg.runtime.output_dir)
    except UserError as error:
        log.error("%s", error)
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    return None


if __name__ == "__main__":
    main()
