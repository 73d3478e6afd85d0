"""Model families behind one seam: gradient-boosted trees (model=gbm) and the ensemble of the
network and the trees (model=ensemble) through experiment, predict, evaluate, export, the
Python Predictor, the Ray actor pool and HTTP serving; the one scoring path decodes them all."""

import json
import threading
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import requests
import torch
from helpers import MIXED_MODEL, error_lines, free_port, mixed_table, run_cli, run_experiment

from runner import Predictor
from runner.config import ModelConfig
from runner.errors import UserError
from runner.model.artifact import SavedModel
from runner.model.ensemble import EnsembleModel
from runner.model.gbm import TreeModel
from runner.model.layout import CATEGORY, NUMERIC
from runner.model.tree_features import feature_matrix
from runner.storage import Location
from runner.training import ensemble_fit, fitted, tree_fit
from runner.training.job import TrainingResult

INPUTS = MIXED_MODEL[0]
OUTPUTS = {"good": "binary", "grade": "category", "value": "number"}
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    mixed_table(2500).to_csv(root / "train.csv", index=False)
    return root


def trained(root, name: str, family: str, output: str, *overrides, backend="local") -> tuple:
    run_dir = root / name
    metrics = run_experiment(
        run_dir,
        root / "cache",
        f"backend={backend}",
        f"model={family}",
        f"dataset.path={root / 'train.csv'}",
        INPUTS,
        f"model.output_features=[{{name:{output},type:{OUTPUTS[output]}}}]",
        "trainer.epochs=4",
        *overrides,
    )
    return run_dir, metrics


@pytest.fixture(scope="module")
def trees(data):
    return {output: trained(data, f"gbm-{output}", "gbm", output) for output in OUTPUTS}


@pytest.mark.parametrize(
    "output,metric,floor",
    [
        ("good", "good/roc_auc", 0.9),
        ("grade", "grade/accuracy", 0.7),
        ("value", "value/r2", 0.9),
    ],
)
def test_trees_train_on_each_output_type_and_predict_raw_rows_as_the_cache(
    data, trees, output, metric, floor
):
    run_dir, metrics = trees[output]
    assert metrics["test"][metric] > floor
    assert (run_dir / "model" / "booster.txt").exists()
    assert not (run_dir / "model" / "weights.pt").exists()
    saved = json.loads((run_dir / "metrics.json").read_text())
    training = saved["training"]
    assert 1 <= training["gbm_rounds"] <= training["gbm_rounds_run"]
    # The loss curve at most CURVE_POINTS rounds (and the kept one), not every round.
    assert 3 <= training["epochs_run"] <= fitted.CURVE_POINTS + 2
    assert training["epochs_run"] < training["gbm_rounds_run"]
    # The Predictor on the test rows' raw values answers what the cache's test split got.
    predictions = pd.read_parquet(run_dir / "predictions.parquet")
    raw = pd.read_csv(data / "train.csv").iloc[predictions["row"]]
    predictor = Predictor.load(run_dir / "model")
    assert isinstance(predictor.saved.model, TreeModel)
    got = predictor.predict(raw, row_ids=predictions["row"].to_numpy())
    for column in got.columns:
        if got[column].dtype == object:
            assert got[column].tolist() == predictions[column].tolist(), column
        else:
            np.testing.assert_allclose(got[column], predictions[column], rtol=1e-6, atol=TOLERANCE)


@pytest.mark.slow
def test_trees_export_their_own_format_and_it_scores_as_the_model(data, trees):
    import lightgbm

    run_dir, _ = trees["grade"]
    result = run_cli(
        "command=export", f"model_dir={run_dir / 'model'}", f"hydra.run.dir={data / 'export'}"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    export = data / "export" / "export"
    described = json.loads((export / "export.json").read_text())
    assert described["format"] == "lightgbm" and described["outputs"]["grade"]["size"] == 3
    booster = lightgbm.Booster(model_file=str(export / "booster.txt"))
    predictor = Predictor.load(run_dir / "model")
    frame = pd.read_csv(data / "train.csv").head(200)
    table = predictor.processed(frame, with_targets=False)
    columns = [
        np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float32)
        for c in described["columns"]
    ]
    raw = booster.predict(np.column_stack(columns), raw_score=True)
    want = predictor.score_inputs(frame).logits["grade"]
    np.testing.assert_allclose(raw, want, rtol=1e-5, atol=1e-5)
    # A format that is not the model's is named.
    wrong = run_cli(
        "command=export",
        f"model_dir={run_dir / 'model'}",
        "export.format=torchscript",
        f"hydra.run.dir={data / 'export-wrong'}",
    )
    assert wrong.returncode == 2
    assert error_lines(wrong) == [
        "error: export.format=torchscript does not fit this model (gbm: lightgbm, onnx); use "
        "export.format=auto"
    ]


def test_evaluate_and_predict_a_tree_model_from_the_cli(data, trees):
    run_dir, _ = trees["value"]
    new = mixed_table(300, seed=4)
    new.to_csv(data / "new.csv", index=False)
    out = data / "evaluate"
    result = run_cli(
        "command=evaluate",
        f"model_dir={run_dir / 'model'}",
        f"dataset.path={data / 'new.csv'}",
        f"hydra.run.dir={out}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    evaluation = json.loads((out / "metrics.json").read_text())["evaluation"]
    assert evaluation["value/r2"] > 0.9


@pytest.mark.parametrize("output", list(OUTPUTS))
def test_trees_score_rows_with_a_few_changed_columns_through_their_trees_alone(data, trees, output):
    """Within against_reference, rows that differ from the first rows scored in some columns
    score as the whole booster scores them (permutation importance's shuffles), through the
    trees that split on those columns where they are few; binary, multiclass (a tree per
    class and round) and regression boosters."""
    run_dir, _ = trees[output]
    predictor = Predictor.load(run_dir / "model")
    model: TreeModel = predictor.saved.model
    entry = json.loads((run_dir / "metrics.json").read_text())["training"]["cache_entry"]
    inputs = fitted.read_split(Location(entry), "test", predictor.layout).inputs
    matrix = feature_matrix(inputs, predictor.layout)
    rng = np.random.default_rng(0)
    with model.against_reference():
        changed = model.changed_columns
        assert changed is not None
        assert np.array_equal(changed.scores_of(matrix), model.predict(matrix, raw_score=True))
        for column in range(matrix.shape[1]):
            shuffled = matrix.copy()
            shuffled[:, column] = matrix[rng.permutation(len(matrix)), column]
            whole = model.predict(shuffled, raw_score=True)
            np.testing.assert_allclose(changed.scores_of(shuffled), whole, rtol=0, atol=1e-9)
        parts = [p for p in changed.parts.values() if p is not None and p[0] is not None]
        assert parts and all(p[0].num_trees() < model.booster.num_trees() for p in parts)
    assert model.changed_columns is None


@pytest.fixture(scope="module")
def ensemble(data):
    return trained(data, "ensemble", "ensemble", "good")


def test_the_ensemble_is_weighted_on_validation_and_no_worse_than_a_member(data, ensemble):
    run_dir, metrics = ensemble
    weights = json.loads((run_dir / "metrics.json").read_text())["training"]["ensemble_weights"]
    assert set(weights) == {"network", "gbm"} and sum(weights.values()) == pytest.approx(1.0)
    assert metrics["test"]["good/roc_auc"] > 0.9
    predictor = Predictor.load(run_dir / "model")
    ensemble = predictor.saved.model
    assert isinstance(ensemble, EnsembleModel) and ensemble.weights == weights
    # On the validation split its loss is at most the better member's (the selection's first
    # round is the best member alone; it keeps its best round).
    entry = json.loads((run_dir / "metrics.json").read_text())["training"]["cache_entry"]
    validation = pq.read_table(f"{entry}/validation")
    spec = predictor.layout.outputs[0]
    losses = {}
    for name, model in [("ensemble", ensemble), *ensemble.members.items()]:
        alone = Predictor(
            SavedModel(model, predictor.layout, predictor.saved.meta, predictor.saved.settings)
        )
        scored = alone.score_processed(validation, with_targets=True)
        averaged = spec.head.to_space(scored.logits["good"])
        losses[name] = spec.head.selection_loss(averaged, scored.targets["good"])
    assert losses["ensemble"] <= min(losses["network"], losses["gbm"]) + 1e-9


def _steps_or_sums(kind: str, rows: int = 3000) -> pd.DataFrame:
    """A table whose target trees fit and a network does not (thresholds and their
    interactions: `steps`), or the reverse (a smooth sum of 24 inputs, which axis-aligned
    splits only approximate: `sums`)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(rows, 24))
    if kind == "steps":
        y = 3.0 * (x[:, 0] > 0.5) + 2.0 * ((x[:, 1] > 0.2) & (x[:, 2] < -0.1)) - (x[:, 3] > 1.0)
    else:
        y = x @ np.linspace(-1.0, 1.0, 24)
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(24)])
    frame["y"] = y + rng.normal(scale=0.05, size=rows)
    return frame


@pytest.mark.slow
@pytest.mark.parametrize("kind,winner", [("steps", "gbm"), ("sums", "network")])
def test_auto_weights_the_family_that_wins_on_validation(tmp_path, caplog, kind, winner):
    """model.family=auto trains the network and the trees at every size (side by side here, as
    past 50,000 training rows) and the validation split decides: the family that fits the
    table carries the model, and the log names the figures it was chosen from."""
    _steps_or_sums(kind).to_csv(tmp_path / "t.csv", index=False)
    caplog.set_level("INFO")
    metrics = run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        f"dataset.path={tmp_path / 't.csv'}",
        "dataset.target=y",
        "model.ensemble_side_by_side_rows=0",
        "trainer.epochs=8",
    )
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())["training"]
    weights, figures = saved["ensemble_weights"], saved["ensemble_members_validation"]
    loser = "network" if winner == "gbm" else "gbm"
    assert weights[winner] > weights[loser]
    assert figures[winner]["y/r2"] > figures[loser]["y/r2"]
    assert metrics["validation"]["y/r2"] >= figures[winner]["y/r2"] - 1e-6
    assert "model.family=auto picked ensemble" in caplog.text
    shown = f"{winner} {weights[winner]:.2f} (y/r2 {figures[winner]['y/r2']:.4f})"
    assert shown in caplog.text


def test_the_members_train_side_by_side_into_the_same_ensemble(data, ensemble, caplog):
    """From model.ensemble_side_by_side_rows training rows (0 here; the default's 50,000 keep
    this table one after the other), the network and the trees train at once, each on a share
    of the cores, into the ensemble they make one after the other."""
    run_dir, metrics = ensemble
    caplog.set_level("INFO", logger="runner.training.ensemble_fit")
    side_dir, side = trained(
        data, "ensemble-side", "ensemble", "good", "model.ensemble_side_by_side_rows=0"
    )
    cores = torch.get_num_threads()
    network, trees = cores - cores // 2, cores // 2
    expected = f"the network ({network} threads) and the trees ({trees}) train side by side"
    assert expected in caplog.text
    local = SimpleNamespace(distributed=False, settings=SimpleNamespace(num_threads=None))
    assert ensemble_fit.thread_split(ModelConfig(), local, 2000) is None  # the fixture's table
    assert ensemble_fit.thread_split(ModelConfig(), local, 50_000) == (network, trees)
    for split in ("train", "validation", "test"):
        assert side[split] == metrics[split]
    weights = [
        json.loads((d / "metrics.json").read_text())["training"]["ensemble_weights"]
        for d in (side_dir, run_dir)
    ]
    assert weights[0] == weights[1]

    def booster(directory):  # its text but the thread count it was trained with
        text = (directory / "model" / "members" / "gbm" / "booster.txt").read_text()
        return [line for line in text.splitlines() if "num_threads" not in line]

    assert booster(side_dir) == booster(run_dir)


def test_trees_that_score_beside_the_network_give_the_ensemble_the_same_figures(ensemble):
    """Trees done before the network score the validation split and the training sample in
    their thread while it trains (ensemble_fit.score_while); combine() takes those instead of
    scoring them after, with the same weights and metrics. Once the network is done, the
    thread leaves the rest to combine()."""
    run_dir, _ = ensemble
    saved = Predictor.load(run_dir / "model").saved
    entry = json.loads((run_dir / "metrics.json").read_text())["training"]["cache_entry"]
    splits = Location(entry)
    tables = tuple(fitted.read_split(splits, s, saved.layout) for s in ("train", "validation"))
    network = TrainingResult(
        history=[{"epoch": 1, "train": {}, "validation": {}}],
        best_epoch=1,
        model=saved.model.members["network"],
    )
    trees = TrainingResult(best_epoch=1, model=saved.model.members["gbm"])
    training = threading.Event()
    training.set()
    sample = fitted.spread(tables[0], fitted.TRAIN_METRIC_ROWS)
    wanted = {"validation": tables[1], "train": sample}
    scored = ensemble_fit.score_while(trees.model, wanted, training)
    assert {split: len(logits) for split, logits in scored.items()} == {
        "validation": len(tables[1]),
        "train": len(sample),
    }
    beside = ensemble_fit.combine(network, trees, tables, saved.meta, saved.settings, None, scored)
    after = ensemble_fit.combine(network, trees, tables, saved.meta, saved.settings)
    assert beside.history == after.history and beside.family == after.family
    training.clear()
    assert ensemble_fit.score_while(trees.model, wanted, training) == {}


def test_a_network_that_fails_stops_the_trees_training_beside_it():
    import lightgbm

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 4))
    rounds: list = []

    def fit_trees(threads, failed, training):
        params = {"objective": "binary", "num_threads": threads, "verbosity": -1}
        track = lambda env: rounds.append(env.iteration)  # noqa: E731
        try:
            lightgbm.train(
                params,
                lightgbm.Dataset(x, x[:, 0] > 0),
                num_boost_round=1_000_000,
                callbacks=[track, tree_fit.StopWhenSet(failed)],
            )
        except tree_fit.Stopped:
            rounds.append("stopped")
            raise

    def fit_network():
        while not rounds:  # the trees are boosting
            threading.Event().wait(0.01)
        raise RuntimeError("the network failed")

    threads = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="the network failed"):
        ensemble_fit.side_by_side(fit_network, fit_trees, 1, 1)
    assert rounds[-1] == "stopped" and len(rounds) < 1_000_000
    assert torch.get_num_threads() == threads


def test_trees_done_beside_the_network_hand_it_their_cores():
    """Once the trees (and their scoring) are done, the network may train on every core: the
    offer waits for the loop's next epoch (runner/training/thread_share.py); a network that
    sets trainer.num_threads gets none."""
    from runner.training import thread_share

    cores = torch.get_num_threads()
    seen: list = []

    def fit_network():
        for _ in range(500):  # until the trees' thread has finished and offered
            offered = thread_share.take()
            if offered is not None:
                seen.append(offered)
                break
            threading.Event().wait(0.01)
        return "network"

    trees = lambda threads, failed, training: "trees"  # noqa: E731
    assert ensemble_fit.side_by_side(fit_network, trees, 1, 1) == ("network", "trees")
    assert seen == [cores] and torch.get_num_threads() == cores
    seen.clear()
    ensemble_fit.side_by_side(fit_network, trees, 1, 1, hand_over=False)
    assert seen == [] and thread_share.take() is None


def test_the_loop_trains_on_the_threads_offered_from_its_next_epoch(tmp_path, caplog):
    from runner.training import thread_share

    cores = torch.get_num_threads()
    caplog.set_level("INFO", logger="runner.training.loop")
    thread_share.offer(1)
    try:
        run_experiment(
            tmp_path / "run",
            tmp_path / "cache",
            "model=network",
            "dataset.synthetic_rows=400",
            "trainer.epochs=1",
        )
        assert "epoch 1: training on 1 threads from now on" in caplog.text or cores == 1
    finally:
        torch.set_num_threads(cores)


def explained(data, model_dir, name: str, *overrides) -> pd.DataFrame:
    out = data / name
    run_experiment(
        out,
        data / "cache",
        "command=explain",
        f"model_dir={model_dir}",
        f"dataset.path={data / 'head.csv'}",
        *overrides,
    )
    path = out / "explanations.parquet"
    return pd.read_parquet(path if path.exists() else out / "explanations").sort_values("row")


@pytest.fixture(scope="module")
def head(data):
    pd.read_csv(data / "train.csv").head(400).to_csv(data / "head.csv", index=False)
    return pd.read_csv(data / "head.csv")


def test_explain_gives_tree_shap_of_the_predicted_class_summing_to_its_raw_score(data, trees, head):
    run_dir, _ = trees["grade"]
    frame = explained(data, run_dir / "model", "explain-gbm", "backend=local")
    predictor = Predictor.load(run_dir / "model")
    logits = predictor.score_inputs(head).logits["grade"]
    picked = logits.argmax(axis=1)
    assert frame["class"].tolist() == [predictor.layout.outputs[0].labels[i] for i in picked]
    np.testing.assert_allclose(frame["output"], logits[np.arange(len(head)), picked], atol=1e-5)
    shares = frame.filter(like="attribution.")
    np.testing.assert_allclose(frame["base"] + shares.sum(axis=1), frame["output"], atol=TOLERANCE)
    # The tree inputs that drive the grade carry it; a text's tokens are no tree input, but
    # its components are: the review is explained through them.
    means = shares.abs().mean()
    assert means["attribution.size"] > means["attribution.weight"]
    assert means["attribution.review"] > 0
    # The report puts them beside the permutation importance of the model's own run.
    report = (data / "explain-gbm" / "report.html").read_text()
    assert "Explanations of grade (tree SHAP)" in report and "Permutation importance" in report


def test_explain_gives_the_ensembles_probability_from_its_members_attributions(
    data, ensemble, head
):
    run_dir, _ = ensemble
    frame = explained(data, run_dir / "model", "explain-ensemble", "backend=local")
    predictor = Predictor.load(run_dir / "model")
    probability = 1 / (1 + np.exp(-predictor.score_inputs(head).logits["good"][:, 0]))
    np.testing.assert_allclose(frame["output"], probability, atol=1e-5)
    shares = frame.filter(like="attribution.").sum(axis=1)
    np.testing.assert_allclose(frame["base"] + shares, frame["output"], atol=1e-4)
    assert ((frame["base"] > 0) & (frame["base"] < 1)).all()


def test_trees_refuse_several_outputs_before_any_work(data, tmp_path):
    with pytest.raises(UserError, match=r"model.family=gbm trains trees for one binary, category"):
        run_experiment(
            tmp_path / "run",
            tmp_path / "cache",
            "model=gbm",
            f"dataset.path={data / 'train.csv'}",
            *MIXED_MODEL,
        )
    assert not (tmp_path / "cache").exists()


@pytest.mark.distributed
def test_a_tree_model_on_the_ray_pool_and_served_over_http(data, trees, head, ray_session):
    from ray import serve

    from runner.config import ServeConfig
    from runner.serving.server import deploy

    run_dir, _ = trees["grade"]
    local = pd.read_parquet(run_dir / "predictions.parquet")
    frame = pd.read_csv(data / "train.csv").head(50)
    want = Predictor.load(run_dir / "model").predict(frame)
    # The Ray actor pool, reading the raw rows with dask.
    pool = data / "pool"
    run_experiment(
        pool,
        data / "cache",
        "command=predict",
        f"model_dir={run_dir / 'model'}",
        f"dataset.path={data / 'train.csv'}",
        "backend=ray",
        "processor=dask",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU: 0.5}",
        "predict.pool_min_rows=100",
    )
    path = pool / "predictions.parquet"
    got = pd.read_parquet(path if path.exists() else pool / "predictions").sort_values("row")
    head = got.head(50).reset_index(drop=True)
    np.testing.assert_allclose(head["grade_probability_A"], want["grade_probability_A"], atol=1e-6)
    assert len(got) == 2500 and len(local) > 0
    # Explained by the same pool: what the local explanation says, row for row.
    here = explained(data, run_dir / "model", "explain-here", "backend=local")
    pooled = explained(
        data,
        run_dir / "model",
        "explain-pool",
        "backend=ray",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU: 0.5}",
        "predict.pool_min_rows=100",
    )
    assert pooled["row"].tolist() == here["row"].tolist() == list(range(400))  # head.csv
    for column in here.columns.drop("class"):
        np.testing.assert_allclose(pooled[column], here[column], atol=1e-9, err_msg=column)
    # Served over HTTP on Ray Serve: what the Predictor answers.
    url = deploy(ServeConfig(port=free_port()), str(run_dir / "model"))
    try:
        rows = json.loads(frame.to_json(orient="records"))
        response = requests.post(f"{url}/predict", json=rows, timeout=60)
        assert response.status_code == 200, response.text
        served = pd.DataFrame(response.json())
        assert served["grade_prediction"].tolist() == want["grade_prediction"].tolist()
        np.testing.assert_allclose(
            served["grade_probability_A"], want["grade_probability_A"], atol=1e-6
        )
    finally:
        serve.shutdown()


def test_trees_without_an_input_to_split_on_are_named_and_the_ensemble_keeps_the_network(
    tmp_path,
):
    """Long texts on a small table have neither components nor a target score: nothing for
    trees to split on."""
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(300)])
    review = [" ".join(rng.choice(words, 80)) for _ in range(600)]  # 70+ distinct words
    table = pd.DataFrame({"review": review, "good": rng.random(600) < 0.5})
    table.to_csv(tmp_path / "t.csv", index=False)
    model = [
        "model.input_features=[{name:review,type:text}]",
        "model.output_features=[{name:good,type:binary}]",
        f"dataset.path={tmp_path / 't.csv'}",
        "trainer.epochs=1",
    ]
    with pytest.raises(UserError, match="model.family=gbm has no input trees can split on"):
        run_experiment(tmp_path / "gbm", tmp_path / "cache", "model=gbm", *model)
    run_experiment(tmp_path / "ensemble", tmp_path / "cache", "model=ensemble", *model)
    saved = json.loads((tmp_path / "ensemble" / "metrics.json").read_text())
    assert saved["training"]["ensemble_weights"] == {"network": 1.0}
    assert Predictor.load(tmp_path / "ensemble" / "model").predict(table.head(3)).shape[0] == 3


@pytest.mark.distributed
def test_trees_train_data_parallel_on_ray_at_the_accuracy_of_one_worker(data, trees, ray_session):
    _, local = trees["good"]
    run_dir, metrics = trained(
        data,
        "gbm-ray",
        "gbm",
        "good",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU: 0.5}",
        "model.gbm.num_threads=1",  # more than a worker's CPUs spins: 1.1 s became 62 s
        "model.gbm.ray_from_rows=0",
        backend="ray",
    )
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["training"]["world_size"] == 2 and saved["training"]["gbm_rounds"] >= 1
    # Each worker read its own share of the training rows, not the whole split, and boosted
    # on the threads it was given.
    workers = saved["training"]["gbm_workers"]
    train_rows = json.loads((run_dir / "model" / "meta.json").read_text())["rows"]["train"]
    assert [w["rank"] for w in workers] == [0, 1]
    assert sum(w["train_rows"] for w in workers) == train_rows
    assert all(0 < w["train_rows"] < train_rows for w in workers)
    assert all(w["threads"] == 1 for w in workers)
    booster = (run_dir / "model" / "booster.txt").read_text()
    assert "[num_threads: 1]" in booster and "[tree_learner: data]" in booster
    assert abs(metrics["test"]["good/roc_auc"] - local["test"]["good/roc_auc"]) < 0.02
    assert isinstance(Predictor.load(run_dir / "model").saved.model, TreeModel)


def test_the_driver_reads_the_same_spread_training_rows_a_row_group_at_a_time(trees, tmp_path):
    """Trees on Ray: the driver's training metrics come from _read_spread, which must pick the
    rows _spread picks from the whole split, here across several files and row groups."""
    run_dir, _ = trees["good"]
    entry = json.loads((run_dir / "metrics.json").read_text())["training"]["cache_entry"]
    layout = Predictor.load(run_dir / "model").layout
    whole = pq.read_table(f"{entry}/train")
    split = tmp_path / "splits" / "train"
    split.mkdir(parents=True)
    half = whole.num_rows // 2
    pq.write_table(whole.slice(0, half), split / "part-0.parquet", row_group_size=97)
    pq.write_table(whole.slice(half), split / "part-1.parquet", row_group_size=211)
    splits = Location(str(tmp_path / "splits"))
    spread = fitted.read_spread(splits, "train", layout, 300)
    expected = fitted.spread(fitted.read_split(splits, "train", layout), 300)
    assert len(spread) == 300
    assert torch.equal(spread.row_ids, expected.row_ids)
    for key in (NUMERIC, CATEGORY):  # what trees read (token matrices pad to their rows)
        torch.testing.assert_close(
            spread.inputs[key], expected.inputs[key], rtol=0, atol=0, equal_nan=True
        )


def test_a_ray_workers_tree_threads_come_from_its_cpus_unless_set():
    assert tree_fit.worker_threads(None, {"CPU": 0.5}) == 1
    assert tree_fit.worker_threads(None, {"CPU": 3.0}) == 3
    assert tree_fit.worker_threads(None, {}) == 1
    assert tree_fit.worker_threads(4, {"CPU": 1.0}) == 4


def test_training_metrics_of_fitted_models_come_from_evenly_spread_rows():
    import torch

    from runner.loading.tensors import TensorTable

    rows = torch.arange(10)
    table = TensorTable({"x": rows.float()}, {"y": rows * 2}, rows + 100)
    spread = fitted.spread(table, 4)
    assert spread.row_ids.tolist() == [100, 103, 106, 109]  # the first and last rows, even steps
    assert spread.targets["y"].tolist() == [0, 6, 12, 18]
    assert fitted.spread(table, 20) is table


def test_the_configs_tree_output_types_are_those_whose_model_side_says_so():
    from runner.config import TREE_OUTPUT_TYPES
    from runner.processing.features.model_side import MODEL_SIDES

    assert set(TREE_OUTPUT_TYPES) == {name for name, side in MODEL_SIDES.items() if side.trees}
