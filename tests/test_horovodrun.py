"""Native horovodrun: two real Horovod processes over gloo, each on its shard of the cache,
sharing rank 0's run dir; predict under horovodrun writes its outputs once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import ROOT

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
        f"trainer.timeline={tmp_path / 'timeline.json'}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    timeline = (tmp_path / "timeline.json").read_text().strip().rstrip(",")
    events = json.loads(timeline if timeline.endswith("]") else timeline + "]")  # a Chrome trace
    assert any("ALLREDUCE" in str(e.get("name", "")) for e in events)
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
    for rank in (0, 1):  # CPU ranks: the 2 ms cycle (horovodrun's environment had none)
        info = json.loads((run_dir / "workers" / f"rank-{rank}.json").read_text())
        assert info["horovod_cycle_time_ms"] == "2"
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
    assert len(pd.read_parquet(predict_dir / "predictions")) == 500
    assert (result.stdout + result.stderr).count("500 predictions for") == 1  # reported once


def test_each_rank_scores_its_slice_and_the_answers_equal_the_local_path(tmp_path):
    """predict / evaluate under horovodrun: each rank scores and writes its own slice, the
    metrics merge on rank 0, and predictions and metrics equal one process's (1e-6)."""
    from helpers import MIXED_MODEL, mixed_table, run_experiment

    mixed_table(2000).to_csv(tmp_path / "train.csv", index=False)
    run_experiment(
        tmp_path / "train",
        tmp_path / "cache",
        "backend=local",
        f"dataset.path={tmp_path / 'train.csv'}",
        "trainer.epochs=2",
        *MIXED_MODEL,
    )
    new = mixed_table(1001, seed=9)
    new.loc[0, "shape"] = "hexagon"  # unseen in training
    new.loc[1, "size"] = None
    new.insert(0, "id", range(1001))
    new.to_csv(tmp_path / "new.csv", index=False)
    common = [f"model_dir={tmp_path / 'train' / 'model'}", f"dataset.path={tmp_path / 'new.csv'}"]
    local = {}
    for command in ("predict", "evaluate"):
        local[command] = run_experiment(
            tmp_path / f"local-{command}",
            tmp_path / "cache",
            "backend=local",
            f"command={command}",
            "predict.keep_columns=[id]",
            *common,
        )
        result = horovodrun(
            tmp_path,
            f"command={command}",
            "predict.keep_columns=[id]",
            f"hydra.run.dir={tmp_path / f'ranks-{command}'}",
            *common,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    parts = sorted((tmp_path / "ranks-predict" / "predictions").iterdir())
    assert [p.name for p in parts] == ["part-000000000000.parquet", "part-000000000500.parquet"]
    assert [len(pd.read_parquet(p)) for p in parts] == [500, 501]  # one slice per rank
    got = pd.read_parquet(tmp_path / "ranks-predict" / "predictions")
    want = pd.read_parquet(tmp_path / "local-predict" / "predictions.parquet")
    assert list(got.columns) == list(want.columns)
    # A kept CSV column typed as its whole column reads (whole numbers), on every rank's slice.
    assert got["id"].tolist() == want["id"].tolist() == list(range(1001))
    for column in want.select_dtypes("number").columns:  # values in raw units: 1e-6 relative
        rtol = 0 if "probability" in column else 1e-6
        np.testing.assert_allclose(got[column], want[column], atol=1e-6, rtol=rtol)
    assert got["grade_prediction"].tolist() == want["grade_prediction"].tolist()
    ranks = json.loads((tmp_path / "ranks-evaluate" / "metrics.json").read_text())
    assert ranks["rows"] == 1001
    for key, value in local["evaluate"]["evaluation"].items():
        assert ranks["evaluation"][key] == pytest.approx(value, abs=1e-6), key


MPI_ENV = {
    # CI and these machines run as root; Open MPI refuses that unless told.
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # Containers often forbid the cross-memory attach Open MPI's shared-memory transport tries.
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
}


@pytest.mark.parametrize("launch", ["mpirun", "horovodrun --mpi"])
def test_mpi_launches_two_ranks(tmp_path, launch):
    """Horovod is built with MPI too: `mpirun -np 2 python run.py` and `horovodrun --mpi`."""
    bin_dir = Path(sys.executable).parent
    launcher = (
        ["mpirun", "-np", "2", "--bind-to", "none"]
        if launch == "mpirun"
        else [str(bin_dir / "horovodrun"), "--mpi", "-np", "2", "-H", "localhost:2"]
    )
    env = {
        **os.environ,
        **MPI_ENV,
        "TABULAR_RUNNER_CACHE": str(tmp_path / "cache"),
        "RAY_ADDRESS": "",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    result = subprocess.run(
        [
            *launcher,
            sys.executable,
            str(ROOT / "run.py"),
            "trainer.epochs=3",
            "trainer.progress_bar=false",
            "dataset.synthetic_rows=4000",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert (
        "backend=auto picked horovod: OMPI_COMM_WORLD_RANK is set" in output
        or "HOROVOD_RANK is set" in output
    )
    (run_dir,) = run_dirs(tmp_path)
    assert json.loads((run_dir / "metrics.json").read_text())["training"]["world_size"] == 2
