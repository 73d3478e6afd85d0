"""python run.py as users run it: the default experiment, every command, Hydra's
own flags, and every bad input (one-line error, non-zero exit, nothing half-written)."""

import json

import pandas as pd
import pytest
from helpers import mixed_table, run_cli

OUTPUTS = ("model", "metrics.json", "predictions.parquet", "learning_curves.png")


def test_default_experiment_beats_the_majority_baseline(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(
        f"hydra.run.dir={run_dir}", env={"TABULAR_RUNNER_CACHE": str(tmp_path / "cache")}
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test"]["label/accuracy"] > metrics["baseline"]["label/accuracy"] + 0.2
    assert metrics["test"]["label/roc_auc"] > 0.9
    for name in (*OUTPUTS, ".hydra/config.yaml", "checkpoints/best.pt", "tensorboard"):
        assert (run_dir / name).exists(), name
    # The summary: a metric table and where each output went.
    assert (
        "label/roc_auc" in result.stdout and str(run_dir / "predictions.parquet") in result.stdout
    )


def test_every_command_through_the_cli(tmp_path):
    cache = {"TABULAR_RUNNER_CACHE": str(tmp_path / "cache")}
    data = tmp_path / "mixed.csv"
    mixed_table(1500).to_csv(data, index=False)
    model = [
        "model.input_features=[{name:size,type:number},{name:shape,type:category},{name:shiny,type:binary},"
        "{name:review,type:text}]",
        "model.output_features=[{name:grade,type:category}]",
    ]
    pre = run_cli(
        "command=preprocess",
        f"dataset.path={data}",
        *model,
        f"hydra.run.dir={tmp_path / 'pre'}",
        env=cache,
    )
    assert pre.returncode == 0 and "processed splits" in pre.stdout, pre.stderr
    train = run_cli(
        "command=train",
        f"dataset.path={data}",
        *model,
        "trainer.epochs=5",
        f"hydra.run.dir={tmp_path / 'train'}",
        env=cache,
    )
    assert train.returncode == 0, train.stderr
    assert "cache hit" in train.stderr + train.stdout
    assert (tmp_path / "train" / "model" / "weights.pt").exists()
    assert not (tmp_path / "train" / "predictions.parquet").exists()
    raw = mixed_table(50, seed=1).drop(columns=["grade"])
    raw.to_csv(tmp_path / "new.csv", index=False)
    predict = run_cli(
        "command=predict",
        f"model_dir={tmp_path / 'train' / 'model'}",
        f"dataset.path={tmp_path / 'new.csv'}",
        f"hydra.run.dir={tmp_path / 'predict'}",
        env=cache,
    )
    assert predict.returncode == 0, predict.stderr
    predictions = pd.read_parquet(tmp_path / "predict" / "predictions.parquet")
    assert len(predictions) == 50 and "grade_probability_A" in predictions
    evaluate = run_cli(
        "command=evaluate",
        f"model_dir={tmp_path / 'train' / 'model'}",
        f"dataset.path={data}",
        f"hydra.run.dir={tmp_path / 'evaluate'}",
        env=cache,
    )
    assert evaluate.returncode == 0, evaluate.stderr
    assert "grade/macro_f1" in evaluate.stdout
    assert (
        "grade/accuracy"
        in json.loads((tmp_path / "evaluate" / "metrics.json").read_text())["evaluation"]
    )


def test_cfg_job_and_info():
    cfg = run_cli("--cfg", "job", "trainer.epochs=4")
    assert cfg.returncode == 0 and "epochs: 4" in cfg.stdout and "input_features" in cfg.stdout
    info = run_cli("--info")
    assert info.returncode == 0 and "Config search path" in info.stdout


def write_bad_inputs(d):
    good = mixed_table(60)
    (d / "empty.csv").write_text("")
    (d / "header.csv").write_text("size,good\n")
    bad_number = good.astype({"size": object})
    bad_number.loc[4, "size"] = "twelve"
    bad_number.to_csv(d / "bad_number.csv", index=False)
    one_class = good.assign(good=True)
    one_class.to_csv(d / "one_class.csv", index=False)
    good.to_csv(d / "good.csv", index=False)


BAD_INPUTS = {
    "missing file": (["dataset.path={d}/nope.csv"], "dataset not found: {d}/nope.csv"),
    "empty file": (["dataset.path={d}/empty.csv"], "is empty"),
    "header only": (["dataset.path={d}/header.csv"], "has no data rows"),
    "missing column": (
        ["dataset.path={d}/good.csv", "model.input_features=[{{name:height,type:number}}]"],
        "input feature 'height' is not a column of {d}/good.csv; available columns: size, weight",
    ),
    "unknown type": (
        ["dataset.path={d}/good.csv", "model.input_features=[{{name:size,type:decimal}}]"],
        "unknown type 'decimal'; known input types: binary, category, date, number, set, text, vector",
    ),
    "single class": (
        ["dataset.path={d}/one_class.csv"],
        "output feature 'good' has a single class",
    ),
    "non-numeric": (
        ["dataset.path={d}/bad_number.csv"],
        "number feature 'size' has non-numeric value 'twelve' at data row 5",
    ),
    "not a model dir": (
        ["command=predict", "model_dir={d}", "dataset.path={d}/good.csv"],
        "is not a model directory",
    ),
    "unknown key added with +": (
        ["dataset.path={d}/good.csv", "+trainer.learning_rat=0.01"],
        "trainer.learning_rat is not a config key; did you mean trainer.learning_rate?",
    ),
    "negative learning rate": (
        ["dataset.path={d}/good.csv", "trainer.learning_rate=-1"],
        "trainer.learning_rate=-1.0 is out of range: it must be > 0",
    ),
    "unknown group option": (
        ["dataset.path={d}/good.csv", "processor=spark"],
        "processor=spark is not an option; the options of processor are: arrow, auto, dask, "
        "modin, pandas",
    ),
    "misspelt group option": (
        ["dataset.path={d}/good.csv", "trainer=horovd"],
        "trainer=horovd is not an option; did you mean trainer=horovod?",
    ),
    "zero batch size": (
        ["dataset.path={d}/good.csv", "trainer.batch_size=0"],
        "trainer.batch_size=0 is out of range: it must be at least 1",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_clear_line(tmp_path, case):
    write_bad_inputs(tmp_path)
    overrides, expected = BAD_INPUTS[case]
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    model = [
        "model.input_features=[{name:size,type:number},{name:shape,type:category}]",
        "model.output_features=[{name:good,type:binary}]",
    ]
    given = [o.format(d=tmp_path) for o in overrides]
    args = (
        [*model, *given]
        if not any(o.startswith("model.input") for o in given)
        else [model[1], *given]
    )
    result = run_cli(*args, f"hydra.run.dir={run_dir}", f"cache_dir={cache}", "trainer.epochs=2")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected.format(d=tmp_path) in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    for name in OUTPUTS:
        assert not (run_dir / name).exists(), name
    assert not list(cache.glob("*/meta.json")) and not list(cache.glob("*/data-*"))


def test_help_lists_only_real_options():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "processor: arrow, auto, dask, modin, pandas" in result.stdout
    assert "backend: auto, horovod, local, ray" in result.stdout
    assert "_schema" not in result.stdout.replace("model_schema", "")  # kept for old configs
