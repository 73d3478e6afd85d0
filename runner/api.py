"""Training from Python: `from runner import train`, beside `Predictor`.

train() composes the same config as run.py (conf/, the same groups and Hydra override strings)
and runs the same command, so it shares run.py's cache and writes the same outputs. It is made
for notebooks and long-lived processes: a mistake raises UserError instead of exiting, the root
logger and the working directory are left alone, and Ray is left as it was found (a Ray this
call starts is stopped again; one the caller started is used and kept).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

CONF = Path(__file__).resolve().parents[1] / "conf"


@dataclass
class TrainResult:
    metrics: dict  # what run.py writes to metrics.json: {split: {metric: value}}, ...
    predictor: object  # runner.Predictor of the trained model
    run_dir: Path

    def __iter__(self):  # metrics, predictor = train(...)
        return iter((self.metrics, self.predictor))


def train(
    data,
    target: str | list[str] | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    run_dir: str | os.PathLike | None = None,
    config_dir: str | os.PathLike | None = None,
) -> TrainResult:
    """Trains on `data` (a pandas DataFrame, or the path or URL of a table) and returns the
    metrics and a Predictor. `target` is dataset.target; `overrides` are run.py's (e.g.
    ["trainer.epochs=20", "model.hidden_size=128"]); `run_dir` defaults to
    outputs/<date>/<time> under the working directory, as run.py's; `config_dir` adds a
    directory of config groups (run.py's --config-dir)."""
    from runner.commands import run_command
    from runner.errors import UserError
    from runner.overrides import replace_renamed
    from runner.scoring.predictor import Predictor

    overrides = replace_renamed(list(overrides))
    if target is not None:
        overrides.append(f"dataset.target={_override_value(target)}")
    if command := next((o for o in overrides if o.startswith("command=")), None):
        raise UserError(f"train() runs command=experiment; drop {command}")
    cfg = compose(overrides, config_dir)
    frame_path = None
    if data is not None:
        table = _table_path(data, cfg)
        cfg.dataset.path = str(table)
        frame_path = str(table) if table is not data else None  # a DataFrame's copy
    default = Path("outputs") / datetime.now().strftime("%Y-%m-%d/%H-%M-%S-%f")
    run_dir = Path(run_dir or default).absolute()
    existed = run_dir.exists()
    try:
        metrics = run_command(cfg, run_dir)
    except UserError as error:
        if not existed and run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()  # bad input leaves nothing behind
        if frame_path is None:
            raise
        # The frame's Parquet copy is ours; the caller knows it as the DataFrame they gave.
        raise UserError(str(error).replace(frame_path, "the DataFrame given to train()")) from None
    return TrainResult(metrics, Predictor.load(run_dir / "model"), run_dir)


def compose(overrides: list[str], config_dir=None):
    """run.py's config for these overrides, composed with Hydra's compose API (no run dir,
    no logging set up, no change of directory)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from runner.config import register_configs
    from runner.errors import UserError
    from runner.overrides import override_problem

    register_configs()
    extra = [f"hydra.searchpath=[file://{Path(config_dir).resolve()}]"] if config_dir else []
    if (
        GlobalHydra.instance().is_initialized()
    ):  # a caller's own Hydra session (a notebook that composed a config itself)
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        try:
            return hydra_compose(config_name="config", overrides=[*overrides, *extra])
        except Exception as error:
            problem = override_problem(error)
            if problem is None:
                raise
            raise UserError(problem) from None


def _table_path(data, cfg) -> Path | str:
    """A path as given; a DataFrame written once to a Parquet file named by its content under
    the cache dir (local or object storage, with cache_credentials, which then read it), so
    that training twice on the same frame preprocesses once."""
    import pandas as pd

    if not isinstance(data, pd.DataFrame):
        return data
    import io

    from omegaconf import OmegaConf

    from runner.storage import Location, load_credentials, storage_errors

    buffer = io.BytesIO()
    data.to_parquet(buffer, index=False)  # the same frame gives the same bytes
    digest = hashlib.blake2b(buffer.getvalue(), digest_size=16).hexdigest()
    credentials = cfg.cache_credentials
    if not isinstance(credentials, str | None):
        credentials = OmegaConf.to_container(credentials, resolve=True)
    frames = Location(cfg.cache_dir, load_credentials(credentials)).join("frames")
    if not frames.is_local:
        path = f"{frames.url}/{digest}.parquet"
        with storage_errors(path, "cache_credentials"):
            fs, inside = frames.fs, f"{frames.path}/{digest}.parquet"
            if not fs.exists(inside):
                fs.pipe_file(inside, buffer.getvalue())  # an object appears whole or not at all
        if cfg.dataset.storage_options is None:
            cfg.dataset.storage_options = frames.options
        return path
    local = Path(frames.url) / f"{digest}.parquet"
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f"{local.name}.{os.getpid()}.tmp")
        tmp.write_bytes(buffer.getvalue())
        os.replace(tmp, local)
    return local


def _override_value(value) -> str:
    """A value as a Hydra override: a list as [a,b], anything odd quoted."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_override_value(v) for v in value) + "]"
    text = str(value)
    if all(c.isalnum() or c in "_-./:~" for c in text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
