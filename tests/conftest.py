import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from runner.config import register_configs

# Test clusters are throw-away: no token authentication.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# botocore never asks a cloud metadata service for credentials from these tests.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
register_configs()

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
    """python run.py ... as a user runs it; returns the CompletedProcess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    return tmp_path / "cache"


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
    "{name:shiny,type:binary},{name:review,type:text},{name:when,type:date},{name:tags,type:set},"
    "{name:price,type:number,preprocessing:{normalization:quantile}},{name:emb,type:vector}]",
    "model.output_features=[{name:good,type:binary},{name:grade,type:category},{name:value,type:number}]",
]


@pytest.fixture(scope="session")
def mixed_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "mixed.csv"
    mixed_table(3000).to_csv(path, index=False)
    return path


def start_test_ray():
    """The tests' local Ray: 2 CPUs, a small object store, always a Ray of its own
    (address="local": never a cluster `ray start` left running on the machine)."""
    import ray

    ray.init(
        address="local", num_cpus=2, include_dashboard=False, object_store_memory=300 * 1024 * 1024
    )
    return ray


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray per test module (starting Ray costs seconds)."""
    ray = start_test_ray()
    yield ray
    ray.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """A real S3-compatible HTTP server on loopback (moto's), with one bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {
        "aws_access_key_id": "testing-key",
        "aws_secret_access_key": "testing-secret-value",
        "endpoint_url": endpoint,
        "region": "us-east-1",
    }
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing-key",
        aws_secret_access_key="testing-secret-value",
        region_name="us-east-1",
    ).create_bucket(Bucket="runner")
    yield credentials
    server.stop()
