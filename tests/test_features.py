"""Feature transforms, splits and metrics on small, hand-checkable data."""

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from runner.errors import UserError
from runner.processing.features import (
    FeatureSet,
    as_strings,
    build_feature,
    combine_partials,
    fit_partial,
    transform_frame,
)
from runner.processing.split import assign_splits
from runner.scoring.metrics import macro_f1, output_metrics, roc_auc


def fit(feature, values, parts=1):
    """Fit on `values` split into `parts` partitions (the distributed reduction)."""
    series = pd.Series(values)
    chunks = np.array_split(np.arange(len(series)), parts)
    partials = [feature.partial_stats(series.iloc[c].reset_index(drop=True), c) for c in chunks]
    return feature.combine(partials)


def test_number_zscore_fill_mean_and_partition_independence():
    f = build_feature({"name": "x", "type": "number"}, "input")
    values = [1.0, 2.0, None, 3.0, 4.0, 5.0]
    one, three = fit(f, values), fit(f, values, parts=3)
    assert one == pytest.approx(three)
    assert one["mean"] == pytest.approx(3.0)
    out, keep = f.transform(pd.Series(values), one, np.arange(6))
    assert keep.all()
    assert out[2] == pytest.approx(0.0)  # missing -> mean -> 0 after z-score
    assert out.dtype == np.float32
    assert np.std(np.delete(out, 2)) == pytest.approx(1.0, rel=1e-5)


def test_number_drop_row_and_minmax():
    f = build_feature(
        {
            "name": "x",
            "type": "number",
            "preprocessing": {"missing_value_strategy": "drop_row", "normalization": "minmax"},
        },
        "input",
    )
    stats = fit(f, [0.0, 10.0, None])
    out, keep = f.transform(pd.Series([0.0, 5.0, None]), stats, np.arange(3))
    assert keep.tolist() == [True, True, False]
    assert out[:2].tolist() == [0.0, 0.5]


def test_number_rejects_text_naming_column_and_row():
    f = build_feature({"name": "age", "type": "number"}, "input")
    with pytest.raises(UserError, match=r"'age'.*'abc'.*row 3"):
        f.partial_stats(pd.Series(["1", "2", "abc"], dtype=object), np.arange(3))


def test_category_vocabulary_unknown_and_missing():
    f = build_feature({"name": "c", "type": "category"}, "input")
    stats = fit(f, ["b", "a", "b", None, "c", "b", "a"], parts=2)
    assert stats["vocab"] == ["b", "a", "c"]  # by frequency, ties by value
    out, keep = f.transform(pd.Series(["a", "zzz", None, "b"]), stats, np.arange(4))
    assert out.tolist() == [2, 0, 0, 1]  # unseen and missing -> 0 (unknown)
    assert keep.all()


def test_category_max_vocab_and_fill_mode():
    f = build_feature(
        {
            "name": "c",
            "type": "category",
            "preprocessing": {"max_vocab_size": 1, "missing_value_strategy": "fill_mode"},
        },
        "input",
    )
    stats = fit(f, ["x", "x", "y"])
    out, _ = f.transform(pd.Series([None, "y"]), stats, np.arange(2))
    assert stats["vocab"] == ["x"]
    assert out.tolist() == [1, 0]


def test_integer_valued_floats_are_one_category():
    assert as_strings(pd.Series([3.0, 4.5, np.nan])).tolist() == ["3", "4.5", None]
    assert as_strings(pd.Series([3, 4])).tolist() == ["3", "4"]


def test_category_output_drops_unseen_and_needs_two_classes():
    f = build_feature({"name": "y", "type": "category"}, "output")
    stats = fit(f, ["a", "b", "a"])
    out, keep = f.transform(pd.Series(["a", "c", None]), stats, np.arange(3))
    assert keep.tolist() == [True, False, False]
    with pytest.raises(UserError, match="at least two"):
        fit(f, ["a", "a"])


@pytest.mark.parametrize(
    "values,positive",
    [
        ([True, False, True], "True"),
        (["yes", "no", "no"], "yes"),
        (["cat", "dog", "cat"], "dog"),
        ([1, 0, 1], "1"),
    ],
)
def test_binary_mapping(values, positive):
    f = build_feature({"name": "b", "type": "binary"}, "input")
    stats = fit(f, values)
    assert stats["labels"][1] == positive
    out, _ = f.transform(pd.Series(values), stats, np.arange(len(values)))
    assert set(out.tolist()) <= {0.0, 1.0}
    assert out.tolist() == [float(str(v) == positive) for v in as_strings(pd.Series(values))]


def test_binary_errors():
    with pytest.raises(UserError, match="more than two values"):
        fit(build_feature({"name": "b", "type": "binary"}, "input"), ["a", "b", "c"])
    with pytest.raises(UserError, match="single class"):
        fit(build_feature({"name": "b", "type": "binary"}, "output"), [True, True])


def test_text_hashing_is_stable_and_bounded():
    f = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"num_buckets": 64, "max_tokens": 3}},
        "input",
    )
    stats = fit(f, [])
    out, _ = f.transform(pd.Series(["Good day, good", None, "a b c d e"]), stats, np.arange(3))
    lists = out.tolist()
    assert len(lists[0]) == 3 and lists[0][0] == lists[0][2]  # "good" twice, lowercased
    assert lists[1] == []
    assert len(lists[2]) == 3  # truncated to max_tokens
    assert all(1 <= t < 64 for row in lists for t in row)
    again, _ = f.transform(pd.Series(["good"]), stats, np.arange(1))
    assert again.tolist()[0][0] == lists[0][0]


def test_unknown_type_and_option_errors():
    with pytest.raises(UserError, match="known input types: binary, category, number, text"):
        build_feature({"name": "x", "type": "image"}, "input")
    with pytest.raises(UserError, match="known output types: binary, category, number"):
        build_feature({"name": "x", "type": "text"}, "output")
    with pytest.raises(UserError, match="unknown preprocessing option 'normalisation'"):
        build_feature(
            {"name": "x", "type": "number", "preprocessing": {"normalisation": "zscore"}}, "input"
        )
    with pytest.raises(UserError, match="declared more than once"):
        FeatureSet([{"name": "x", "type": "number"}], [{"name": "x", "type": "binary"}])


def test_transform_frame_keeps_row_ids_and_drops_missing_targets():
    features = FeatureSet([{"name": "x", "type": "number"}], [{"name": "y", "type": "binary"}])
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [True, None, False]})
    ids = np.array([10, 11, 12])
    stats = combine_partials([fit_partial(frame, ids, features)], features)
    processed, keep = transform_frame(frame, ids, features.all, stats)
    assert keep.tolist() == [True, False, True]
    assert processed["__row__"].tolist() == [10, 11, 12]


def test_random_split_ratios_and_independence_from_partitioning():
    ids = np.arange(20000)
    split = {"method": "random", "ratios": [0.7, 0.2, 0.1], "seed": 3}
    whole = assign_splits(pd.DataFrame(index=ids), ids, split)
    halves = np.concatenate(
        [
            assign_splits(pd.DataFrame(index=ids[:7000]), ids[:7000], split),
            assign_splits(pd.DataFrame(index=ids[7000:]), ids[7000:], split),
        ]
    )
    assert (whole == halves).all()
    assert np.bincount(whole) / len(ids) == pytest.approx([0.7, 0.2, 0.1], abs=0.02)
    other = assign_splits(pd.DataFrame(index=ids), ids, {**split, "seed": 4})
    assert (other != whole).mean() > 0.3


def test_column_split():
    frame = pd.DataFrame({"s": ["train", "Validation", "test", "0"]})
    assert assign_splits(frame, np.arange(4), {"method": "column", "column": "s"}).tolist() == [
        0,
        1,
        2,
        0,
    ]
    with pytest.raises(UserError, match="split column 's' has value 'dev'"):
        assign_splits(
            pd.DataFrame({"s": ["dev"]}), np.arange(1), {"method": "column", "column": "s"}
        )


def test_metrics_agree_with_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    scores = np.round(rng.normal(size=500) + y, 1)  # rounding makes ties
    assert roc_auc(y, scores) == pytest.approx(skm.roc_auc_score(y, scores))
    labels, predicted = rng.integers(0, 4, 300), rng.integers(0, 4, 300)
    assert macro_f1(labels, predicted, 4) == pytest.approx(
        skm.f1_score(labels, predicted, average="macro")
    )
    logits = rng.normal(size=(300, 3))
    cls = rng.integers(0, 3, 300)
    m = output_metrics("category", logits, cls)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert m["loss"] == pytest.approx(skm.log_loss(cls, probs))
    z = rng.normal(size=200)
    t = z + rng.normal(size=200)
    r = output_metrics("number", z, t)
    assert r["r2"] == pytest.approx(skm.r2_score(t, z))
    assert r["mae"] == pytest.approx(skm.mean_absolute_error(t, z))
    b = output_metrics("binary", z, (t > 0).astype(float))
    assert b["loss"] == pytest.approx(skm.log_loss(t > 0, 1 / (1 + np.exp(-z))))
