"""model=catboost: CatBoost's trees as a family of their own, through every command: trained on
each output type the trees fit, scored by the Predictor as in training, explained by its
SHAP values, exported in CatBoost's format and read back by catboost alone."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import MIXED_MODEL, mixed_table, run_experiment

from runner import Predictor

pytestmark = pytest.mark.slow

OUTPUTS = {"good": "binary", "grade": "category", "value": "number"}
FLOORS = {
    "good": ("good/roc_auc", 0.9),
    "grade": ("grade/accuracy", 0.7),
    "value": ("value/r2", 0.9),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("catboost")
    mixed_table(2500).to_csv(root / "train.csv", index=False)
    pd.read_csv(root / "train.csv").head(300).to_csv(root / "head.csv", index=False)
    return root


def trained(root, output: str, *overrides):
    run_dir = root / f"catboost-{output}"
    metrics = run_experiment(
        run_dir,
        root / "cache",
        "backend=local",
        "model=catboost",
        f"dataset.path={root / 'train.csv'}",
        MIXED_MODEL[0],
        f"model.output_features=[{{name:{output},type:{OUTPUTS[output]}}}]",
        "model.catboost.iterations=300",
        *overrides,
    )
    return run_dir, metrics


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_catboost_trains_each_output_type_and_the_predictor_scores_as_training(data, output):
    run_dir, metrics = trained(data, output)
    metric, floor = FLOORS[output]
    assert metrics["test"][metric] > floor
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["training"]["catboost_rounds"] <= 300
    assert (run_dir / "model" / "model.cbm").stat().st_size > 0
    # The Predictor on raw rows gives the predictions the run wrote for its test split.
    predictor = Predictor.load(run_dir / "model")
    frame = pd.read_csv(data / "train.csv")
    written = pd.read_parquet(run_dir / "predictions.parquet")
    again = predictor.predict(frame.iloc[written["row"].to_numpy()])
    column = f"{output}_prediction"
    if written[column].dtype == object:
        assert again[column].tolist() == written[column].tolist()
    else:
        np.testing.assert_allclose(again[column], written[column], rtol=1e-5)


def test_catboost_explains_with_shap_and_exports_its_own_format(data):
    run_dir, _ = trained(data, "grade")
    out = data / "explain"
    run_experiment(
        out,
        data / "cache",
        "command=explain",
        f"model_dir={run_dir / 'model'}",
        f"dataset.path={data / 'head.csv'}",
        "backend=local",
    )
    path = out / "explanations.parquet"
    frame = pd.read_parquet(path if path.exists() else out / "explanations").sort_values("row")
    shares = frame.filter(like="attribution.")
    np.testing.assert_allclose(frame["base"] + shares.sum(axis=1), frame["output"], atol=1e-5)
    predictor = Predictor.load(run_dir / "model")
    logits = predictor.score_inputs(pd.read_csv(data / "head.csv")).logits["grade"]
    np.testing.assert_allclose(frame["output"], logits.max(axis=1), atol=1e-5)

    from catboost import CatBoost

    run_experiment(
        data / "export",
        data / "cache",
        "command=export",
        f"model_dir={run_dir / 'model'}",
        "backend=local",
    )
    folder = data / "export" / "export"
    described = json.loads((folder / "export.json").read_text())
    assert described["format"] == "catboost"
    alone = CatBoost()
    alone.load_model(str(folder / "model.cbm"))
    assert alone.tree_count_ == predictor.saved.model.booster.tree_count_
