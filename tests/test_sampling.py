"""Types from the whole file, not its head: a sample from places spread over the file in every
format, the fit pass's check of what the sample left out, decimal commas and a delimiter sniffed
from the rows."""

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import compose_config, run_experiment

from runner.assembly import assemble
from runner.config import DatasetConfig
from runner.errors import UserError
from runner.processing import sampling
from runner.processing.source import DataSource, sniff_delimiter
from runner.processing.split import assign_splits
from runner.processing.type_inference import infer_source

RANDOM = {"method": "random", "ratios": [0.7, 0.15, 0.15], "seed": 42}


def date_sorted(rows: int = 40000, january: int = 10500) -> pd.DataFrame:
    """Sorted by day; the first `january` rows are all in January, and the month explains y."""
    rng = np.random.default_rng(0)
    days = (
        np.concatenate([np.full(january, 0), np.sort(rng.integers(31, 365, rows - january))])
        + pd.Timestamp("2024-01-01").value // 86_400_000_000_000
    )
    day = pd.to_datetime(days, unit="D")
    x = rng.normal(size=rows).round(4)
    return pd.DataFrame(
        {
            "x": x,
            "month": day.month,
            "y": (x + (day.month - 6.5) ** 2 / 10 + rng.normal(0, 0.1, rows)).round(4),
        }
    )


def class_sorted(rows: int = 15000) -> pd.DataFrame:
    """Sorted by the class: 'no' for the first 12,000 rows, 'yes' after."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=rows).round(4)
    label = np.where(np.arange(rows) < 12000, "no", "yes")
    return pd.DataFrame({"x": x + (label == "yes"), "label": label})


def inferred(path, target: str, **dataset) -> dict:
    config = DatasetConfig(path=str(path), target=target, **dataset)
    inference = infer_source(DataSource.from_config(config), config, RANDOM)
    return {d.name: d for d in inference.decisions}, inference


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet", ".jsonl", "-folder"])
def test_a_month_constant_in_the_head_is_an_input_in_every_format(tmp_path, suffix, monkeypatch):
    monkeypatch.setattr(sampling, "WHOLE_READ_LIMIT", 0)  # byte ranges even of a small file
    table = date_sorted()
    assert table["month"].head(10000).nunique() == 1  # what the head alone would show
    path = tmp_path / f"dates{suffix}"
    if suffix == ".parquet":
        table.to_parquet(path, row_group_size=1000)
    elif suffix == ".jsonl":
        table.to_json(path, orient="records", lines=True)
    elif suffix == "-folder":  # a Parquet folder as Spark and Dask write them
        path.mkdir()
        for i, part in enumerate(np.array_split(table, 6)):
            part.to_parquet(path / f"part-{i}.parquet")
    else:
        table.to_csv(path, index=False)
    decisions, inference = inferred(path, "y")
    assert decisions["month"].type == "number"
    assert "from 40 places" in inference.sample or "6 files" in inference.sample
    assert f"; {inference.sample}" in inference.table().splitlines()[0]


def test_a_compressed_file_over_the_limit_is_read_from_its_head_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "dates.csv.gz"
    date_sorted().to_csv(path, index=False)
    monkeypatch.setattr(sampling, "COMPRESSED_READ_LIMIT", 1000)
    decisions, inference = inferred(path, "y")
    assert decisions["month"].type is None
    assert "(the head of 1 compressed file over 1.0 KB" in inference.sample


def test_a_class_sorted_target_and_a_class_the_sample_misses(tmp_path):
    path = tmp_path / "classes.csv"
    class_sorted().to_csv(path, index=False)
    decisions, _ = inferred(path, "label")
    assert decisions["label"].type == "binary"
    # Five 'yes' rows among 15,000 are not in a 40-row sample: the training split decides.
    rare = class_sorted()
    rare["label"] = np.where(np.arange(len(rare)) % 3000 == 1500, "yes", "no")
    rare.to_csv(path, index=False)
    decisions, inference = inferred(path, "label", inference_rows=40)
    assert decisions["label"].type == "binary"
    assert decisions["label"].reason.endswith("(in the whole training split)")
    # A target constant in every training row is still refused, now saying so.
    rare["label"] = "no"
    rare.to_csv(path, index=False)
    with pytest.raises(UserError, match="dataset.target=label cannot be predicted: constant"):
        inferred(path, "label", inference_rows=40)


def preprocess(tmp_path, path, *overrides):
    from runner.commands import _preprocess

    cfg = compose_config(
        [f"cache_dir={tmp_path / 'cache'}", f"dataset.path={path}", "dataset.target=y", *overrides]
    )
    plan = assemble(cfg, tmp_path / "run")
    with plan.backend:
        return _preprocess(plan.resolve())


def test_the_fit_pass_warns_of_a_column_the_sample_took_for_constant(tmp_path, caplog):
    caplog.set_level("INFO")
    rng = np.random.default_rng(2)
    table = pd.DataFrame({"x": rng.normal(size=6000), "y": rng.normal(size=6000)})
    table["batch"] = np.where(np.arange(6000) % 1000 == 500, "late", "early")  # 6 rows
    keys = rng.permutation(np.repeat(np.arange(3000), 2))
    table["key"] = [f"k{i}" for i in keys]  # distinct in 40 rows, each twice in the table
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    pre = preprocess(tmp_path, path, "dataset.inference_rows=40")
    check = pre.meta["sample_check"]
    assert check["batch"]["reason"].startswith("constant") and check["batch"]["distinct"] == 2
    assert check["key"]["reason"].startswith("an ID")
    training = assign_splits(table, np.arange(len(table)), RANDOM) == 0
    assert check["key"]["rows"] == training.sum()
    assert check["key"]["distinct"] == pytest.approx(table["key"][training].nunique(), rel=0.1)
    warned = [r.message for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith("column 'batch' was left out (constant") for m in warned)
    assert any(m.startswith("column 'key' was left out (an ID") for m in warned)
    assert all("model.input_features" in m for m in warned)
    caplog.clear()
    assert preprocess(tmp_path, path, "dataset.inference_rows=40").cache_hit
    assert sum("was left out" in r.message for r in caplog.records) == 2  # said on a hit too


def test_a_column_the_sample_judged_right_gives_no_warning(tmp_path, caplog):
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"x": rng.normal(size=3000), "y": rng.normal(size=3000), "c": "same"})
    table["id"] = [f"row-{i}" for i in range(3000)]
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    pre = preprocess(tmp_path, path)
    assert set(pre.meta["sample_check"]) == {"c", "id"}
    assert "was left out" not in caplog.text


def test_decimal_commas_are_sniffed_and_read_as_the_same_numbers(tmp_path, caplog):
    caplog.set_level("INFO")
    table = date_sorted(3000, 1000)
    table["city"] = np.where(table["x"] > 0, "Köln, Nord", "Bonn")  # a comma in a word
    comma, point = tmp_path / "comma.csv", tmp_path / "point.csv"
    table.to_csv(comma, sep=";", decimal=",", index=False)
    table.to_csv(point, index=False)
    with_commas = preprocess(tmp_path / "a", comma)
    with_points = preprocess(tmp_path / "b", point)
    assert "dataset.decimal=null picked ',': 'x', 'y' write numbers with a decimal comma" in (
        caplog.text
    )
    saved = yaml.safe_load((tmp_path / "a" / "run" / "model.yaml").read_text())
    assert {"name": "x", "type": "number", "preprocessing": {"decimal": ","}} in saved[
        "input_features"
    ]
    for split in ("train", "test"):
        got = pd.read_parquet(with_commas.split_path(split).url)
        want = pd.read_parquet(with_points.split_path(split).url)
        pd.testing.assert_frame_equal(got, want)
    # Given explicitly, with features given too (no inference): the same numbers.
    given = preprocess(
        tmp_path / "c",
        comma,
        "dataset.decimal=','",
        "model.input_features=[{name:x,type:number},{name:city,type:category}]",
        "model.output_features=[{name:y,type:number}]",
    )
    got = pd.read_parquet(given.split_path("train").url)
    want = pd.read_parquet(with_points.split_path("train").url)
    np.testing.assert_array_equal(got["x"], want["x"])


def test_a_decimal_comma_without_the_setting_names_it(tmp_path):
    path = tmp_path / "comma.csv"
    date_sorted(300, 100).to_csv(path, sep=";", decimal=",", index=False)
    with pytest.raises(UserError, match=r"set dataset.decimal=','"):
        preprocess(
            tmp_path,
            path,
            "dataset.decimal='.'",
            "model.input_features=[{name:x,type:number}]",
            "model.output_features=[{name:y,type:number}]",
        )


def test_the_delimiter_is_sniffed_from_the_rows_not_the_header_alone():
    lines = ["name, surname;age", "Smith;30", "Doe, John;42"]
    assert sniff_delimiter(lines[:1]) == ","  # the header alone is a tie
    assert sniff_delimiter(lines) == ";"
    assert sniff_delimiter(["a\tb", '"x, y"\t3']) == "\t"
    assert sniff_delimiter(["value", "1", "2"]) == ","  # one column: the default


def test_a_class_sorted_table_trains_with_every_class(tmp_path):
    path = tmp_path / "classes.csv"
    class_sorted().to_csv(path, index=False)
    metrics = run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        f"dataset.path={path}",
        "dataset.target=label",
        "trainer.epochs=1",
        "model.ensemble_size=1",
    )
    assert metrics["test"]["label/roc_auc"] > 0.7  # both classes in every split
    saved = yaml.safe_load((tmp_path / "run" / "model.yaml").read_text())
    assert saved["output_features"] == [{"name": "label", "type": "binary"}]
