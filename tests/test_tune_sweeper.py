"""hydra/sweeper=tune: a --multirun sweep as a Ray Tune experiment on a real local Ray, with
ASHA stopping the hopeless trials (each trial an ordinary run with its outputs)."""

import json

import pandas as pd
import pytest
from conftest import run_cli

pytestmark = [pytest.mark.distributed]


def test_asha_prunes_some_trials_and_completes_others(tmp_path):
    sweep_dir, cache = tmp_path / "sweep", tmp_path / "cache"
    result = run_cli(
        "--multirun",
        "hydra/sweeper=tune",
        "hydra.sweeper.num_samples=6",
        "hydra.sweeper.seed=3",
        "hydra.sweeper.num_cpus=2",
        "hydra.sweeper.grace_period=1",
        "hydra.sweeper.reduction_factor=2",
        "trainer.epochs=4",
        "trainer.progress_bar=false",
        "dataset.synthetic_rows=3000",
        # Hopeless (a rate that barely moves the weights) against good ones:
        "trainer.learning_rate=choice(0.000001,0.00001,0.01,0.03)",
        "model.hidden_size=16,32",
        "sweep.objective=val/roc_auc",
        f"cache_dir={cache}",
        f"hydra.sweep.dir={sweep_dir}",
        timeout=900,
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 6 and set(report["trial"]) == set(range(6))
    assert set(report["status"]) <= {"completed", "pruned"}
    pruned, completed = report[report["status"] == "pruned"], report[report["status"] == "completed"]
    assert len(pruned) >= 1 and len(completed) >= 1, report[["trial", "status", "epochs"]]
    assert (pruned["epochs"] < 4).all() and (completed["epochs"] == 4).all()
    rates = report["param:trainer.learning_rate"].astype(float)
    assert rates.nunique() > 1 and set(rates) <= {0.000001, 0.00001, 0.01, 0.03}
    for _, row in report.iterrows():  # every trial is a run with its outputs, pruned or not
        trial_dir = sweep_dir / str(row["trial"])
        trial = json.loads((trial_dir / "trial.json").read_text())
        assert trial["status"] == row["status"] and trial["epochs"] == row["epochs"]
        for name in ("model", "metrics.json", "predictions.parquet", "learning_curves.png"):
            assert (trial_dir / name).exists(), (row["trial"], name)
        history = json.loads((trial_dir / "metrics.json").read_text())
        assert history["training"]["epochs_run"] == row["epochs"]
    assert report["objective"].iloc[0] == report["objective"].max()  # best first
    for name in ("sweep_report.md", "sweep_report.png", "sweep_epochs.png"):
        assert (sweep_dir / name).stat().st_size > 0
    assert (sweep_dir / ".tune").is_dir()
    assert len(list(cache.glob("*/meta.json"))) == 1  # preprocessed once for the sweep


def test_unknown_search_is_one_line(tmp_path):
    result = run_cli(
        "--multirun",
        "hydra/sweeper=tune",
        "hydra.sweeper.search=bayes",
        "trainer.learning_rate=0.01,0.03",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: hydra.sweeper.search=bayes is unknown; use one of: random, grid, optuna"]
