"""python run.py as users run it: the default experiment, every command, Hydra's
own flags, and every bad input (one-line error, non-zero exit, nothing half-written)."""

import json

import pandas as pd
import pytest
from helpers import error_lines, mixed_table, run_cli

OUTPUTS = ("model", "model.yaml", "metrics.json", "predictions.parquet", "learning_curves.png")


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert "trainer=auto picked local" in train.stdout + train.stderr
    assert "cache hit" in train.stderr + train.stdout
    assert "model.family=auto picked ensemble" in train.stdout + train.stderr
    members = tmp_path / "train" / "model" / "members"
    assert (members / "network" / "weights.pt").exists() and (members / "gbm").is_dir()
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
    assert (
        "trainer=auto picked" not in predict.stdout + predict.stderr
    )  # nothing trains: the pick goes unsaid
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
    assert "grade/macro_f1" in evaluate.stdout and "baseline" in evaluate.stdout
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
    (d / "bad.csv.gz").write_bytes(b"not gzip at all")
    good.to_parquet(d / "whole.parquet")
    whole = (d / "whole.parquet").read_bytes()
    (d / "truncated.parquet").write_bytes(whole[: len(whole) // 2])
    (d / "a_run" / "model").mkdir(parents=True)  # a run dir given where its model/ goes
    for name in ("weights.pt", "meta.json", "config.yaml"):
        (d / "a_run" / "model" / name).write_text("")
    rows = (d / "good.csv").read_text().splitlines()
    rows.insert(5, rows[5] + ",1,2")  # a row of two fields too many, on line 6
    (d / "bad_row.csv").write_text("\n".join(rows) + "\n")
    (d / "two_tables").mkdir()  # a folder whose files do not share their types
    good.head(30).to_parquet(d / "two_tables" / "a.parquet")
    good.tail(30).astype({"size": str}).to_parquet(d / "two_tables" / "b.parquet")


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
    "misspelt key": (
        ["dataset.path={d}/good.csv", "trainer.learning_rat=0.01"],
        "trainer.learning_rat is not a config key; did you mean trainer.learning_rate?",
    ),
    "one name where a list goes": (
        ["dataset.path={d}/good.csv", "dataset.exclude=weight"],
        "dataset.exclude=weight: dataset.exclude takes a list; write dataset.exclude=[weight]",
    ),
    "a folder of two tables": (
        ["NO_MODEL", "dataset.path={d}/two_tables", "dataset.target=good"],
        "the files of dataset {d}/two_tables are not one table: Unable to merge: Field size has "
        "incompatible types",
    ),
    "target not a column": (
        ["NO_MODEL", "dataset.path={d}/good.csv", "dataset.target=height"],
        "dataset.target=height is not a column of {d}/good.csv (did you mean "
        "dataset.target=weight?); set dataset.target to the column to predict, one of: size, "
        "weight, shape,",
    ),
    "not gzip": (
        ["NO_MODEL", "dataset.path={d}/bad.csv.gz", "dataset.target=good"],
        "cannot read {d}/bad.csv.gz as gz-compressed csv: Not a gzipped file",
    ),
    "truncated parquet": (
        ["NO_MODEL", "dataset.path={d}/truncated.parquet", "dataset.target=good"],
        "cannot read {d}/truncated.parquet as parquet",
    ),
    "no model dir to predict with": (
        ["command=predict", "model_dir={d}/nope", "dataset.path={d}/good.csv"],
        "model_dir={d}/nope is not a model directory",
    ),
    "a run dir as model_dir": (
        ["command=predict", "model_dir={d}/a_run", "dataset.path={d}/good.csv"],
        "model_dir={d}/a_run is a run directory; did you mean model_dir={d}/a_run/model?",
    ),
    "a row of too many fields": (
        ["NO_MODEL", "dataset.path={d}/bad_row.csv", "dataset.target=good"],
        # pyarrow may say "Row #6: " itself (its multi-threaded reader not always)
        "cannot read {d}/bad_row.csv as csv (line 6): CSV parse error: ",
    ),
    "no target named": (
        ["NO_MODEL", "dataset.path={d}/good.csv"],
        "dataset.target=label is not a column of {d}/good.csv (the built-in table's target: "
        "name yours)",
    ),
    "unknown split method": (
        ["dataset.path={d}/good.csv", "dataset.split.method=sideways"],
        "unknown dataset.split.method 'sideways'; use 'random', 'group', 'time' or 'column'",
    ),
    "split by column, no column": (
        ["dataset.path={d}/good.csv", "dataset.split.method=column"],
        "dataset.split.method=column needs dataset.split.column=<name of the split column>",
    ),
    "split column not a column": (
        ["dataset.path={d}/good.csv", "dataset.split.method=column", "dataset.split.column=fold"],
        "split column 'fold' is not a column of {d}/good.csv",
    ),
    "split ratios": (
        ["dataset.path={d}/good.csv", "dataset.split.ratios=[0.5,0.6,0.1]"],
        "dataset.split.ratios=[0.5, 0.6, 0.1] must be three non-negative numbers",
    ),
    "one process, several workers": (
        ["dataset.path={d}/good.csv", "trainer=local", "trainer.num_workers=2"],
        "trainer=local trains in one process, but trainer.num_workers=2 asks for more",
    ),
    "several workers without Ray": (
        ["dataset.path={d}/good.csv", "backend=local", "trainer.num_workers=2"],
        "trainer.num_workers=2 trains several workers on Ray; add backend=ray",
    ),
    "a fraction of a CPU for Ray": (
        ["dataset.path={d}/good.csv", "backend=ray", "backend.num_cpus=1.5"],
        "backend.num_cpus=1.5 is out of range: it must be a whole number, at least 1",
    ),
    "unreachable Ray cluster": (
        [
            "dataset.path={d}/good.csv",
            "backend=ray",
            "backend.address=127.0.0.1:9",
            "backend.connect_timeout_s=1",
        ],
        "cannot reach a Ray cluster at 127.0.0.1:9 within 1s",
    ),
    "init with the features given": (
        ["dataset.path={d}/good.csv", "command=init"],
        "command=init writes the features it infers; this config already lists them",
    ),
    "unknown output type": (
        [
            "dataset.path={d}/good.csv",
            "model.input_features=[{{name:size,type:number}}]",
            "model.output_features=[{{name:good,type:vector}}]",
        ],
        "output feature 'good' has unknown type 'vector'; known output types: binary, category, "
        "number, set",
    ),
    "unknown normalization": (
        [
            "dataset.path={d}/good.csv",
            "model.input_features=[{{name:size,type:number,preprocessing:{{normalization:cubic}}}}]",
        ],
        "feature 'size' has normalization 'cubic'; use auto, robust, zscore",
    ),
    "unknown optimizer": (
        ["dataset.path={d}/good.csv", "trainer.optimizer=adamax"],
        "trainer.optimizer=adamax is unknown; did you mean trainer.optimizer=adam? use one of: "
        "adamw, adam, sgd",
    ),
    "unknown command": (
        ["dataset.path={d}/good.csv", "command=fly"],
        "command=fly is unknown; use one of: experiment, preprocess, train",
    ),
    "unknown precision": (
        ["dataset.path={d}/good.csv", "trainer.precision=fp8"],
        "trainer.precision=fp8 is unknown; use one of: auto, 32, bf16, fp16",
    ),
    "unknown serve ingress": (
        ["dataset.path={d}/good.csv", "serve.ingress=nginx"],
        "serve.ingress=nginx is unknown; use one of: proxy, haproxy",
    ),
    "negative bin features": (
        ["dataset.path={d}/good.csv", "model.bin_features=-1"],
        "model.bin_features=-1 is out of range: it must be 0 or more (0: off)",
    ),
    "unknown format": (
        ["dataset.path={d}/good.csv", "dataset.format=xml"],
        "dataset.format=xml is not supported",
    ),
    "dropout out of range": (
        ["dataset.path={d}/good.csv", "model.dropout=1.5"],
        "model.dropout=1.5 is out of range: it must be in [0, 1)",
    ),
    "resources not a mapping": (
        ["dataset.path={d}/good.csv", "trainer.resources_per_worker=5"],
        "trainer.resources_per_worker=5 must map resource names to amounts",
    ),
    "unknown MLflow store": (
        ["dataset.path={d}/good.csv", "logger=mlflow", "logger.mlflow.tracking_uri=nosuch://x"],
        "logger.mlflow.tracking_uri=nosuch://x is not a store MLflow knows",
    ),
    "tracker not importable": (
        ["dataset.path={d}/good.csv", "+logger.probe._target_=no_such_module.Tracker"],
        "logger.probe._target_=no_such_module.Tracker cannot be imported",
    ),
    "unwritable cache_dir": (
        ["dataset.path={d}/good.csv", "cache_dir=/proc/no-cache-here"],
        "cannot write to /proc/no-cache-here (No such file or directory); set cache_dir",
    ),
    "zero batch size": (
        ["dataset.path={d}/good.csv", "trainer.batch_size=0"],
        "trainer.batch_size=0 is out of range: it must be at least 1",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_clear_line(tmp_path, case):
    write_bad_inputs(tmp_path)
    overrides, expected = BAD_INPUTS[case]
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    model = [
        "model.input_features=[{name:size,type:number},{name:shape,type:category}]",
        "model.output_features=[{name:good,type:binary}]",
    ]
    given = [o.format(d=tmp_path) for o in overrides if o != "NO_MODEL"]
    if "NO_MODEL" in overrides:  # model=auto: the features inferred from dataset.target
        args = given
    elif any(o.startswith("model.output") for o in given):
        args = given
    elif any(o.startswith("model.input") for o in given):
        args = [model[1], *given]
    else:
        args = [*model, *given]
    if not any(o.startswith("cache_dir=") for o in args):
        args.append(f"cache_dir={cache}")
    result = run_cli(*args, f"hydra.run.dir={run_dir}", "trainer.epochs=2")
    assert result.returncode == 2
    errors = error_lines(result)
    assert len(errors) == 1 and expected.format(d=tmp_path) in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    for name in OUTPUTS:
        assert not (run_dir / name).exists(), name
    assert not list(cache.glob("*/meta.json")) and not list(cache.glob("*/data-*"))


def test_help_opens_with_what_the_runner_does_and_lists_only_real_options():
    from runner import commands
    from runner.command_table import COMMANDS

    result = run_cli("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("run.py trains a model on a table")
    assert "powered by Hydra" not in result.stdout
    for name, command in COMMANDS.items():  # each listed
        assert f"command={name}" in result.stdout and command.summary in result.stdout
    assert commands.COMMAND_FUNCTIONS.keys() == COMMANDS.keys()  # each runs a function
    assert "processor: arrow, auto, dask, modin, pandas" in result.stdout
    assert "backend: auto, horovod, local, ray" in result.stdout
    assert "preset: best, default, fast" in result.stdout
    assert "_schema" not in result.stdout
    assert "hidden_size" not in result.stdout  # the settings are --cfg job's, not the help's


def test_a_model_config_in_the_old_form_is_told_the_new_one(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "old.yaml").write_text("defaults:\n  - model_schema\n  - _self_\n")
    result = run_cli("--config-dir", str(tmp_path), "model=old", "command=init")
    assert result.returncode == 2
    assert error_lines(result) == [
        "error: model/old.yaml names `- model_schema` in its defaults, an old form: "
        "write `- /model_schema@_here_` instead (what command=init writes)"
    ]


def test_a_renamed_key_still_works_one_release_and_says_its_new_form():
    result = run_cli("trainer.strategy=local", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    assert "_target_: runner.training.trainers.LocalTrainer" in result.stdout
    assert (
        "warning: trainer.strategy=local is deprecated and goes in the next release; "
        "write trainer=local"
    ) in result.stderr
