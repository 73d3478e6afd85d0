"""Native horovodrun: two real Horovod processes over gloo, each on its shard of the cache."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = [pytest.mark.distributed]


def test_horovodrun_two_processes(tmp_path):
    horovodrun = Path(sys.executable).parent / "horovodrun"
    run_dir = tmp_path / "run"
    env = {**os.environ, "TABULAR_RUNNER_CACHE": str(tmp_path / "cache"), "RAY_ADDRESS": ""}
    result = subprocess.run(
        [
            str(horovodrun),
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            sys.executable,
            str(ROOT / "run.py"),
            "backend=horovod",
            "trainer=horovod",
            "trainer.epochs=10",
            "trainer.progress_bar=false",
            "trainer.learning_rate_scaling=none",
            "dataset.synthetic_rows=6000",
            f"hydra.run.dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"]["label/roc_auc"] > 0.8
    assert sorted(p.name for p in (run_dir / "workers").glob("rank-*.json")) == [
        "rank-0.json",
        "rank-1.json",
    ]
    # One preprocessing build for both ranks.
    assert len(list((tmp_path / "cache").glob("*/meta.json"))) == 1
    assert (
        result.stdout.count("preprocessing skipped: cache hit")
        + result.stderr.count("preprocessing skipped: cache hit")
        >= 1
    )
