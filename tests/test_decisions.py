"""Decisions for imbalanced classes: model.class_weights in the network's loss and the trees',
and a binary output's decision threshold, picked on validation where the positive class is
rare and applied by the test metrics, predict and export alike (runner/scoring/decisions.py)."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import FAST, run_experiment

from runner.config import ModelConfig
from runner.errors import UserError
from runner.processing.features.model_side import model_side
from runner.scoring.decisions import best_f1_threshold


def rare_table(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A yes/no target that is `yes` on about 6% of the rows, from three numbers and noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3))
    score = x[:, 0] + 0.7 * x[:, 1] - 0.5 * x[:, 2] + rng.normal(0, 1.2, rows)
    label = np.where(score > np.quantile(score, 0.94), "yes", "no")
    return pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "label": label})


def f1_at(probability: np.ndarray, positive: np.ndarray, threshold: float) -> float:
    called = probability > threshold
    hits = int((called & positive).sum())
    return 2 * hits / (called.sum() + positive.sum())


def test_the_best_f1_threshold_lies_between_two_distinct_probabilities():
    probability = np.array([0.9, 0.8, 0.3, 0.2, 0.1])
    target = np.array([1, 0, 1, 0, 0])
    threshold, f1 = best_f1_threshold(probability, target)
    assert threshold == pytest.approx(0.25) and f1 == pytest.approx(0.8)  # the top three
    # tied probabilities are called together: no cut between the two 0.8s
    threshold, _ = best_f1_threshold(np.array([0.9, 0.8, 0.8, 0.1]), np.array([1, 1, 0, 0]))
    assert threshold == pytest.approx(0.45)


def test_binary_metrics_follow_the_threshold_and_class_weights_their_setting():
    side = model_side("binary")
    logits = np.array([2.0, -0.5, -1.0, -3.0], dtype=np.float32)  # p .88 .38 .27 .05
    stats = side.partial(logits, np.array([1.0, 1.0, 0.0, 0.0]))
    at_half = side.finish(stats)
    assert (at_half["precision"], at_half["recall"], at_half["accuracy"]) == (1.0, 0.5, 0.75)
    lower = side.finish({**stats, "threshold_logit": np.log(0.3 / 0.7)})  # probability 0.3
    assert (lower["recall"], lower["f1"], lower["accuracy"]) == (1.0, 1.0, 1.0)
    assert lower["roc_auc"] == at_half["roc_auc"] and lower["loss"] == at_half["loss"]

    shares = [0.9, 0.1]
    assert ModelConfig().class_weights_of(["no", "yes"], shares) is None  # none: the default
    balanced = ModelConfig(class_weights="balanced").class_weights_of(["no", "yes"], shares)
    assert balanced == pytest.approx([1 / 1.8, 5.0])
    assert ModelConfig(class_weights="auto").class_weights_of(["a", "b"], [0.6, 0.4]) is None
    given = ModelConfig(class_weights={"yes": 3}).class_weights_of(["no", "yes"], shares)
    assert given == [1.0, 3.0]
    assert ModelConfig().threshold_of(0.06) == "validation"
    assert ModelConfig().threshold_of(0.3) == 0.5
    assert ModelConfig(decision_threshold=0.3).threshold_of(0.06) == 0.3
    with pytest.raises(UserError, match=r"model.decision_threshold=1.5 is out of range"):
        ModelConfig(decision_threshold=1.5)
    with pytest.raises(UserError, match=r"model.class_weights=balance is unknown; did you"):
        ModelConfig(class_weights="balance")
    with pytest.raises(UserError, match=r"model.class_weights.yes=-1 is out of range"):
        ModelConfig(class_weights={"yes": -1})


@pytest.fixture(scope="module")
def rare(tmp_path_factory):
    work = tmp_path_factory.mktemp("decisions")
    rare_table().to_csv(work / "t.csv", index=False)
    return work


@pytest.mark.slow
def test_a_rare_positive_class_decides_at_the_threshold_validation_picks(rare):
    """model=gbm on a 6% positive class: the threshold is picked on validation (below 0.5),
    and the test metrics, the saved model's predictions and export.json all use it."""
    from runner.scoring.predictor import Predictor

    run = rare / "gbm"
    common = [f"dataset.path={rare / 't.csv'}", "dataset.target=label", "model=gbm"]
    metrics = run_experiment(run, rare / "cache", *common)
    saved = json.loads((run / "metrics.json").read_text())
    decision = saved["training"]["decisions"]["label"]
    assert 0.0 < decision["threshold"] < 0.5 and "best F1" in decision["why"]
    test = metrics["test"]
    assert {"label/f1", "label/precision", "label/recall", "label/roc_auc"} <= set(test)

    predictor = Predictor.load(run / "model")
    assert predictor.layout.outputs[0].threshold == decision["threshold"]
    frame = rare_table(seed=1)  # new rows
    predicted = predictor.predict(frame.drop(columns=["label"]))
    probability = predicted["label_probability"].to_numpy()
    called = predicted["label_prediction"].to_numpy() == "yes"
    assert (called == (probability > decision["threshold"])).all()
    positive = frame["label"].to_numpy() == "yes"
    # on new rows, the picked threshold beats 0.5 at what it was picked for
    assert f1_at(probability, positive, decision["threshold"]) > f1_at(probability, positive, 0.5)

    export = run_experiment(
        rare / "export", rare / "cache", "command=export", f"model_dir={run / 'model'}"
    )
    assert export == {}
    described = json.loads(next((rare / "export").rglob("export.json")).read_text())
    assert described["outputs"]["label"]["threshold"] == decision["threshold"]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gbm", "network"])
def test_balanced_class_weights_raise_the_rare_class_probability(rare, family):
    """Weighting the rare class up (the network's loss, the trees' rows) moves the predicted
    probabilities of the positive class up on the same rows; a fixed threshold is kept."""
    common = [
        f"dataset.path={rare / 't.csv'}",
        "dataset.target=label",
        f"model.family={family}",
        "model.decision_threshold=0.5",
        *FAST,
    ]
    means = {}
    for weights in ("none", "balanced"):
        run = rare / f"{family}-{weights}"
        run_experiment(run, rare / "cache", *common, f"model.class_weights={weights}")
        saved = json.loads((run / "metrics.json").read_text())
        assert saved["training"]["decisions"]["label"] == {
            "threshold": 0.5,
            "why": "model.decision_threshold",
        }
        predictions = pd.read_parquet(run / "predictions.parquet")
        means[weights] = predictions["label_probability"].mean()
    assert means["balanced"] > means["none"] + 0.05
