"""What a run shows: evaluation plots per output, permutation feature importance on the test
split, and one self-contained report.html per run and per sweep."""

import json
import re

import numpy as np
import pytest
from helpers import FAST, MIXED_MODEL, mixed_table, run_cli, run_experiment

from runner.model.layout import feature_columns
from runner.processing.features.model_side.number import PAIRS_KEPT
from runner.reports.evaluation import binary_curves, per_class_f1
from runner.reports.importance import permutation_importance
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
    assert merged["pairs"].shape == (2, PAIRS_KEPT)
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


def test_confusion_counts_equal_the_crosstab_of_the_predictions(mixed_run):
    """The plotted counts (from the merged statistics) against predictions.parquet's own
    crosstab of true and predicted labels, for the binary and the category output."""
    import pandas as pd

    from runner.reports.evaluation import confusion_matrix
    from runner.scoring.decoding import partial_metrics

    run_dir, _ = mixed_run
    predictor = Predictor.load(run_dir / "model")
    predictions = pd.read_parquet(run_dir / "predictions.parquet")
    report = json.loads((run_dir / "metrics.json").read_text())
    split = pa_table(report["training"]["cache_entry"])
    scored = predictor.score_processed(split, with_targets=True)
    stats = partial_metrics(predictor.layout, predictor.decoders, scored.logits, scored.targets)
    for spec in predictor.layout.outputs:
        if spec.type not in ("binary", "category"):
            continue
        labels = [str(x) for x in spec.labels]
        crosstab = pd.crosstab(
            predictions[spec.name].astype(str), predictions[f"{spec.name}_prediction"].astype(str)
        ).reindex(index=labels, columns=labels, fill_value=0)
        np.testing.assert_array_equal(confusion_matrix(spec, stats[spec.name]), crosstab.to_numpy())
        assert crosstab.to_numpy().sum() == len(predictions)


def pa_table(cache_entry: str):
    from runner.storage import Location

    return Location(cache_entry).join("test").read_table()


@pytest.mark.slow
def test_a_pure_noise_column_ranks_last_on_the_synthetic_table(tmp_path):
    from runner.processing.synthetic import make_synthetic

    frame = make_synthetic(10000)
    frame["noise"] = np.random.default_rng(7).normal(size=len(frame))
    path = tmp_path / "synthetic-noise.csv"
    frame.to_csv(path, index=False)
    run_dir = tmp_path / "run"
    run_experiment(
        run_dir,
        tmp_path / "cache",
        "dataset=file",
        f"dataset.path={path}",
        "dataset.target=label",
        "report.importance_repeats=5",
    )
    importance = json.loads((run_dir / "metrics.json").read_text())["importance"]
    ranked = [f["input"] for f in importance["features"]]
    assert set(ranked) == {"x1", "x2", "x3", "x4", "color", "city", "flag", "noise"}
    assert ranked[-1] == "noise", importance["features"]
    assert ranked[0] in ("x1", "x2", "x3")


@pytest.mark.slow
def test_report_html_renders_in_headless_chromium(mixed_run, tmp_path):
    """The page as a browser shows it: no console error, every plot decoded, and the
    screenshot (kept beside the test's files) holds the plots' pixels."""
    import shutil

    from matplotlib.image import imread
    from playwright.sync_api import sync_playwright

    run_dir, _ = mixed_run
    chromium = shutil.which("chromium")
    assert chromium, "setup.sh installs Debian's chromium"
    problems: list[str] = []
    shot = tmp_path / "report.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto((run_dir / "report.html").as_uri())
        images = page.eval_on_selector_all(
            "img",
            "els => els.map(e => [e.complete, e.naturalWidth, e.getBoundingClientRect().height])",
        )
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert problems == []
    assert len(images) == 5 and all(
        done and width > 300 and height > 100 for done, width, height in images
    )
    pixels = imread(shot)[..., :3]
    assert pixels.shape[0] > 2000  # the whole page: tables, five plots, the config
    plotted = (np.abs(pixels - pixels.mean(axis=2, keepdims=True)) > 0.1).any(axis=2)
    assert plotted.mean() > 0.01  # coloured pixels: the plots' blues and oranges are there
