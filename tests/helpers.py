"""Helpers the tests import (`from helpers import ...`): paths, config composition, run.py in
and out of process, the test tables, the tests' local Ray, cache comparisons. The fixtures live
in conftest.py."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest  # approx in assert_close
from hydra import compose, initialize_config_dir

from runner.ports import free_ports
from runner.processing.split import SPLIT_NAMES

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"

# Tiny, fast training settings for tests that do not measure quality.
FAST = ["trainer.epochs=3", "trainer.progress_bar=false"]


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def run_experiment(run_dir, cache_dir, *overrides: str) -> dict:
    """run.py's command in this process, with a test cache and no progress bars; returns its metrics."""
    from runner.commands import run_command

    cfg = compose_config([f"cache_dir={cache_dir}", "trainer.progress_bar=false", *overrides])
    return run_command(cfg, run_dir)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 300):
    """python run.py ... as a user runs it, in a process of its own (forked from a process that
    has Python's imports done: tests/warm_cli.py); returns the CompletedProcess."""
    full_env = {**os.environ, **(env or {})}
    return _warm_cli().run(list(args), cwd or ROOT, full_env, timeout)


class _WarmCli:
    """The client of tests/warm_cli.py: one call at a time (a second call while one runs, from
    another thread, gets a plain `python run.py`)."""

    def __init__(self):
        import queue
        import threading

        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "warm_cli.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.lock = threading.Lock()
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import json

        for line in self.process.stdout:  # type: ignore[union-attr]
            self.replies.put(json.loads(line))
        self.replies.put({"returncode": None, "gone": True})

    def run(self, args: list[str], cwd: Path, env: dict, timeout: float):
        import json
        import queue
        import signal
        import tempfile

        command = [sys.executable, str(ROOT / "run.py"), *args]
        if self.process.poll() is not None or not self.lock.acquire(blocking=False):
            return subprocess.run(
                command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
            )
        try:
            with tempfile.TemporaryDirectory(prefix="run-cli-") as folder:
                out, err = Path(folder) / "stdout", Path(folder) / "stderr"
                call = {"args": args, "cwd": str(cwd), "env": env}
                self.process.stdin.write(  # type: ignore[union-attr]
                    json.dumps({**call, "stdout": str(out), "stderr": str(err)}) + "\n"
                )
                self.process.stdin.flush()  # type: ignore[union-attr]
                pid = self.replies.get(timeout=60)["pid"]
                try:
                    code = self.replies.get(timeout=timeout)["returncode"]
                except queue.Empty:
                    os.killpg(pid, signal.SIGKILL)
                    self.replies.get(timeout=60)
                    raise subprocess.TimeoutExpired(command, timeout) from None
                return subprocess.CompletedProcess(
                    command, code, out.read_text(errors="replace"), err.read_text(errors="replace")
                )
        finally:
            self.lock.release()


_WARM: list[_WarmCli] = []


def _warm_cli() -> _WarmCli:
    if not _WARM:
        import atexit

        _WARM.append(_WarmCli())
        atexit.register(_WARM[0].process.kill)
    return _WARM[0]


def error_lines(result) -> list[str]:
    """The `error:` lines a run.py process wrote to stderr (a bad input gives exactly one)."""
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def mixed_table(rows: int, seed: int = 0) -> pd.DataFrame:
    """Every input type (number, category, binary, text, date, set, vector) and every output type
    (binary, category, number), with targets the inputs explain."""
    rng = np.random.default_rng(seed)
    size = rng.normal(size=rows)
    weight = rng.normal(size=rows)
    shape = rng.choice(["round", "square", "star"], size=rows)
    shiny = rng.random(rows) < 0.5
    words = np.array(["good", "great", "fine", "bad", "awful", "poor"])
    picks = rng.integers(0, 6, size=(rows, 3))
    review = [" ".join(words[p]) for p in picks]
    sentiment = (picks < 3).sum(axis=1) - 1.5
    score = size + 0.5 * sentiment + np.where(shiny, 0.7, -0.7) + rng.normal(scale=0.2, size=rows)
    grade = np.where(score > 0.8, "A", np.where(score > -0.8, "B", "C"))
    frame = pd.DataFrame(
        {
            "size": size,
            "weight": weight,
            "shape": shape,
            "shiny": shiny,
            "review": review,
            "good": score > 0,
            "grade": grade,
            "value": 3.0 * size + 2.0 * sentiment + 10.0,
        }
    )
    # A date (two formats, some missing) and a set of tags (some empty or missing): noise
    # for the targets, there to go through every path that the other types go through.
    start = np.datetime64("2023-01-01T00:00")
    stamps = start + rng.integers(0, 700 * 24 * 60, size=rows).astype("timedelta64[m]")
    text = np.datetime_as_string(stamps, unit="m")
    frame["when"] = np.where(
        np.arange(rows) % 2 == 0, [t[:10] for t in text], [t.replace("T", " ") for t in text]
    )
    members = np.array(["red", "blue", "large", "small", "sale"])
    chosen = rng.random((rows, len(members))) < 0.3
    frame["tags"] = ["|".join(members[c]) for c in chosen]
    frame["price"] = np.round(100 * np.exp(size), 2)  # right-skewed
    frame["emb"] = [f"{a:.4f},{b:.4f}" for a, b in rng.normal(size=(rows, 2))]
    frame.loc[frame.index % 17 == 3, "weight"] = np.nan
    frame.loc[frame.index % 23 == 5, "shape"] = None
    frame.loc[frame.index % 19 == 7, "when"] = None
    frame.loc[frame.index % 13 == 2, "tags"] = None
    return frame


MIXED_MODEL = [
    "model.input_features=[{name:size,type:number},{name:weight,type:number},{name:shape,type:category},"
    "{name:shiny,type:binary},{name:review,type:text,preprocessing:{components:8}},{name:when,type:date},{name:tags,type:set},"
    "{name:price,type:number,preprocessing:{normalization:quantile}},{name:emb,type:vector}]",
    "model.output_features=[{name:good,type:binary},{name:grade,type:category},{name:value,type:number}]",
]


def start_test_ray():
    """The tests' local Ray: 2 CPUs, a small object store, always a Ray of its own
    (address="local": never a cluster `ray start` left running on the machine)."""
    import ray

    ray.init(
        address="local", num_cpus=2, include_dashboard=False, object_store_memory=300 * 1024 * 1024
    )
    return ray


def free_port() -> int:
    return free_ports(1)[0]  # free_ports (runner.ports) when two or more are needed at once


def wait_until_serving(process, url: str, seconds: float = 120, ready=None, log=None) -> None:
    """Return once GET `url` is ready (200, or as `ready` says); when `process` ends first or
    `seconds` pass, kill it and fail the test with its output (piped, or the file `log`)."""
    from bench.probe import answers_200, until_ready

    if until_ready(process, url, seconds, ready or answers_200):
        return
    process.kill()
    try:
        output = process.communicate(timeout=30)[0] or ""
    except subprocess.TimeoutExpired:  # a child kept the pipe open
        output = ""
    if log is not None:
        output = Path(log).read_text()
    pytest.fail(f"{url} was not ready within {seconds}s (exit {process.poll()}):\n{output[-3000:]}")


def stop_serve(process, timeout: float = 90) -> str:
    """SIGTERM, as an operator stops it (bench.probe.start_serve started it); its output once
    it has ended."""
    import signal

    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=timeout)[0]


def houses(rows: int = 600, seed: int = 0) -> pd.DataFrame:
    """A table as users have them: an ID, a constant, numbers, counts, a yes/no, categories,
    free text, dates in three formats, a set of members, a vector, missing values, and a price
    they explain."""
    rng = np.random.default_rng(seed)
    sqft = rng.normal(120, 30, rows).round(1)
    rooms = rng.integers(1, 7, rows)
    district = rng.choice(["north", "south", "east", "west", "centre"], rows)
    garden = rng.choice(["yes", "no"], rows)
    words = ["bright", "quiet", "renovated", "spacious", "modern", "old", "cosy", "central"]
    description = [" ".join(rng.choice(words, rng.integers(3, 8))) for _ in range(rows)]
    amenities = ["|".join(rng.choice(["lift", "pool", "gym", "parking"], 2)) for _ in range(rows)]
    listed = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 700, rows), unit="D")
    effect = {"north": 10.0, "south": -5.0, "east": 0.0, "west": 4.0, "centre": 25.0}
    price = (
        2.0 * sqft
        + 8.0 * rooms
        + np.array([effect[d] for d in district])
        + np.where(garden == "yes", 15.0, 0.0)
        + rng.normal(0, 5, rows)
    ).round(2)
    frame = pd.DataFrame(
        {
            "id": np.arange(1000, 1000 + rows),
            "sqft": sqft,
            "rooms": rooms,
            "district": district,
            "garden": garden,
            "furnished": rng.random(rows) < 0.3,  # a boolean (True/False in a CSV)
            "description": description,
            "listed": listed.strftime("%Y-%m-%d"),  # dates in three formats
            "built": (listed - pd.DateOffset(years=30)).strftime("%m/%d/%Y"),
            "viewed": (listed + pd.to_timedelta(rng.integers(0, 86400, rows), unit="s")).strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
            "location": [f"{a:.4f} {b:.4f}" for a, b in rng.normal(size=(rows, 2))],
            "amenities": amenities,
            "country": "nl",
            "price": price,
        }
    )
    frame["sqft"] = frame["sqft"].astype(object)
    frame.loc[::17, "sqft"] = None  # missing values, in every format as nulls
    frame.loc[::13, "district"] = None
    frame.loc[::11, "built"] = None
    return frame


def write_table(frame: pd.DataFrame, path) -> None:
    """The table in the format its name says."""
    name = str(path)
    if name.endswith((".tsv", ".tsv.gz")):
        frame.to_csv(path, sep="\t", index=False)
    elif name.endswith(".semicolon.csv"):
        frame.to_csv(path, sep=";", index=False)
    elif name.endswith((".csv", ".csv.gz")):
        frame.to_csv(path, index=False)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        frame.to_json(path, orient="records", lines=True, double_precision=15)
    elif name.endswith(".json"):
        frame.to_json(path, orient="records", double_precision=15)
    elif name.endswith(".feather"):
        frame.to_feather(path)
    elif name.endswith(".orc"):
        frame.to_orc(path)
    elif name.endswith(".xlsx"):
        frame.to_excel(path, index=False)
    else:
        frame.to_parquet(path, index=False)


# -- comparing cache entries (every engine, every format: the same processed data) ------------
def processed(pre):
    return {s: pq.read_table(pre.split_path(s).path).sort_by("__row__") for s in SPLIT_NAMES}


def assert_close(got, want, where=""):
    """Equal, except floats within a relative 1e-9 (partition-wise sums round differently)."""
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            assert_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), where
    else:
        assert got == want, where


def assert_same_caches(results: dict) -> None:
    """results: {name: Preprocessed}; every entry equals the one named "pandas": statistics,
    vocabularies, rows, dtypes, values."""
    reference = results["pandas"]
    for engine, result in results.items():
        assert_close(
            result.meta["features"], reference.meta["features"], engine
        )  # vocabularies, statistics
        assert result.meta["rows"] == reference.meta["rows"], engine
        got, want = processed(result), processed(reference)
        for split in SPLIT_NAMES:
            assert got[split].schema == want[split].schema, (engine, split)  # same dtypes
            for column in want[split].column_names:
                g, w = got[split][column], want[split][column]
                if pa.types.is_floating(w.type):
                    np.testing.assert_allclose(
                        g.to_numpy(), w.to_numpy(), rtol=1e-6, atol=1e-9, err_msg=column
                    )
                else:
                    assert g.to_pylist() == w.to_pylist(), (engine, split, column)


def mlflow_sweep_runs(uri: str, experiment: str = "tabular-runner") -> tuple[list, list]:
    """A sweep's MLflow runs in the store at `uri`: (parents, children)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children
