"""Feature types inferred from a sample (issue 28): every type, IDs, constants, dates in three
formats and missing values, each decision with its reason."""

import numpy as np
import pandas as pd
import pytest

from runner.errors import UserError
from runner.processing.type_inference import infer_types


def mixed_table(rows: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = ["good", "bad", "fresh", "stale", "sweet", "salty", "cheap", "fine", "dry", "hot"]
    frame = pd.DataFrame(
        {
            "price": rng.normal(100, 20, rows).round(2),
            "row_id": np.arange(rows),
            "uuid": [f"{rng.integers(1 << 62):x}-{i}" for i in range(rows)],
            "country": rng.choice(["de", "fr", "it", "es", "nl"], rows),
            "grade": rng.integers(1, 6, rows),
            "smoker": rng.choice(["yes", "no"], rows),
            "constant": "x",
            "review": [" ".join(rng.choice(words, rng.integers(4, 12))) for _ in range(rows)],
            "iso_date": pd.date_range("2020-01-01", periods=rows, freq="D").strftime("%Y-%m-%d"),
            "us_date": pd.date_range("2020-01-01", periods=rows, freq="D").strftime("%m/%d/%Y"),
            "stamp": pd.date_range("2020-01-01", periods=rows, freq="h").strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
            "tags": [
                "|".join(rng.choice(["a", "b", "c", "d"], rng.integers(1, 4))) for _ in range(rows)
            ],
            "embedding": [" ".join(f"{v:.3f}" for v in rng.normal(size=3)) for _ in range(rows)],
            "amount_text": [f"{v:.1f}" for v in rng.normal(50, 5, rows)],
        }
    )
    frame.loc[::7, "price"] = np.nan
    frame.loc[::11, "country"] = None
    frame.loc[::13, "us_date"] = ""
    return frame


def test_every_type_ids_constants_and_dates_in_three_formats():
    decisions = {d.name: d for d in infer_types(mixed_table(), target=["price"])}
    types = {name: d.type for name, d in decisions.items()}
    assert types == {
        "price": "number",
        "row_id": None,
        "uuid": None,
        "country": "category",
        "grade": "number",  # integer inputs keep their order
        "smoker": "category",  # two values: a category as an input (binary as a target)
        "constant": None,
        "review": "text",
        "iso_date": "date",
        "us_date": "date",
        "stamp": "date",
        "tags": "set",
        "embedding": "vector",
        "amount_text": "number",
    }
    assert decisions["row_id"].reason == "an ID: a running number"
    assert decisions["uuid"].reason.startswith("an ID:")
    assert decisions["constant"].reason == "constant: every value is 'x'"
    assert list(decisions)[0] == "price"  # targets first


def test_exclude_and_an_unknown_target():
    decisions = infer_types(mixed_table(), target=["smoker"], exclude=["review"])
    assert decisions[0].name == "smoker" and decisions[0].type == "binary"  # two values: binary
    review = next(d for d in decisions if d.name == "review")
    assert review.type is None and review.reason == "left out by dataset.exclude"
    with pytest.raises(UserError, match="dataset.target names nope"):
        infer_types(mixed_table(), target=["nope"])


def test_the_same_rows_in_any_order_or_partitioning_give_the_same_types():
    table = mixed_table()
    first = [(d.name, d.type) for d in infer_types(table, ["price"])]
    shuffled = table.sample(frac=1.0, random_state=1)
    again = infer_types(shuffled, ["price"])
    assert [(d.name, d.type) for d in again] == first
    reasons = {d.name: d.reason for d in again}  # no longer running, but named like one
    assert reasons["row_id"] == "an ID: distinct integers in a column named like an ID"


def test_integers_numbers_as_inputs_classes_as_a_small_target_and_ids_by_name():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "rating": rng.integers(1, 6, 300),
            "amount": rng.permutation(np.arange(300) * 37 + 5),  # distinct, not an ID
            "customerId": rng.permutation(np.arange(300) * 7919),
            "stamp": np.sort(rng.integers(1.6e9, 1.7e9, 300)),  # increasing, but epoch seconds
            "senior": rng.integers(0, 2, 300),  # a 0/1 flag
        }
    )
    types = {d.name: d.type for d in infer_types(frame, target=["rating"])}
    assert types == {
        "rating": "category",
        "amount": "number",
        "customerId": None,
        "stamp": "number",
        "senior": "number",  # two numbers as an input: a number (a target: binary)
    }
    as_input = {d.name: d.type for d in infer_types(frame, target=["amount"])}
    assert as_input["rating"] == "number"
    assert infer_types(frame, target=["senior"])[0].type == "binary"


def test_model_yaml_loads_back_as_the_model_config_with_reasons():
    import yaml

    from runner.processing.type_inference import model_config, model_yaml

    table = mixed_table().rename(columns={"country": "country: code"})
    decisions = infer_types(table, target=["price"])
    text = model_yaml(decisions, ["price"], "houses.csv")
    loaded = yaml.safe_load(text)
    assert loaded["defaults"] == ["/model_schema@_here_", "_self_"]
    config = model_config(decisions, ["price"])
    assert loaded["input_features"] == config["input_features"]
    assert loaded["output_features"] == [{"name": "price", "type": "number"}]
    assert {"name": "country: code", "type": "category"} in loaded["input_features"]
    assert "#   row_id: an ID: a running number" in text
    assert "# two distinct values" in text  # smoker's reason beside it
