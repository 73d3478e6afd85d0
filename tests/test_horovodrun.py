"""Native horovodrun: two real Horovod processes over gloo, each on its shard of the cache,
sharing rank 0's run dir; predict under horovodrun writes its outputs once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT

pytestmark = [pytest.mark.distributed]


def horovodrun(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    launcher = Path(sys.executable).parent / "horovodrun"
    env = {**os.environ, "TABULAR_RUNNER_CACHE": str(cwd / "cache"), "RAY_ADDRESS": ""}
    return subprocess.run(
        [
            str(launcher),
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
            sys.executable,
            str(ROOT / "run.py"),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=cwd,
    )


def run_dirs(cwd: Path) -> list[Path]:
    """Hydra's run dirs under cwd/outputs/<date>/<time>/."""
    return sorted(p for p in (cwd / "outputs").glob("*/*") if p.is_dir())


def test_horovodrun_two_processes_share_one_run_dir(tmp_path):
    train = tmp_path / "train"
    train.mkdir()
    # No hydra.run.dir: each rank composes its own (timestamps differ); they must end in one.
    result = horovodrun(
        train,
        "trainer.epochs=10",
        "trainer.progress_bar=false",
        "trainer.learning_rate_scaling=none",
        "dataset.synthetic_rows=6000",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "trainer=auto picked horovod: this process is one of 2 ranks launched by horovodrun"
        in result.stdout + result.stderr
    )
    (run_dir,) = run_dirs(train)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"]["label/roc_auc"] > 0.8
    assert metrics["training"]["world_size"] == 2
    assert sorted(p.name for p in (run_dir / "workers").glob("rank-*.json")) == [
        "rank-0.json",
        "rank-1.json",
    ]
    # One preprocessing build for both ranks.
    assert len(list((train / "cache").glob("*/meta.json"))) == 1
    assert (result.stdout + result.stderr).count("preprocessing skipped: cache hit") >= 1

    predict = tmp_path / "predict"
    predict.mkdir()
    result = horovodrun(
        predict, "command=predict", f"model_dir={run_dir / 'model'}", "dataset.synthetic_rows=500"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (predict_dir,) = run_dirs(predict)
    assert len(pd.read_parquet(predict_dir / "predictions.parquet")) == 500
    assert (result.stdout + result.stderr).count("500 predictions for") == 1  # written once
