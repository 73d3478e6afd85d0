"""The one entry point: python run.py [command=<name>] [overrides]; the commands are in
runner/command_table.py, and `python run.py --help` lists them."""

import logging
import sys
import warnings

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from runner.config import register_configs
from runner.errors import user_error_in

register_configs()
# conf/hydra/launcher/ray.yaml extends hydra-ray-launcher's schema of the same name on purpose.
warnings.filterwarnings(
    "ignore", message=".*is validated against ConfigStore schema with the same name.*"
)
log = logging.getLogger("runner")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Runs cfg.command; returns the sweep objective, which optimizing sweepers read."""
    import os
    import time
    from pathlib import Path

    from hydra.types import RunMode

    from runner.commands import run_command
    from runner.redact import redact_hydra_dir
    from runner.runtime import stop_failed_runs_at_exit
    from runner.sweeps.objective import objective_value
    from runner.sweeps.report import write_trial

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    if hydra_cfg.output_subdir is not None:
        redact_hydra_dir(run_dir / hydra_cfg.output_subdir)
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    started = time.perf_counter()
    record = {
        "objective": cfg.sweep.objective,
        "overrides": list(hydra_cfg.overrides.task),
        "pid": os.getpid(),  # the process that ran the trial (the Ray launcher reuses them)
    }
    if not in_sweep:  # this process ends with the run: its error comes before Ray's stop
        stop_failed_runs_at_exit()
    try:
        metrics = run_command(cfg, run_dir)
        # The objective is a sweep's business: a single evaluate or predict has no validation split.
        value = objective_value(metrics, cfg.sweep.objective) if in_sweep and metrics else None
    except Exception as error:
        if in_sweep:  # a failed trial: recorded, and Hydra marks it failed; the sweep goes on
            write_trial(
                run_dir,
                {
                    **record,
                    "status": "failed",
                    "error": f"{type(error).__name__}: {error}",
                    "seconds": time.perf_counter() - started,
                },
            )
            raise
        user_error = user_error_in(error)
        if user_error is not None:
            log.error("%s", user_error)
            print(f"error: {user_error}", file=sys.stderr)
            sys.exit(2)
        raise
    if in_sweep:
        from runner.training.reporting import epochs_reported, stopped_by_scheduler

        write_trial(
            run_dir,
            {
                **record,
                "status": "pruned" if stopped_by_scheduler() else "completed",
                "epochs": epochs_reported() or None,
                "value": value,
                "seconds": time.perf_counter() - started,
            },
        )
    return value


if __name__ == "__main__":
    from pathlib import Path

    from runner.config import unknown_group_option
    from runner.overrides import replace_renamed

    sys.argv[1:] = replace_renamed(sys.argv[1:])
    problem = unknown_group_option(sys.argv[1:], Path(__file__).resolve().parent / "conf")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    from runner.overrides import say_override_errors_in_one_line

    say_override_errors_in_one_line()
    from runner.tracking.base import start_early

    start_early(sys.argv[1:], Path(__file__).resolve().parent / "conf")
    main()
    from runner.fast_start import exit_without_teardown

    exit_without_teardown()
