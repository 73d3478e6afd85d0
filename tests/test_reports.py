"""What a run shows: evaluation plots per output, permutation feature importance on the test
split, and one self-contained report.html per run and per sweep."""

import json
import re

import numpy as np
import pytest
from helpers import FAST, MIXED_MODEL, mixed_table, run_cli, run_experiment

from runner.reports.evaluation import binary_curves, per_class_f1
from runner.reports.importance import feature_columns, permutation_importance
from runner.scoring import metrics
from runner.scoring.predictor import Predictor


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, mixed_csv):
    """One experiment with a binary, a category and a number output (every plot kind)."""
    root = tmp_path_factory.mktemp("mixed-run")
    run_dir = root / "run"
    result = run_experiment(
        run_dir,
        root / "cache",
        "dataset=file",
        f"dataset.path={mixed_csv}",
        *MIXED_MODEL,
        *FAST,
        "trainer.epochs=6",
    )
    return run_dir, result


def test_every_output_gets_its_plots(mixed_run):
    run_dir, _ = mixed_run
    plots = {p.name for p in (run_dir / "plots").glob("*.png")}
    assert plots == {"test_good.png", "test_grade.png", "test_value.png", "importance.png"}
    for name in plots:  # real PNGs of some size, no temporary leftovers
        data = (run_dir / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert not list((run_dir / "plots").glob("tmp-*"))


def test_importance_ranks_what_the_targets_depend_on(mixed_run):
    """`good` (the first output) is size + review sentiment + shiny; weight and emb are noise."""
    run_dir, _ = mixed_run
    report = json.loads((run_dir / "metrics.json").read_text())
    importance = report["importance"]
    assert importance["metric"] == "good/roc_auc" and importance["repeats"] == 3
    ranked = [f["input"] for f in importance["features"]]
    features = {f["input"]: f for f in importance["features"]}
    assert set(features) == {
        "size",
        "weight",
        "shape",
        "shiny",
        "review",
        "when",
        "tags",
        "price",
        "emb",
    }
    assert set(ranked[:3]) <= {"size", "review", "shiny", "price"}  # price is exp(size)
    assert features["size"]["mean"] + features["price"]["mean"] > 0.05
    for noise in ("weight", "emb", "when", "tags"):
        assert abs(features[noise]["mean"]) < 0.02
    # The unshuffled value is the test metric itself (the whole split is under 10,000 rows).
    assert importance["value"] == pytest.approx(report["test"]["good/roc_auc"], abs=1e-9)


def test_report_html_is_one_self_contained_page(mixed_run):
    run_dir, _ = mixed_run
    page = (run_dir / "report.html").read_text()
    for heading in (
        "Metrics",
        "Learning curves",
        "Evaluation",
        "Permutation importance",
        "Training",
        "Components",
        "Config",
    ):
        assert f"<h2>{heading}" in page
    assert page.count("data:image/png;base64,") == 5  # curves, 3 outputs, importance
    # Nothing it needs comes from elsewhere: no external src/href, no script.
    assert not re.search(r'(src|href)="(?!data:)', page) and "<script" not in page
    assert "good/roc_auc" in page and "processor" in page


def test_importance_on_raw_rows_through_the_saved_transforms(mixed_run):
    """Fresh raw rows through Predictor.processed: a sample of the asked size, the same
    ranking of a driver over noise, and no change from shuffling when nothing is shuffled."""
    run_dir, _ = mixed_run
    predictor = Predictor.load(run_dir / "model")
    table = predictor.processed(mixed_table(2000, seed=3), with_targets=True)
    result = permutation_importance(predictor, table, rows=1000, repeats=2, seed=0)
    assert result["rows"] == 1000
    features = {f["input"]: f["mean"] for f in result["features"]}
    assert features["size"] > features["weight"] + 0.02
    again = permutation_importance(predictor, table, rows=1000, repeats=2, seed=0)
    assert again == result  # seeded: the same sample and permutations


def test_feature_columns_by_longest_name():
    columns = ["x", "x.missing", "x.y", "when.year", "when.month", "label", "__row__"]
    assert feature_columns(columns, ["x", "x.y", "when"]) == {
        "x": ["x", "x.missing"],
        "x.y": ["x.y"],
        "when": ["when.year", "when.month"],
    }


def test_curves_and_f1_from_merged_statistics():
    rng = np.random.default_rng(0)
    y = rng.random(4000) < 0.3
    logits = np.where(y, 1.0, -1.0) + rng.normal(size=4000)
    halves = [metrics.partial("binary", logits[i::2], y[i::2].astype(float)) for i in range(2)]
    merged = metrics.merge("binary", halves)
    curves = binary_curves(merged)
    assert curves["fpr"][0] == 0 and curves["tpr"][-1] == 1
    assert np.trapezoid(curves["tpr"], curves["fpr"]) == pytest.approx(
        metrics.finish("binary", merged)["roc_auc"], abs=1e-9
    )
    assert curves["prevalence"][0] == pytest.approx(y.mean())
    confusion = np.array([[8, 2, 0], [1, 9, 0], [0, 0, 0]])
    np.testing.assert_allclose(per_class_f1(confusion), [16 / 19, 18 / 21, 0.0])


def test_number_statistics_keep_a_spread_sample_of_pairs():
    z = np.arange(12000, dtype=np.float64)
    parts = [metrics.partial("number", z[i::3], z[i::3] + 1) for i in range(3)]
    merged = metrics.merge("number", parts)
    assert merged["pairs"].shape == (2, metrics.PAIRS_KEPT)
    np.testing.assert_allclose(merged["pairs"][1] - merged["pairs"][0], 1.0)


def test_plots_and_importance_can_be_turned_off(tmp_path):
    run_dir = tmp_path / "run"
    run_experiment(
        run_dir,
        tmp_path / "cache",
        "dataset.synthetic_rows=1500",
        *FAST,
        "report.plots=false",
        "report.importance_rows=0",
    )
    assert not (run_dir / "plots").exists()
    assert "importance" not in json.loads((run_dir / "metrics.json").read_text())
    assert "<h2>Metrics" in (run_dir / "report.html").read_text()


@pytest.mark.slow
def test_evaluate_draws_its_plots_and_a_sweep_gets_its_page(tmp_path, mixed_run, mixed_csv):
    run_dir, _ = mixed_run
    evaluation = tmp_path / "evaluate"
    result = run_cli(
        "command=evaluate",
        f"model_dir={run_dir / 'model'}",
        "dataset=file",
        f"dataset.path={mixed_csv}",
        f"hydra.run.dir={evaluation}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    plots = {p.name for p in (evaluation / "plots").glob("*.png")}
    assert plots == {"evaluation_good.png", "evaluation_grade.png", "evaluation_value.png"}
    assert "<h2>Evaluation" in (evaluation / "report.html").read_text()
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        "--multirun",
        "backend=local",
        "dataset.synthetic_rows=1500",
        *FAST,
        "model.hidden_size=8,32",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    page = (sweep_dir / "report.html").read_text()
    assert "Trials, best first" in page and "0/report.html" in page and "1/report.html" in page
    assert page.count("data:image/png;base64,") == 1  # the objective by trial and parameter
