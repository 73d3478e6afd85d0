"""From a file to a first model with one argument (issue 28): dataset.target alone, the formats
users have, command=init's YAML, and train() from Python."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import (
    FAST,
    assert_same_caches,
    error_lines,
    houses,
    run_cli,
    run_experiment,
    write_table,
)

from runner.assembly import assemble
from runner.errors import UserError

INFERRED = {
    "price": "number",
    "id": None,
    "sqft": "number",
    "rooms": "number",
    "district": "category",
    "garden": "category",  # two values: a category as an input
    "furnished": "binary",  # true/false, typed or written out
    "description": "text",
    "listed": "date",
    "built": "date",
    "viewed": "date",
    "location": "vector",
    "amenities": "set",
    "country": None,
}


def preprocessed(tmp_path, cache_dir, path, *overrides):
    """The cache entry (Preprocessed) of command=preprocess on `path` with only the target."""
    from helpers import compose_config

    from runner.commands import _preprocess

    cfg = compose_config(
        [f"cache_dir={cache_dir}", f"dataset.path={path}", "dataset.target=price", *overrides]
    )
    plan = assemble(cfg, tmp_path / "run")
    with plan.backend:
        return _preprocess(plan.resolve()), plan.type_inference


def test_the_target_alone_infers_every_type_and_writes_a_model_yaml(tmp_path, cache_dir, caplog):
    caplog.set_level("INFO")
    path = tmp_path / "houses.csv"
    write_table(houses(), path)
    _, inference = preprocessed(tmp_path, cache_dir, path)
    assert {d.name: d.type for d in inference.decisions} == INFERRED
    assert "  id           -         left out: an ID: a running number\n" in caplog.text
    assert "  country      -         left out: constant: every value is 'nl'\n" in caplog.text
    saved = yaml.safe_load((tmp_path / "run" / "model.yaml").read_text())
    assert saved["output_features"] == [{"name": "price", "type": "number"}]
    assert [f["name"] for f in saved["input_features"]] == [
        n for n, t in INFERRED.items() if t and n != "price"
    ]


def test_a_few_words_among_numbers_are_missing_values_not_a_category(tmp_path, cache_dir, caplog):
    """A number column with 'n/a' and '?' in a few rows, and a price target with 'unknown' in
    one: numbers whose words are missing values (said in the log and in model.yaml, which loads
    back), not categories of hundreds of values; the target's row is left out and counted. A
    column of words with a number among them stays a category."""
    caplog.set_level("INFO")
    frame = houses().astype({"sqft": object, "price": object, "district": object})
    frame.loc[[5, 40], "sqft"] = "n/a"
    frame.loc[77, "sqft"] = "?"
    frame.loc[12, "price"] = "unknown"
    frame.loc[9, "district"] = "12"
    path = tmp_path / "houses.csv"
    write_table(frame, path)
    entry, inference = preprocessed(tmp_path, cache_dir, path, "dataset.split.ratios=[1,0,0]")
    decided = {d.name: d for d in inference.decisions}
    assert decided["sqft"].type == "number"
    assert decided["sqft"].preprocessing == {"missing_values": ["?", "n/a"]}
    assert decided["price"].type == "number"
    assert decided["price"].preprocessing == {"missing_values": ["unknown"]}
    assert decided["district"].type == "category" and decided["district"].preprocessing is None
    numbers = int(pd.to_numeric(frame["sqft"], errors="coerce").notna().sum())
    assert f"'?', 'n/a' (3 of {numbers + 3} values) taken as missing" in caplog.text
    saved = yaml.safe_load((tmp_path / "run" / "model.yaml").read_text())
    sqft = next(f for f in saved["input_features"] if f["name"] == "sqft")
    assert sqft == {
        "name": "sqft",
        "type": "number",
        "preprocessing": {"missing_values": ["?", "n/a"]},
    }
    stats = entry.meta["features"]["sqft"]["stats"]
    # The three words are missing values: the statistics are the numbers' alone.
    assert stats["mean"] == pytest.approx(pd.to_numeric(frame["sqft"], errors="coerce").mean())
    assert entry.meta["left_out"]["train"] == 1 and entry.meta["rows"]["train"] == 599
    assert "left out 1 row (train 1) for a missing 'price'" in caplog.text


def test_exclude_the_split_column_and_an_explicit_list_wins(tmp_path, cache_dir):
    path = tmp_path / "houses.csv"
    table = houses()
    table["fold"] = np.where(np.arange(len(table)) % 5 == 0, "test", "train")
    table.loc[1::5, "fold"] = "validation"
    write_table(table, path)
    _, inference = preprocessed(
        tmp_path,
        cache_dir,
        path,
        "dataset.exclude=[description]",
        "dataset.split.method=column",
        "dataset.split.column=fold",
    )
    why = {d.name: (d.type, d.reason) for d in inference.decisions}
    assert why["description"] == (None, "left out by dataset.exclude")
    assert why["fold"] == (None, "the split column (dataset.split.column)")
    assert inference.rows == 360  # the training rows only
    pre, inference = preprocessed(
        tmp_path, cache_dir, path, "model.input_features=[{name:rooms,type:category}]"
    )
    assert pre.meta["input_features"] == ["rooms"]
    assert pre.meta["output_features"] == ["price"]
    # The log's table and model.yaml say what the run trains on: the given input, as given.
    why = {d.name: (d.type, d.reason) for d in inference.decisions}
    assert why["rooms"] == ("category", "as given in the config")
    assert why["sqft"] == (None, "not in model.input_features")
    assert [d.name for d in inference.decisions if d.kept] == ["price", "rooms"]
    saved = yaml.safe_load((tmp_path / "run" / "model.yaml").read_text())
    assert saved["input_features"] == [{"name": "rooms", "type": "category"}]
    pre, inference = preprocessed(tmp_path, cache_dir, path, "dataset.target=[price,garden]")
    assert pre.meta["output_features"] == ["price", "garden"]  # several outputs, inferred types
    assert {d.name: d.type for d in inference.decisions if d.name in ("price", "garden")} == {
        "price": "number",
        "garden": "binary",
    }


def test_the_synthetic_experiment_with_only_its_target_matches_its_written_features(
    tmp_path, cache_dir
):
    inferred = run_experiment(tmp_path / "a", cache_dir, *FAST)
    written = run_experiment(tmp_path / "b", cache_dir, *FAST, "model=synthetic")
    assert len([p for p in cache_dir.iterdir() if (p / "meta.json").exists()]) == 1  # one entry
    assert inferred["test"] == pytest.approx(written["test"], rel=1e-6)


FORMATS = [
    "houses.tsv",
    "houses.semicolon.csv",
    "houses.csv.gz",
    "houses.jsonl",
    "houses.jsonl.gz",
    "houses.json",
    "houses.feather",
    "houses.orc",
    "houses.xlsx",
    "houses.parquet",
]


def test_every_format_reads_to_the_same_cache_as_the_csv(tmp_path, cache_dir):
    table = houses()
    results, inferred = {}, {}
    for name in ["houses.csv", *FORMATS]:
        write_table(table, tmp_path / name)
        pre, inference = preprocessed(tmp_path / name.replace(".", "_"), cache_dir, tmp_path / name)
        key = "pandas" if name == "houses.csv" else name  # the reference is the CSV
        results[key] = pre
        inferred[key] = inference.model_config()  # the reasons may say "written as text"
    assert_same_caches(results)
    assert all(config == inferred["pandas"] for config in inferred.values())
    assert len({pre.entry.url for pre in results.values()}) == len(results)  # one entry each


def bad_files(tmp_path):
    good = tmp_path / "good.csv"
    write_table(houses(60), good)
    (tmp_path / "bad.csv.gz").write_bytes(good.read_bytes())  # not gzip at all
    write_table(houses(60), tmp_path / "whole.parquet")
    data = (tmp_path / "whole.parquet").read_bytes()
    (tmp_path / "truncated.parquet").write_bytes(data[: len(data) // 2])
    return {
        "bad gzip": (
            [f"dataset.path={tmp_path / 'bad.csv.gz'}"],
            "bad.csv.gz as gz-compressed csv",
        ),
        "truncated parquet": (
            [f"dataset.path={tmp_path / 'truncated.parquet'}"],
            "truncated.parquet as parquet",
        ),
        "wrong delimiter": (
            [f"dataset.path={good}", "dataset.delimiter=';'"],
            "set dataset.delimiter=','",
        ),
        "unknown target": (
            [f"dataset.path={good}", "dataset.target=cost"],
            "dataset.target=cost is not a column",
        ),
        "wrong format": ([f"dataset.path={good}", "dataset.format=orc"], "good.csv as orc"),
    }


@pytest.mark.slow
def test_unreadable_files_are_one_line_exit_2_and_nothing_left(tmp_path):
    for case, (overrides, expected) in bad_files(tmp_path).items():
        cache = tmp_path / f"cache-{case.replace(' ', '-')}"
        run = tmp_path / f"run-{case.replace(' ', '-')}"
        result = run_cli(
            *overrides,
            "dataset.target=price" if "unknown" not in case else "seed=1",
            f"cache_dir={cache}",
            f"hydra.run.dir={run}",
        )
        assert result.returncode == 2, (case, result.stderr[-2000:])
        errors = error_lines(result)
        assert len(errors) == 1 and expected in errors[0], (case, result.stderr[-2000:])
        assert "Traceback" not in result.stderr, case
        assert not cache.exists() or not any(cache.iterdir()), case
        assert not (run / "model").exists() and not (run / "metrics.json").exists(), case


def test_init_writes_a_yaml_that_loads_back_and_trains(tmp_path):
    path = tmp_path / "houses.csv"
    write_table(houses(), path)
    keep = tmp_path / "conf" / "model" / "houses.yaml"
    init = run_cli(
        "command=init",
        f"dataset.path={path}",
        "dataset.target=price",
        f"init.path={keep}",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'init'}",
    )
    assert init.returncode == 0, init.stderr[-2000:]
    assert "{name: description, type: text}" in init.stdout
    assert not (tmp_path / "cache").exists()  # nothing preprocessed, nothing trained
    kept = yaml.safe_load(keep.read_text())
    assert {f["name"]: f["type"] for f in kept["input_features"]}["listed"] == "date"
    # Edited by the user, then trained with as its own model group.
    keep.write_text(
        keep.read_text().replace("{name: rooms, type: number}", "{name: rooms, type: category}")
    )
    train = run_cli(
        "--config-dir",
        str(tmp_path / "conf"),
        "model=houses",
        f"dataset.path={path}",
        *FAST,
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'train'}",
    )
    assert train.returncode == 0, train.stderr[-2000:]
    meta = json.loads((tmp_path / "train" / "model" / "meta.json").read_text())
    assert meta["features"]["rooms"]["type"] == "category"
    assert "features inferred" not in train.stderr  # the kept list, not inference


@pytest.mark.slow
def test_train_from_python_twice_matches_run_py(tmp_path, monkeypatch):
    import logging

    from runner import train

    path = tmp_path / "houses.csv"
    write_table(houses(), path)
    overrides = [*FAST, f"cache_dir={tmp_path / 'cache'}", "seed=3"]
    cli = run_cli(
        f"dataset.path={path}",
        "dataset.target=price",
        *overrides,
        f"hydra.run.dir={tmp_path / 'cli'}",
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    want = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    # The target's true values in the predictions keep float64's precision (not float32's).
    scored = pd.read_parquet(tmp_path / "cli" / "predictions.parquet")
    true = houses()["price"].to_numpy()[scored["row"]]
    assert scored["price"].dtype == np.float64
    np.testing.assert_allclose(scored["price"], true, rtol=1e-12)
    assert np.abs(scored["price"].astype(np.float32) - true).max() > 1e-6  # float32 would not do
    monkeypatch.chdir(tmp_path)
    handlers = list(logging.getLogger().handlers)
    first = train(str(path), target="price", overrides=overrides)
    metrics, predictor = train(
        houses(), target="price", overrides=overrides, run_dir=tmp_path / "df"
    )
    assert first.metrics["test"] == pytest.approx(want["test"], rel=1e-6)
    assert metrics["test"] == pytest.approx(want["test"], rel=1e-6)  # a DataFrame: same rows
    assert first.run_dir.parent.parent == tmp_path / "outputs"  # run.py's layout, in the cwd
    assert logging.getLogger().handlers == handlers  # the root logger left alone
    assert Path.cwd() == tmp_path  # the working directory too
    rows = houses(5, seed=1).drop(columns=["price"])
    predictions = predictor.predict(rows)
    assert len(predictions) == 5 and predictions["price_prediction"].between(100, 600).all()
    # A DataFrame is named as such (not its Parquet copy), and the failed run leaves no dir.
    with pytest.raises(UserError, match="dataset.target=cost is not a column of the DataFrame gi"):
        train(houses(), target="cost", overrides=overrides, run_dir=tmp_path / "failed")
    assert not (tmp_path / "failed").exists()
