"""The benchmark suite at tiny sizes: every figure is produced (the figures themselves
are measured by `nox -s bench`, not by tests)."""

import json
import sys

import numpy as np
import pytest
from helpers import ROOT, run_cli  # noqa: F401  (ROOT: the suite runs from the checkout)

pytestmark = [pytest.mark.slow]


def run_bench(script: str, *args: str, timeout: int = 900, env: dict | None = None) -> None:
    """bench/<script> from the checkout, as nox runs it; fails the test with its output's end."""
    import subprocess

    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.mark.bench_smoke
@pytest.mark.timeout(1600)  # the bench's own limit (1500 s) goes first
def test_every_figure_is_produced(tmp_path):
    out = tmp_path / "results"
    run_bench(
        "suite.py",
        *("--smoke", "--out", str(out), "--work", str(tmp_path / "work")),
        timeout=1500,
        env={**__import__("os").environ, "RAY_ADDRESS": ""},
    )
    figures = json.loads((out / "figures.json").read_text())["sections"]
    expected = {
        "startup",
        "start-up tricks",
        "floor",
        "preprocessing pandas",
        "preprocessing arrow",
        "preprocessing dask",
        "preprocessing modin",
        "experiment local",
        "experiment ray",
        "loader local",
        "scaling",
        "overhead",
        "out of core",
        "sweeps",
        "tune",
        "serving",
        "results",
        "soak",
        "explanation",
        "k_fold",
    }
    assert expected <= set(figures), sorted(figures)
    size = "2k"
    # Each start-up probe once (a Ray's start and stop, Ray Data's switch, a whole run).
    for trick in ("api_server", "ray_data_unimported", "no_teardown"):
        entry = figures["start-up tricks"][trick]
        assert entry["with_seconds"] > 0 and entry["without_seconds"] > 0, entry
    assert figures["floor"][size]["prep_rows_per_second"] > 0
    for processor in ("pandas", "arrow", "dask", "modin"):
        pre = figures[f"preprocessing {processor}"][size]
        assert pre["rows_per_second"] > 0 and pre["cache_hit_seconds"] is not None
    assert figures["experiment local"][size]["first_step_seconds"] > 0
    assert figures["loader local"][size]["batches_per_second"] > 0
    # The smoke run takes each code path once (horovod at 1 and 2 workers, ddp at 2, fp16 on
    # horovod); `nox -s bench` measures every variant.
    for key in ("horovod_1", "horovod_2", "ddp_2", "local_1", "ceiling", "ceiling_after"):
        assert figures["scaling"][size][key] > 0
    assert figures["scaling"][size]["horovod_fp16_2"] > 0
    over = figures["overhead"][size]
    assert over["ray_vs_local"] > 0 and over["horovod_vs_local"] > 0
    assert over["ray_start_seconds"] > 0 and over["ray_first_step_seconds"] > 0
    assert over["ray_samples_per_second"] > 0 and over["two_workers_attached_vs_local"] > 0
    assert figures["out of core"]["4k"]["peak_memory_mb"] > 0
    assert figures["sweeps"]["3 trials"]["ray_seconds"] > 0
    assert figures["sweeps"]["3 trials"]["ray_attached_seconds"] > 0
    for family in ("network", "gbm"):
        assert figures["explanation"][f"{family}, 500"]["explain_rows_per_second"] > 0
    assert figures["k_fold"]["500"]["k_fold_seconds"] > 0 and figures["k_fold"]["500"]["folds"] == 5
    tune = figures["tune"]["2 trials"]
    assert tune["asha"]["seconds"] > 0 and tune["none"]["epochs_trained"] == 4
    for replicas in ("1 replica(s)", "2 replica(s)"):  # Serve's proxy: tests/test_serving.py
        assert figures["serving"][replicas]["single_row_p99_ms"] > 0
        assert figures["serving"][replicas]["batch_rows_per_second"] > 0
        serving = figures["serving"][replicas]
        assert serving["ingress"] == "haproxy"
        assert 0 < serving["predictor_p50_ms"] < serving["single_row_p50_ms"]
        assert 0 < serving["hop_p50_ms"] < serving["single_row_p99_ms"]
    # command=serve with 2 replicas under three clients' load: every request answered; then a
    # replica SIGKILLed under load: clients that retry succeed, a request in flight fails at
    # most once, and /health shows 2 replicas RUNNING again (a new process in its place).
    load, kill = (
        figures["soak"]["two minutes of load"],
        figures["soak"]["a replica killed under load"],
    )
    assert load["requests"] > 50 and load["answered"] == load["requests"], load
    assert load["answers_5xx"] == load["no_answer"] == load["failed_after_retries"] == 0, load
    assert kill["killed_at_s"] > 0 and kill["failed_after_retries"] == 0, kill
    assert kill["failed_more_than_once"] == 0 and kill["recovered_after_s"] is not None, kill
    assert kill["replica_0_rss_mb_first_10s"] > 0  # the surviving replica's memory watched
    # The scale ladder: the trees on Ray from Parquet, each Ray worker's peak watched.
    trees_on_ray = figures["scale gbm ray parquet"][size]
    assert trees_on_ray["rows_per_second"] > 0 and trees_on_ray["driver_peak_memory_mb"] > 0
    assert any("Worker" in name for _, name in trees_on_ray["worker_peaks_mb"]), trees_on_ray
    results = figures["results"]["default experiment"]
    for variant in ("bare", "default", "mlflow"):
        assert results[f"{variant}_wall_seconds"] >= results[f"{variant}_best_wall_seconds"] > 0
    assert results["mlflow_ratio"] > 0
    table = (out / "figures.md").read_text()
    for row in (
        "results' cost: default experiment with logger=mlflow vs without",
        "serve under load: 5xx answers, requests failed after retries",
        "replica SIGKILLed under load: seconds until 2 running again",
        "preprocessing rows/s (pandas)",
        "training samples/s (local trainer)",
        "whole experiment wall",
        "cache hit",
        "loader batches/s",
        "backend=ray vs backend=local",
        "horovod: 2 workers vs 1",
        "hardware: 2 bare loops at once",
        "out-of-core peak memory",
        "one trainer vs local: wall",
        "2 Horovod workers vs local: wall",
        "first training step, forced distributed path minus local",
        "Ray Data loader vs local loader",
        "arrow on Ray (without Ray's start) vs pandas",
        "dask on Ray (without Ray's start) vs pandas",
        "sweep of 3 trials",
        "tune sweep of 2 trials: ASHA vs no scheduler",
        "`python run.py --help`",
        "start-up trick `api_server`",
        "serve: single-row latency p99",
        "serve: batch rows/s, 2 replicas vs 1",
        "fp16 gradient compression vs none",
    ):
        assert row in table, row


def test_accuracy_suite_scores_a_real_table(tmp_path):
    """nox -s accuracy on one table (the review table, whose signal is all in its text) and two
    split seeds: the runner, gradient boosting, TF-IDF + linear and the majority baseline are
    scored on the same splits, and means, standard errors and the paired gap are written."""
    out = tmp_path / "results"
    run_bench(
        "accuracy.py",
        *("--tables", "fine_foods", "--variants", "default", "--seeds", "0,1", "--out", str(out)),
    )
    entry = json.loads((out / "accuracy.json").read_text())["tables"]["fine_foods"]
    assert entry["rows"] == 5000 and entry["metric"] == "roc_auc"
    ours, gbm = entry["ours"]["default"], entry["gbm"]
    # The words and word pairs carry the review's signal (0.72 with the old encoder).
    assert len(ours["values"]) == 2 and ours["mean"] > 0.8 and ours["se"] >= 0
    assert 0.7 < gbm["mean"] < 1 and 0.7 < entry["linear_text"]["mean"] < 1
    assert entry["baseline"]["mean"] == 0.5 and entry["default_above_baseline"]
    # The gap is to the better of HistGB and LightGBM's defaults on the table.
    bar = entry[entry["bar"]]
    assert entry["bar"] in ("gbm", "lightgbm") and 0.7 < entry["lightgbm"]["mean"] < 1
    assert bar["mean"] == max(gbm["mean"], entry["lightgbm"]["mean"])
    gaps = np.subtract(ours["values"], bar["values"])
    assert entry["default_gap"]["mean"] == pytest.approx(gaps.mean())
    assert (
        "| fine_foods | binary | 5,000 | roc_auc | 0.5000 ± 0.0000 |"
        in (out / "accuracy.md").read_text()
    )


def test_defaults_sweep_runs_the_grid_through_the_tune_sweeper_and_ranks_on_validation(tmp_path):
    """nox -s defaults_sweep on one table, two settings and two split seeds: every setting is
    trained on every seed by the project's Tune sweeper, ranked on validation, and reported
    with its test means and gaps to gradient boosting on the same splits."""
    out = tmp_path / "results"
    run_bench(
        "defaults_sweep.py",
        *("--tables", "credit_data", "--seeds", "0,1", "--out", str(out)),
        *("--grid", "trainer.learning_rate=0.003,0.00001", "--set", "trainer.epochs=4"),
    )
    report = json.loads((out / "defaults_sweep.json").read_text())
    entry = report["tables"]["credit_data"]
    good = entry["settings"]["trainer.learning_rate=0.003"]
    hopeless = entry["settings"]["trainer.learning_rate=0.00001"]
    assert len(good["test"]["values"]) == 2 and len(entry["gbm"]) == 2
    # Two seeds' splits differ, and a rate of 1e-5 for 4 epochs learns far less.
    assert good["validation"]["values"][0] != good["validation"]["values"][1]
    assert good["validation"]["mean"] > hopeless["validation"]["mean"] + 0.02
    table = (out / "defaults_sweep.md").read_text()
    first_row = table.splitlines()[2]
    assert first_row.startswith("| `trainer.learning_rate=0.003` | 1.00 |")
