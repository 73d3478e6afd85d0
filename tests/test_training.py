"""The training loop: every feature type end to end, determinism, resume, early stopping, outputs."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from helpers import FAST, MIXED_MODEL, ROOT, run_experiment
from sklearn.datasets import load_diabetes, load_wine

from runner.scoring.decoding import BASELINE_MARGIN


def test_every_feature_type_end_to_end(tmp_path, cache_dir, mixed_csv):
    metrics = run_experiment(
        tmp_path / "run", cache_dir, f"dataset.path={mixed_csv}", *MIXED_MODEL, "trainer.epochs=25"
    )
    test = metrics["test"]
    assert test["good/roc_auc"] > 0.9
    assert test["grade/accuracy"] > metrics["baseline"]["grade/accuracy"] + 0.2
    assert 0 < test["grade/macro_f1"] <= 1
    assert test["value/r2"] > 0.8
    assert {"value/mse", "value/mae", "good/accuracy", "good/loss", "grade/loss"} <= set(test)
    # The mean's baseline for a number output: an r2 near 0, an mse far above the model's.
    baseline = metrics["baseline"]
    assert abs(baseline["value/r2"]) < 0.05 and baseline["value/mse"] > 3 * test["value/mse"]
    predictions = pd.read_parquet(tmp_path / "run" / "predictions.parquet")
    assert {
        "row",
        "good_prediction",
        "good_probability",
        "grade_prediction",
        "grade_probability_A",
        "grade_probability_B",
        "grade_probability_C",
        "value_prediction",
        "value",
    } <= set(predictions.columns)
    probs = predictions[["grade_probability_A", "grade_probability_B", "grade_probability_C"]].sum(
        axis=1
    )
    assert np.allclose(probs, 1.0)
    assert set(predictions["grade_prediction"]) <= {"A", "B", "C"}
    raw = pd.read_csv(mixed_csv)
    # Predictions are in raw units and matched to their raw rows.
    err = (
        (predictions["value_prediction"] - raw.loc[predictions["row"], "value"].to_numpy())
        .abs()
        .mean()
    )
    assert err < 1.5


def test_date_set_and_vector_inputs_carry_signal_and_a_log1p_target_comes_back_raw(
    tmp_path, cache_dir
):
    """The targets depend only on the new types' contents: a set member and a weekday decide
    the class, a vector's first value and the hour drive a right-skewed amount."""
    rng = np.random.default_rng(4)
    rows = 4000
    days = np.datetime64("2024-01-01T00:00") + rng.integers(0, 365 * 24, rows).astype(
        "timedelta64[h]"
    )
    weekend = pd.DatetimeIndex(days).weekday >= 5
    sale = rng.random(rows) < 0.4
    tags = [
        "|".join(t)
        for t in zip(np.where(sale, "sale", "full"), rng.choice(["a", "b"], rows), strict=True)
    ]
    emb = rng.normal(size=(rows, 3))
    hour = pd.DatetimeIndex(days).hour
    frame = pd.DataFrame(
        {
            "when": [str(d).replace("T", " ") for d in days],
            "tags": tags,
            "emb": [",".join(f"{v:.4f}" for v in e) for e in emb],
            "buys": sale ^ weekend,
            "picks": [
                "|".join(p)
                for p in zip(
                    np.where(sale, "deal", ""), np.where(weekend, "weekend", ""), strict=True
                )
            ],
            "amount": np.round(np.exp(3 + emb[:, 0] + 0.05 * hour), 2),
        }
    )
    frame.to_csv(tmp_path / "shop.csv", index=False)
    metrics = run_experiment(
        tmp_path / "run",
        cache_dir,
        f"dataset.path={tmp_path / 'shop.csv'}",
        "model.input_features=[{name:when,type:date},{name:tags,type:set},{name:emb,type:vector}]",
        "model.output_features=[{name:buys,type:binary},{name:picks,type:set},"
        "{name:amount,type:number,preprocessing:{normalization:log1p}}]",
        "trainer.epochs=30",
    )
    assert metrics["test"]["buys/accuracy"] > 0.9  # needs both the set member and the weekday
    assert metrics["test"]["amount/r2"] > 0.8  # in raw units
    assert metrics["test"]["picks/jaccard"] > 0.9 and metrics["test"]["picks/micro_f1"] > 0.9
    predictions = pd.read_parquet(tmp_path / "run" / "predictions.parquet")
    raw = frame.loc[predictions["row"], "amount"].to_numpy()
    assert np.median(predictions["amount_prediction"] / raw) == pytest.approx(1.0, abs=0.15)
    assert {"picks_prediction", "picks_probability_deal", "picks_probability_weekend"} <= set(
        predictions.columns
    )

    def members(cell: str) -> set:
        return set(cell.split("|")) - {""}

    truth = frame.loc[predictions["row"], "picks"]
    right = [
        members(p) == members(t)
        for p, t in zip(predictions["picks_prediction"], truth, strict=True)
    ]
    assert np.mean(right) > 0.9


@pytest.mark.slow
@pytest.mark.parametrize(
    "combiner",
    [
        "residual",
        "transformer",
        "concat model.number_encoder=periodic",
        "concat model.number_encoder=piecewise",
        "concat model.ensemble_size=4",
    ],
)
def test_other_combiners_learn_every_feature_type_and_reload(
    tmp_path, cache_dir, mixed_csv, combiner
):
    from runner import Predictor

    metrics = run_experiment(
        tmp_path / "run",
        cache_dir,
        f"dataset.path={mixed_csv}",
        *MIXED_MODEL,
        *f"model.combiner={combiner}".split(),
        "trainer.epochs=15",
    )
    assert metrics["test"]["good/roc_auc"] > 0.85
    assert metrics["test"]["value/r2"] > 0.6
    saved = pd.read_parquet(tmp_path / "run" / "predictions.parquet")
    raw = pd.read_csv(mixed_csv).loc[saved["row"]].reset_index(drop=True)
    again = Predictor.load(tmp_path / "run" / "model").predict(raw)
    np.testing.assert_allclose(again["good_probability"], saved["good_probability"], atol=1e-6)


def test_real_multiclass_and_regression_datasets(tmp_path, cache_dir):
    wine = load_wine(as_frame=True).frame
    wine["target"] = wine["target"].map({0: "barolo", 1: "grignolino", 2: "barbera"})
    wine.to_csv(tmp_path / "wine.csv", index=False)
    inputs = ",".join(f"{{name:{c},type:number}}" for c in wine.columns if c != "target")
    m = run_experiment(
        tmp_path / "wine",
        cache_dir,
        f"dataset.path={tmp_path / 'wine.csv'}",
        f"model.input_features=[{inputs}]",
        "model.output_features=[{name:target,type:category}]",
        "trainer.epochs=40",
        "trainer.batch_size=32",
    )
    assert m["test"]["target/accuracy"] > 0.85

    diabetes = load_diabetes(as_frame=True, scaled=False).frame
    diabetes.to_parquet(tmp_path / "diabetes.parquet")
    inputs = ",".join(
        f"{{name:{c},type:number}}" for c in diabetes.columns if c not in ("target", "sex")
    )
    m = run_experiment(
        tmp_path / "diabetes",
        cache_dir,
        f"dataset.path={tmp_path / 'diabetes.parquet'}",
        f"model.input_features=[{inputs},{{name:sex,type:category}}]",
        "model.output_features=[{name:target,type:number}]",
        "trainer.epochs=60",
        "trainer.batch_size=32",
        "trainer.early_stopping.metric=target/mse",
    )
    assert m["test"]["target/r2"] > 0.3  # the usual linear baseline on this data is ~0.45


@pytest.mark.slow
def test_same_seed_same_metrics(tmp_path, cache_dir):
    a = run_experiment(tmp_path / "a", cache_dir, *FAST, "model.dropout=0.1")
    b = run_experiment(tmp_path / "b", cache_dir, *FAST, "model.dropout=0.1")
    c = run_experiment(tmp_path / "c", cache_dir, *FAST, "model.dropout=0.1", "seed=1")
    assert a == b
    assert a["test"] != c["test"]


def history(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def test_resume_continues_exactly(tmp_path, cache_dir):
    """Train 6 epochs straight, or 3 then resume to 6: the same model and metrics (the weight
    average resumed with the rest)."""
    common = [
        "trainer.early_stopping.patience=0",
        "model.dropout=0.1",
        "dataset.synthetic_rows=3000",
        "trainer.ema_epochs=1",
    ]
    straight = run_experiment(tmp_path / "straight", cache_dir, *common, "trainer.epochs=6")
    run_experiment(tmp_path / "first", cache_dir, *common, "trainer.epochs=3")
    resumed = run_experiment(
        tmp_path / "resumed",
        cache_dir,
        *common,
        "trainer.epochs=6",
        f"trainer.resume_from={tmp_path / 'first'}",
    )
    assert resumed == straight
    report = history(tmp_path / "resumed")["training"]
    assert report["resumed_at_epoch"] == 3 and report["epochs_run"] == 6


def test_weight_average_follows_the_steps_and_is_what_validation_and_the_model_keep(
    tmp_path, cache_dir
):
    import torch
    from torch import nn

    from runner.training.averaging import WeightAverage

    # The arithmetic: a warm-up of min(decay, (1 + n) / (10 + n)), then the decay.
    layer = nn.Linear(1, 1, bias=False)
    average, expected = WeightAverage(layer, decay=0.5), layer.weight.item()
    for n, value in enumerate([1.0, 2.0, 3.0, 4.0]):
        layer.weight.data.fill_(value)
        average.update()
        keep = min(0.5, (1 + n) / (10 + n))
        expected = keep * expected + (1 - keep) * value
        assert float(average.module.weight) == pytest.approx(expected)

    run_dir = tmp_path / "ema"
    rows = 3000
    run_experiment(
        run_dir,
        cache_dir,
        *FAST,
        "trainer.ema_epochs=1",
        "trainer.early_stopping.patience=0",
        f"dataset.synthetic_rows={rows}",
    )
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    best = torch.load(run_dir / "checkpoints" / "best.pt", weights_only=False)
    weights = last["average"]["weights"]
    entry = history(run_dir)["training"]["cache_entry"].rsplit("/data-", 1)[0]
    train_rows = json.loads(open(f"{entry}/meta.json").read())["rows"]["train"]
    assert last["average"]["steps"] == 3 * -(-train_rows // 256)  # every step of 3 epochs
    # The average is not the live weights, and the best checkpoint keeps the average.
    assert any(not torch.equal(weights[k], last["model"][k]) for k in weights)
    if best["epoch"] == 3:
        assert all(torch.equal(weights[k], best["model"][k]) for k in weights)
    else:
        assert any(not torch.equal(last["model"][k], best["model"][k]) for k in weights)


def test_cosine_schedule_decays_the_rate_epoch_by_epoch(tmp_path, cache_dir):
    import torch

    run_dir = tmp_path / "cosine"
    run_experiment(
        run_dir,
        cache_dir,
        *FAST,
        "trainer.schedule=cosine",
        "trainer.learning_rate=0.004",
        "trainer.early_stopping.patience=0",
    )
    last = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)
    rates = [h["learning_rate"] for h in last["history"]]
    assert rates == pytest.approx([0.004, 0.003, 0.001])


@pytest.mark.slow
def test_resume_after_a_real_kill(tmp_path, cache_dir):
    run_dir = tmp_path / "killed"
    args = [
        "trainer.epochs=200",
        "trainer.early_stopping.patience=0",
        "dataset.synthetic_rows=40000",
        "trainer.progress_bar=false",
        f"cache_dir={cache_dir}",
    ]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args, f"hydra.run.dir={run_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    last = run_dir / "checkpoints" / "last.pt"
    deadline = time.time() + 120
    while time.time() < deadline and not last.exists():
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert last.exists() and not (run_dir / "model").exists()
    import torch

    done = torch.load(last, weights_only=False)["epoch"]
    assert 1 <= done < 200
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            *args[:-1],
            "trainer.epochs=" + str(done + 2),
            f"cache_dir={cache_dir}",
            f"trainer.resume_from={run_dir}",
            f"hydra.run.dir={tmp_path / 'resumed'}",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"after epoch {done}" in result.stdout + result.stderr
    report = history(tmp_path / "resumed")["training"]
    assert report["resumed_at_epoch"] == done and report["epochs_run"] == done + 2


def test_early_stopping_on_a_chosen_metric(tmp_path, cache_dir):
    m = run_experiment(
        tmp_path / "run",
        cache_dir,
        "trainer.epochs=60",
        "trainer.learning_rate=0.03",
        "trainer.early_stopping.metric=label/roc_auc",
        "trainer.early_stopping.patience=2",
    )
    report = history(tmp_path / "run")["training"]
    assert report["stopped_early"] and report["epochs_run"] < 60
    assert report["epochs_run"] == report["best_epoch"] + 2
    assert report["monitor"] == "label/roc_auc"
    assert m["validation"]["label/roc_auc"] > 0.8


def test_unknown_early_stopping_metric(tmp_path, cache_dir):
    from runner.errors import UserError

    with pytest.raises(UserError, match="label/roc_auc"):
        run_experiment(
            tmp_path / "run", cache_dir, *FAST, "trainer.early_stopping.metric=label/macro_f1"
        )


def test_auto_picks_are_logged_and_a_model_saved_before_them_still_loads(
    tmp_path, cache_dir, caplog
):
    """The default (model.family=auto) trains the ensemble of trees and one network on a small
    table with one binary output, and says why; the network alone picks its members from the
    training rows; a model dir whose config has neither key (saved before them) is one network."""
    import logging

    import yaml

    from runner import Predictor
    from runner.model.ensemble import EnsembleModel

    with caplog.at_level(logging.INFO, logger="runner.commands"):
        run_experiment(tmp_path / "auto", cache_dir, *FAST)
    assert (
        "model.family=auto picked ensemble: the network and the trees on the same splits, weighted on validation"
        in caplog.text
    )
    assert "model.ensemble_size=auto picked 1: in the ensemble family" in caplog.text
    auto = Predictor.load(tmp_path / "auto" / "model").saved
    assert isinstance(auto.model, EnsembleModel) and auto.model.members["network"].members == 1
    saved = yaml.safe_load((tmp_path / "auto" / "model" / "config.yaml").read_text())
    assert (saved["model"]["family"], saved["model"]["ensemble_size"]) == ("ensemble", 1)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="runner.commands"):
        run_experiment(tmp_path / "net", cache_dir, *FAST, "model.family=network")
    assert "model.ensemble_size=auto picked 4: 6,993 training rows" in caplog.text
    assert Predictor.load(tmp_path / "net" / "model").saved.model.members == 4

    run_experiment(
        tmp_path / "one", cache_dir, *FAST, "model.family=network", "model.ensemble_size=1"
    )
    config = tmp_path / "one" / "model" / "config.yaml"
    saved = yaml.safe_load(config.read_text())
    del saved["model"]["ensemble_size"], saved["model"]["family"]
    config.write_text(yaml.safe_dump(saved))
    assert Predictor.load(tmp_path / "one" / "model").saved.model.members == 1


def test_run_outputs(tmp_path, cache_dir, capsys):
    """The run's files, its TensorBoard events, and a tracker defined in the tests alone (a
    module and its config node: tests/probe_tracker.py) told of the run in order."""
    from probe_tracker import calls

    run_dir, probe = tmp_path / "run", tmp_path / "probe.jsonl"
    run_experiment(
        run_dir,
        cache_dir,
        *FAST,
        "trainer.checkpoint_every=2",
        "+logger.probe._target_=probe_tracker.ProbeTracker",
        f"+logger.probe.path={probe}",
    )
    for name in (
        "model/ensemble.json",  # the default on this table: the network and the trees
        "model/members/network/weights.pt",
        "model/members/gbm/booster.txt",
        "model/meta.json",
        "model/config.yaml",
        "checkpoints/best.pt",
        "checkpoints/last.pt",
        "metrics.json",
        "predictions.parquet",
        "learning_curves.png",
    ):
        assert (run_dir / name).is_file(), name
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "validation/loss", "validation/label/roc_auc", "learning_rate"} <= tags
    assert len(events.Scalars("validation/loss")) == 3
    told = calls(probe)
    assert [c["call"] for c in told] == [
        "prepare",
        "start",
        *["log_epoch"] * 3,
        "close_epochs",
        "log_model",
        "log_results",
        "finish",
    ]
    assert told[1]["tags"]["runner.trainer"] == "local" and told[1]["trial"] is None
    assert [c["epoch"] for c in told[2:5]] == [1, 2, 3]
    assert "label/roc_auc" in told[2]["validation"]
    assert {"ensemble.json", "members", "meta.json", "config.yaml"} <= set(told[6]["files"])
    assert "label/roc_auc" in told[7]["metrics"]["test"]
    assert told[-1] == {"call": "finish", "status": "completed"}
    assert f"probe        {probe}" in capsys.readouterr().out  # the summary's location line
    png = (run_dir / "learning_curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000


def test_predict_and_evaluate_on_raw_data_without_the_cache(tmp_path, cache_dir):
    from runner.processing.synthetic import make_synthetic

    run_experiment(tmp_path / "train", cache_dir, "trainer.epochs=15")
    import shutil

    shutil.rmtree(cache_dir)
    new = make_synthetic(400)
    new.loc[0, "color"] = "ultraviolet"  # unseen category -> unknown
    new.loc[1, "x4"] = None
    new.drop(columns=["label"]).to_csv(tmp_path / "new.csv", index=False)
    new.to_csv(tmp_path / "labelled.csv", index=False)
    model_dir = tmp_path / "train" / "model"
    run_experiment(
        tmp_path / "predict",
        cache_dir,
        "command=predict",
        f"model_dir={model_dir}",
        f"dataset.path={tmp_path / 'new.csv'}",
    )
    predictions = pd.read_parquet(tmp_path / "predict" / "predictions.parquet")
    assert len(predictions) == 400
    assert predictions["row"].tolist() == list(range(400))
    # The synthetic label is a boolean: predicted as one (typed_labels), not as 'True'/'False'.
    assert predictions["label_prediction"].dtype == bool
    assert predictions["label_probability"].between(0, 1).all()
    metrics = run_experiment(
        tmp_path / "evaluate",
        cache_dir,
        "command=evaluate",
        f"model_dir={model_dir}",
        f"dataset.path={tmp_path / 'labelled.csv'}",
    )
    assert metrics["evaluation"]["label/roc_auc"] > 0.85
    saved = history(tmp_path / "evaluate")
    assert saved["rows"] == 400 and saved["evaluation"] == metrics["evaluation"]
    accuracy = (predictions["label_prediction"] == new["label"]).mean()  # the data's own values
    assert accuracy == pytest.approx(metrics["evaluation"]["label/accuracy"])
    assert not cache_dir.exists() or not any(cache_dir.iterdir())  # predict never touched the cache


def _titles_table(rows: int, seed: int) -> pd.DataFrame:
    """Short titles whose words move a 1-10 rating, and a number that moves it too."""
    rng = np.random.default_rng(seed)
    words = np.array(["war", "love", "night", "city", "dark", "summer", "king", "dream"])
    effect = np.array([-1.5, 1.0, -0.5, 0.2, -1.0, 1.2, 0.6, 0.8])
    picks = rng.integers(0, len(words), size=(rows, 2))
    size = rng.normal(size=rows)
    rating = 5.5 + effect[picks].sum(axis=1) + 0.8 * size + rng.normal(scale=0.3, size=rows)
    return pd.DataFrame(
        {
            "title": [" ".join(words[p]) for p in picks],
            "size": size,
            "rating": np.clip(rating, 1.0, 10.0),
        }
    )


TITLES_MODEL = [
    "model.input_features=[{name:title,type:text},{name:size,type:number}]",
    "model.output_features=[{name:rating,type:number}]",
]


def test_unseen_words_predict_as_an_empty_text_and_inside_the_target_range(
    tmp_path, cache_dir, caplog
):
    """Words never seen in training are the one trained unknown token (and score as the
    training mean in the title's target score): a title made only of them predicts exactly
    what an empty title predicts, and every prediction stays inside the
    training target's range, even for numbers far outside the training inputs'. The automatic
    choices are logged with their reasons and stored in meta.json."""
    from runner import Predictor

    caplog.set_level("INFO")
    table = _titles_table(2000, seed=0)
    table.to_csv(tmp_path / "titles.csv", index=False)
    metrics = run_experiment(
        tmp_path / "run",
        cache_dir,
        f"dataset.path={tmp_path / 'titles.csv'}",
        *TITLES_MODEL,
        "trainer.epochs=8",
    )
    assert metrics["test"]["rating/r2"] > 0.8
    assert "feature 'size': normalization robust" in caplog.text
    assert "feature 'rating': normalization zscore: z-scored target" in caplog.text
    assert "feature 'title': vocabulary of" in caplog.text
    assert "feature 'title': a target score (the target: its" in caplog.text
    meta = json.loads((tmp_path / "run" / "model" / "meta.json").read_text())
    assert "skewness" in meta["features"]["size"]["stats"]["reason"]
    assert meta["features"]["title"]["stats"]["vocab"][:1] != []
    assert meta["features"]["title"]["stats"]["score"]["training_rows"] > 1000
    predictor = Predictor.load(tmp_path / "run" / "model")
    sizes = [0.0, 0.5, -1.0, 40.0, -40.0]
    unseen = pd.DataFrame({"title": ["qwxz vbnm"] * 5, "size": sizes})
    empty = pd.DataFrame({"title": [""] * 5, "size": sizes})
    missing = pd.DataFrame({"title": [None] * 5, "size": sizes})
    got = Predictor.load(tmp_path / "run" / "model").predict(unseen)["rating_prediction"]
    np.testing.assert_allclose(got, predictor.predict(empty)["rating_prediction"], atol=1e-6)
    np.testing.assert_allclose(got, predictor.predict(missing)["rating_prediction"], atol=1e-6)
    low, high = table.loc[:, "rating"].min(), table.loc[:, "rating"].max()
    extreme = pd.DataFrame({"title": ["war dark night"] * 2, "size": [-1e6, 1e6]})
    for frame in (unseen, extreme):
        predicted = predictor.predict(frame)["rating_prediction"]
        assert predicted.between(low - 1e-9, high + 1e-9).all()


def test_a_model_no_better_than_the_mean_is_named_in_the_summary(tmp_path, cache_dir, capsys):
    """A target the inputs cannot explain (noise), trained at a rate that leaves the network
    as it started: the summary says in one line that validation is no better than predicting
    the training mean, and metrics.json records it."""
    rng = np.random.default_rng(0)
    noise = pd.DataFrame({"x": rng.normal(size=600), "y": rng.normal(size=600)})
    noise.to_csv(tmp_path / "noise.csv", index=False)
    run_experiment(
        tmp_path / "run",
        cache_dir,
        f"dataset.path={tmp_path / 'noise.csv'}",
        "model.input_features=[{name:x,type:number}]",
        "model.output_features=[{name:y,type:number}]",
        "trainer.learning_rate=1e-8",
        *FAST,
    )
    out = capsys.readouterr().out
    warning = [line for line in out.splitlines() if line.startswith("warning: y/r2")]
    assert len(warning) == 1 and "no better than the baseline's" in warning[0]
    # What to change, from the curve: at this rate the loss never moved.
    assert warning[0].endswith("raise trainer.learning_rate (now 1e-08)"), warning[0]
    assert "its training loss barely moved" in warning[0]
    check = json.loads((tmp_path / "run" / "metrics.json").read_text())["baseline_check"]
    assert check["y"]["advice"] in warning[0]
    assert check["y"]["better"] is False and check["y"]["metric"] == "y/r2"
    assert check["y"]["value"] < check["y"]["baseline"] + BASELINE_MARGIN


def _cpu_flags() -> set[str]:
    """The kernel's word on this CPU (independent of torch's own probe)."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_auto_precision_is_bf16_steps_on_a_native_bf16_cpu_and_scoring_stays_full(
    tmp_path, cache_dir, caplog
):
    """trainer.precision=auto (the default) picks bf16 steps exactly where the CPU has bf16 in
    hardware, says so and records it; validation scores in full precision whatever the steps'
    precision, so the best epoch is picked on what the saved model answers."""
    import logging

    import torch
    from torch import nn

    from runner.training.step import Step, training_precision

    native = bool(_cpu_flags() & {"avx512_bf16", "amx_bf16"})
    expected = "bf16" if native else "32"
    with caplog.at_level(logging.INFO, logger="runner.training.loop"):
        metrics = run_experiment(tmp_path / "run", cache_dir, *FAST)
    assert f"trainer.precision=auto picked {expected}" in caplog.text
    assert history(tmp_path / "run")["training"]["precision"] == expected
    assert metrics["test"]["label/roc_auc"] > 0.8
    assert training_precision("auto", torch.device("cuda")) == ("32", "full precision on cuda")
    assert training_precision("fp16", torch.device("cpu"))[0] == "fp16"  # as the user set it

    class Net(nn.Module):  # the runner's models take and give dicts of tensors
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

        def forward(self, inputs):
            return {"out": self.mlp(inputs["x"])}

    class Chunk:  # an evaluation chunk as the loader yields one
        inputs = {"x": torch.randn(32, 64)}

    torch.manual_seed(0)
    model = Net()
    step = Step(model, None, None, torch.device("cpu"), "bf16")
    with torch.inference_mode():
        full = model(Chunk.inputs)["out"]
        with step.autocast():
            steps = model(Chunk.inputs)["out"]
        evaluated = next(step.evaluation().chunks([Chunk()]))[1]["out"]
    assert not torch.equal(steps.float(), full)  # the steps' autocast is really bf16
    assert torch.equal(evaluated, full)  # and validation is not


WORKER = """
import pickle, sys
from runner.training.loop import run_training
from runner.training.strategies import LocalStrategy

with open(sys.argv[1], "rb") as f:
    job = pickle.load(f)
result = run_training(job, LocalStrategy(use_gpu=False))
heavy = sorted(m for m in ("pandas", "hydra", "omegaconf", "scipy") if m in sys.modules)
print(",".join(heavy) + "|" + str(len(result.history)) + "|" + str(result.best_value))
"""


@pytest.mark.slow
def test_a_training_worker_imports_neither_pandas_nor_hydra(tmp_path, mixed_csv, monkeypatch):
    """What a fresh worker (a Horovod actor on Ray) does, in a fresh process: unpickle the job
    and train it. It reads the cache without pandas and the settings without OmegaConf
    or Hydra, which a fresh actor would otherwise import before its first step (0.5-0.8 s,
    profiled). Every input type is there; the outputs are labels (a number output's decoder
    imports the feature code, and loader=local, elastic runs' loader, reads through
    pyarrow.dataset, which imports pandas; a DDP worker has pandas anyway: ray.train imports
    it)."""
    import pickle

    from runner.api import train
    from runner.training.trainers import LocalTrainer

    job_file = tmp_path / "job.pkl"

    class Captured(Exception):
        pass

    def capture(self, make_job, backend):
        job_file.write_bytes(pickle.dumps(make_job(1)))
        raise Captured

    monkeypatch.setattr(LocalTrainer, "fit", capture)
    inputs = MIXED_MODEL[0]
    with pytest.raises(Captured):
        train(
            str(mixed_csv),
            overrides=[
                inputs,
                "model.output_features=[{name:good,type:binary},{name:grade,type:category}]",
                "loader=ray",
                f"cache_dir={tmp_path / 'cache'}",
                *FAST,
            ],
            run_dir=tmp_path / "run",
        )
    env = {k: v for k, v in os.environ.items() if k != "__MODIN_AUTOIMPORT_PANDAS__"}
    worker = subprocess.run(
        [sys.executable, "-c", WORKER, str(job_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert worker.returncode == 0 and worker.stdout.strip(), worker.stderr[-3000:]
    heavy, epochs, loss = worker.stdout.strip().splitlines()[-1].split("|")
    assert heavy == "", worker.stdout + worker.stderr[-3000:]  # none of them was imported
    assert int(epochs) == 3 and 0 < float(loss) < 5
