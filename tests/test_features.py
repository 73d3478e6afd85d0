"""Feature transforms, splits and metrics on small, hand-checkable data."""

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from runner.errors import UserError
from runner.processing.columns import date_columns
from runner.processing.features.base import as_strings, numbers_from_text
from runner.processing.features.feature_set import (
    FeatureSet,
    combine_partials,
    fit_partial,
    transform_frame,
)
from runner.processing.features.registry import build_feature
from runner.processing.split import assign_splits
from runner.scoring.metrics import finish, macro_f1, merge, output_metrics, partial, roc_auc


def fit(feature, values, parts=1):
    """Fit on `values` split into `parts` partitions (the distributed reduction)."""
    series = pd.Series(values)
    chunks = np.array_split(np.arange(len(series)), parts)
    partials = [feature.partial_stats(series.iloc[c].reset_index(drop=True), c) for c in chunks]
    return feature.combine(partials)


def tokens_of(out, name="t"):
    """A text transform's token-id lists (its components, when fitted, are beside them)."""
    return (out[name] if isinstance(out, dict) else out).tolist()


def test_number_zscore_fill_mean_and_partition_independence():
    f = build_feature(
        {"name": "x", "type": "number", "preprocessing": {"normalization": "zscore"}}, "input"
    )
    values = [1.0, 2.0, None, 3.0, 4.0, 5.0]
    one, three = fit(f, values), fit(f, values, parts=3)
    assert one.pop("bin_edges") == three.pop("bin_edges")
    assert one == pytest.approx(three)
    assert one["mean"] == pytest.approx(3.0)
    assert one["missing_flag"] is True  # missing in training: a flag column beside the value
    columns, keep = f.transform(pd.Series(values), one, np.arange(6))
    assert keep.all() and list(columns) == ["x", "x.missing"]
    assert columns["x.missing"].tolist() == [0, 0, 1, 0, 0, 0]
    out = columns["x"]
    assert out[2] == pytest.approx(0.0)  # missing -> mean -> 0 after z-score
    assert out.dtype == np.float32
    assert np.std(np.delete(out, 2)) == pytest.approx(1.0, rel=1e-5)


def test_a_numbers_missing_values_are_missing_and_stay_out_of_the_cache_key_unset():
    """preprocessing.missing_values: those words are missing numbers (filled like any), any
    other word is still an error; unset, describe() (the cache key) is what it was before the
    option existed; a bad value is one error line."""
    plain = build_feature({"name": "n", "type": "number"}, "input")
    assert "missing_values" not in plain.describe()["preprocessing"]
    config = {"name": "n", "type": "number", "preprocessing": {"missing_values": ["n/a", "?"]}}
    number = build_feature(config, "input")
    assert number.describe()["preprocessing"]["missing_values"] == ["n/a", "?"]
    stats = number.combine([number.partial_stats(pd.Series(["1", " n/a", "3", "?"]), np.arange(4))])
    assert stats["mean"] == 2.0
    out, keep = number.transform(pd.Series(["n/a", "5"]), stats, np.arange(2))
    values = out["n"] if isinstance(out, dict) else out  # with a missing flag beside it or not
    assert keep.all() and values[0] == pytest.approx(number.normalize(np.array([2.0]), stats)[0])
    with pytest.raises(UserError, match="non-numeric value 'none' at data row 2.*missing_values"):
        number.partial_stats(pd.Series(["1", "none"]), np.arange(2))
    with pytest.raises(UserError, match="has missing_values 'n/a'; use a list"):
        build_feature({**config, "preprocessing": {"missing_values": "n/a"}}, "input")


def test_numbers_written_as_text_never_crash_the_process():
    """pandas 2.3's to_numeric(errors='coerce') ends the process on some strings with a huge
    exponent (a hex key such as '3973e42320041052-100'); the runner reads such columns itself,
    with to_numeric's results everywhere else."""
    values = pd.Series(["+5", ".5", " 2 ", "inf", "NaN", "1_000", None, "3e42320041052", "x"])
    parsed = numbers_from_text(values)
    expected = [5.0, 0.5, 2.0, np.inf, np.nan, np.nan, np.nan, np.inf, np.nan]
    np.testing.assert_array_equal(parsed.to_numpy(), expected)
    number = build_feature({"name": "n", "type": "number"}, "input")
    with pytest.raises(UserError, match="non-numeric value '3973e42320041052-100' at data row 2"):
        number.partial_stats(pd.Series(["1.5", "3973e42320041052-100"]), np.arange(2))
    date = build_feature({"name": "d", "type": "date"}, "input")
    with pytest.raises(UserError, match="3973e42320041052-100"):
        date.partial_stats(pd.Series(["2020-01-01", "3973e42320041052-100"]), np.arange(2))


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
        {
            "name": "t",
            "type": "text",
            "preprocessing": {
                "encoding": "hashing",
                "num_buckets": 64,
                "max_tokens": 3,
                "ngrams": 1,
            },
        },
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


def test_text_word_pairs_by_default():
    """ngrams=2 (the default): each row's words, then its adjacent pairs; the pairs come from
    the words kept by max_tokens. A bad ngrams is named at once."""
    opts = {"max_tokens": 3, "min_count": 1}
    f = build_feature({"name": "t", "type": "text", "preprocessing": opts}, "input")
    stats = fit(f, ["not good at all", "good"])
    assert stats["ngrams"] == 2
    out, _ = f.transform(pd.Series(["not good at all", "good", ""]), stats, np.arange(3))
    first, second, third = tokens_of(out)
    assert len(first) == 3 + 2  # "not", "good", "at"; "not good", "good at"
    assert first[1] == second[0]  # the word "good" has one id in every row
    assert len(set(first)) == 5 and third == [1]  # an empty text is the unknown token
    unigrams = build_feature(
        {"name": "t", "type": "text", "preprocessing": {**opts, "ngrams": 1}}, "input"
    )
    alone, _ = unigrams.transform(
        pd.Series(["not good at all"]), fit(unigrams, ["not good at all"]), np.arange(1)
    )
    assert len(tokens_of(alone)[0]) == 3
    with pytest.raises(UserError, match="text feature 't' has ngrams 3; use 1 or 2"):
        build_feature({"name": "t", "type": "text", "preprocessing": {"ngrams": 3}}, "input")
    with pytest.raises(UserError, match="encoding 'bag'; use vocabulary or hashing"):
        build_feature({"name": "t", "type": "text", "preprocessing": {"encoding": "bag"}}, "input")


def test_text_vocabulary_min_count_max_size_unknown_and_partitions():
    """The vocabulary holds tokens seen min_count times in training (most frequent first, ties
    by token, at most max_vocab_size), the same however the rows are partitioned; every other
    token is the unknown id 1, and a text with none of the vocabulary's tokens encodes as an
    empty one."""
    f = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"min_count": 2, "ngrams": 1}}, "input"
    )
    rows = ["good food", "good service", "bad food", "good", "rare", "food good"]
    stats = fit(f, rows)
    assert stats["vocab"] == ["good", "food"]  # 4 and 3 times; the rest once
    halves = f.combine(
        [
            f.partial_stats(pd.Series(rows[:2]), np.arange(2)),
            f.partial_stats(pd.Series(rows[2:]), np.arange(2, 6)),
        ]
    )
    assert halves == stats
    out, _ = f.transform(pd.Series(["good rare", "unseen words", "", None]), stats, np.arange(4))
    assert tokens_of(out) == [[2, 1], [1, 1], [1], [1]]
    capped = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"min_count": 1, "max_vocab_size": 3}},
        "input",
    )
    assert fit(capped, rows)["vocab"] == ["good", "food", "bad"]


def _topic_rows(count: int, seed: int = 0) -> list[str]:
    """Short texts from two topics that share no word (and some empty ones)."""
    rng = np.random.default_rng(seed)
    topics = [["space", "alien", "star", "galaxy", "planet"], ["love", "wedding", "heart", "kiss"]]
    rows = []
    for i in range(count):
        words = topics[i % 2]
        rows.append(" ".join(rng.choice(words, rng.integers(1, 4))) if i % 7 else "")
    return rows


def test_text_components_fitted_on_the_shared_sample_whatever_the_partitioning():
    """Beside the ids, a text gets its TF-IDF's leading SVD components, z-scored on the
    training sample: the same statistics however the rows are partitioned (a basis fitted on
    the same sample, in the same order), two topics that share no word apart on the first
    component, and a text of unseen words exactly where an empty or missing one is."""
    from runner.processing.columns import component_columns
    from runner.processing.features.feature_set import automatic_choices

    options = {"ngrams": 1, "components": 64}
    f = build_feature({"name": "t", "type": "text", "preprocessing": options}, "input")
    rows = _topic_rows(400)
    stats = fit(f, rows)
    assert fit(f, rows, parts=3) == stats
    fitted = stats["components"]
    # 9 words, so at most 8 components; the sample is every training row here.
    assert (fitted["terms"], fitted["rows"], len(fitted["mean"])) == (9, 400, 8)
    out, keep = f.transform(pd.Series(rows), stats, np.arange(400))
    assert keep.all() and list(out) == ["t", *component_columns("t", 8)]
    first = out["t.component0"]
    assert first.dtype == np.float32
    assert abs(first.mean()) < 1e-5 and first.std() == pytest.approx(1.0, rel=1e-4)
    space = np.array(["space" in r or "star" in r for r in rows])
    love = np.array(["love" in r or "heart" in r for r in rows])
    # Each topic on one side of the first component: the components carry the text's meaning.
    assert first[space].max() < first[love].min() or first[love].max() < first[space].min()
    probes, _ = f.transform(pd.Series(["qwxz vbnm", "", None]), stats, np.arange(3))
    for column in component_columns("t", 8):
        assert probes[column][0] == probes[column][1] == probes[column][2]
    line = "feature 't': 8 TF-IDF components of its 9 most frequent tokens, fitted on 400"
    meta = {"features": {"t": {"type": "text", "preprocessing": {}, "stats": stats}}}
    assert any(c.startswith(line) for c in automatic_choices(meta))


def test_text_components_auto_by_the_training_rows_with_the_reason_stored():
    """`auto` (the default): 64 components (at most terms - 1) from 30000 training rows up (fitted
    on the 20000-row sample), none below; either way the reason is stored and logged."""
    from runner.processing.features.feature_set import automatic_choices

    f = build_feature({"name": "t", "type": "text", "preprocessing": {"ngrams": 1}}, "input")
    small = fit(f, _topic_rows(400))
    assert "components" not in small
    assert small["components_reason"].startswith("none: 400 training rows, fewer than the 30000")
    large = fit(f, _topic_rows(30000), parts=2)
    assert len(large["components"]["mean"]) == 8  # 9 words
    assert large["components"]["rows"] == 20000  # the shared sample
    assert large["components_reason"] == "30000 training rows, at least the 30000 they need"
    for stats, start in ((small, "TF-IDF components none: 400"), (large, "8 TF-IDF components")):
        meta = {"features": {"t": {"type": "text", "preprocessing": {}, "stats": stats}}}
        assert automatic_choices(meta)[-1].startswith(f"feature 't': {start}")


def test_text_components_can_be_turned_off_and_need_a_vocabulary():
    rows = _topic_rows(60)
    for options in ({"components": 0}, {"encoding": "hashing"}):
        f = build_feature({"name": "t", "type": "text", "preprocessing": options}, "input")
        stats = fit(f, rows)
        assert "components" not in stats
        out, _ = f.transform(pd.Series(rows[:3]), stats, np.arange(3))
        assert isinstance(out, pd.Series)  # the token ids alone
    one_word = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"components": "4"}}, "input"
    )
    stats = fit(one_word, ["same"] * 10)  # one term: nothing to reduce, and the reason says so
    assert "components" not in stats
    assert (
        stats["components_reason"] == "none: the training sample's text has too few distinct tokens"
    )
    for bad in (-1, "many", 2.5, True):
        with pytest.raises(UserError, match="text feature 't' has components .*; use auto, 0"):
            build_feature(
                {"name": "t", "type": "text", "preprocessing": {"components": bad}}, "input"
            )
    with pytest.raises(UserError, match="components 8 with encoding hashing; components need"):
        build_feature(
            {
                "name": "t",
                "type": "text",
                "preprocessing": {"encoding": "hashing", "components": 8},
            },
            "input",
        )


def test_text_components_keep_only_the_sample_s_rank():
    """Texts of few distinct values (template-like): the sample's TF-IDF has rank 3 however many
    components are asked for; the directions past it would be rounding noise that z-scoring
    blows up on a new combination of known words, so they are not kept."""
    f = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"components": 64, "ngrams": 1}}, "input"
    )
    templates = ["red apple pie", "green pear tart", "blue plum jam"]
    stats = fit(f, [templates[i % 3] for i in range(300)])
    assert len(stats["components"]["mean"]) == 3
    mixed, _ = f.transform(pd.Series(["red pear jam", "apple tart plum"]), stats, np.arange(2))
    values = np.array([mixed[f"t.component{i}"] for i in range(3)])
    assert np.abs(values).max() < 10


def _scored_titles(rows: int, seed: int = 0) -> pd.DataFrame:
    """Two-word titles over 40 words, each word with its own effect on the target y."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(40)])
    effect = rng.normal(size=40)
    picks = rng.integers(0, 40, size=(rows, 2))
    y = effect[picks].sum(axis=1) + rng.normal(scale=0.3, size=rows)
    return pd.DataFrame({"t": [" ".join(words[p]) for p in picks], "y": y})


def _fit_set(features, frame: pd.DataFrame, parts: int) -> dict:
    chunks = np.array_split(np.arange(len(frame)), parts)
    partials = [fit_partial(frame.iloc[c].reset_index(drop=True), c, features) for c in chunks]
    return combine_partials(partials, features)


def _title_features(target_type: str = "number", **options) -> FeatureSet:
    return FeatureSet(
        [{"name": "t", "type": "text", "preprocessing": {"ngrams": 1, **options}}],
        [{"name": "y", "type": target_type}],
    )


def test_text_target_score_is_out_of_fold_for_training_rows_and_partition_independent():
    """A text's target score: the training mean plus its words' smoothed deviations, with the
    statistics merged across partitions alike. A training row is scored without its own fold
    (a title that occurs once scores as if its words' targets came from other rows only);
    every other row with all of them; words never seen in training score as an empty text."""
    from helpers import assert_close

    from runner.processing.features import text_score
    from runner.processing.features.feature_set import automatic_choices

    features = _title_features()
    frame = _scored_titles(3000)
    stats = _fit_set(features, frame, 1)
    assert_close(_fit_set(features, frame, 4), stats)
    fitted = stats["t"]["score"]
    assert fitted["prior"] == pytest.approx(frame["y"].mean())
    assert fitted["training_rows"] == 3000 and len(fitted["words"]) == 40
    # Scored with every training row, the score explains most of y (R2 of the word effects).
    text = features.inputs[0]
    new, _ = text.transform(frame["t"], stats["t"], np.arange(3000))
    scored = new["t.score"]
    assert scored.dtype == np.float32
    assert np.corrcoef(scored, frame["y"])[0, 1] > 0.9
    # Out of fold: a row's own target changes its score only when it is not a training row.
    changed = frame.copy()
    changed.loc[0, "y"] += 1000.0
    moved = _fit_set(features, changed, 1)["t"]
    rows = changed["t"].iloc[:1]
    # Not even through the mean it is shrunk towards: its fold's prior leaves it out too.
    same = text._raw_scores(rows, {**fitted}, np.array([True]))
    assert text._raw_scores(rows, {**moved["score"]}, np.array([True])) == pytest.approx(same)
    outside = text._raw_scores(rows, {**moved["score"]}, None)
    assert outside[0] - text._raw_scores(rows, {**fitted}, None)[0] > 1.0
    # Training rows get the out-of-fold values, standardized on the training sample's.
    oof, _ = text.transform(frame["t"], stats["t"], np.arange(3000), np.ones(3000, dtype=bool))
    assert abs(oof["t.score"].mean()) < 1e-3 and oof["t.score"].std() == pytest.approx(1, rel=1e-3)
    assert not np.allclose(oof["t.score"], scored)
    assert len(fitted["bin_edges"]) == 33
    folds = text_score.folds_of([["w1", "w2"], ["w1", "w2"], ["w2", "w1"]])
    assert folds[0] == folds[1]  # equal texts share a fold
    probes, _ = text.transform(pd.Series(["qwxz vbnm", "", None]), stats["t"], np.arange(3))
    assert probes["t.score"][0] == probes["t.score"][1] == probes["t.score"][2]
    meta = {"features": {"t": {"type": "text", "preprocessing": {}, "stats": stats["t"]}}}
    line = "feature 't': a target score (the target: its 40 words' smoothed means over 3000"
    assert any(c.startswith(line) for c in automatic_choices(meta))


def test_text_target_score_for_binary_targets_and_where_it_is_off():
    """A binary target: the rate of its rarer class. None for a category target (auto), for
    long texts (auto), or with target_score false; true with a target it cannot score is a
    one-line error."""
    frame = _scored_titles(600)
    frame["y"] = np.where(frame["y"] > frame["y"].quantile(0.7), "yes", "no")
    stats = _fit_set(_title_features("binary"), frame, 2)
    fitted = stats["t"]["score"]
    assert fitted["positive"] == "yes" and fitted["prior"] == pytest.approx(0.3, abs=0.01)
    # Its classes as the output reads them: "Yes" and "yes" are one.
    spelled = frame.assign(
        y=[("Yes" if i % 2 else v) if v == "yes" else v for i, v in enumerate(frame["y"])]
    )
    assert _fit_set(_title_features("binary"), spelled, 2)["t"]["score"]["prior"] == fitted["prior"]
    for features in (_title_features("category"), _title_features("binary", target_score=False)):
        assert "score" not in _fit_set(features, frame, 1)["t"]
    # Long texts (more than 32 distinct words per row on average): none under auto, and why.
    from runner.processing.features.feature_set import automatic_choices

    long = frame.assign(t=[" ".join(f"x{(i * 7 + j) % 90}" for j in range(40)) for i in range(600)])
    stats = _fit_set(_title_features("binary"), long, 1)["t"]
    assert "score" not in stats
    assert stats["score_reason"].startswith("none: 40.0 vocabulary words per row on average")
    meta = {"features": {"t": {"type": "text", "preprocessing": {}, "stats": stats}}}
    line = "feature 't': target score none: 40.0"
    assert any(c.startswith(line) for c in automatic_choices(meta))
    assert "score" in _fit_set(_title_features("binary", target_score=True), long, 1)["t"]
    with pytest.raises(UserError, match="target_score true, but the output is a category"):
        _title_features("category", target_score=True)
    for bad in ("yes", 0, 1):  # 0 and 1 are not false and true here
        with pytest.raises(UserError, match=f"target_score {bad!r}; use auto, true or false"):
            _title_features(target_score=bad)


def test_text_vocabulary_counts_and_rare_tokens_dropped_more_often_in_training():
    """The vocabulary keeps each token's training count (the same however partitioned); the
    encoder drops a token seen c times with 1 - (1 - token_dropout)(1 - alpha / (alpha + c)),
    never padding or the unknown token, and only in training."""
    import torch

    from runner.model.network import TextEncoder

    f = build_feature(
        {"name": "t", "type": "text", "preprocessing": {"min_count": 1, "ngrams": 1}}, "input"
    )
    rows = ["good food", "good service", "bad food", "good", "food good"]
    stats = fit(f, rows, parts=2)
    assert stats == fit(f, rows)
    assert stats["vocab"] == ["good", "food", "bad", "service"]
    assert stats["vocab_counts"] == [4, 3, 1, 1]

    torch.manual_seed(0)
    size = len(stats["vocab"]) + 2
    encoder = TextEncoder(size, 4, 0.5, stats["vocab_counts"], rare_token_dropout=20)
    seen = torch.tensor([4.0, 3.0, 1.0, 1.0])
    expected = 1 - 0.5 * (1 - 20 / (20 + seen))
    assert torch.allclose(encoder.drop[2:], expected)
    assert encoder.drop[:2].tolist() == [0.0, 0.0]
    assert torch.allclose(TextEncoder(size, 4, 0.5).drop[2:], torch.full((4,), 0.5))
    assert not TextEncoder(size, 4, 0.0, stats["vocab_counts"], 0.0).dropping

    tokens = torch.tensor([[2, 4, 0]]).repeat(4000, 1)  # "good bad" and padding
    mean = (encoder.embedding.weight[2] + encoder.embedding.weight[4]) / 2
    encoder.eval()
    assert torch.allclose(encoder(tokens), mean.expand(4000, -1))
    encoder.train()
    # "bad" (once) is dropped more often than "good" (4 times): the rows' means show it.
    out = encoder(tokens).detach()
    unknown = encoder.embedding.weight[1].detach()
    weights = encoder.embedding.weight.detach()
    kept_good = torch.isclose(out, (weights[2] + weights[4]) / 2).all(1) | torch.isclose(
        out, (weights[2] + unknown) / 2
    ).all(1)
    kept_bad = torch.isclose(out, (weights[2] + weights[4]) / 2).all(1) | torch.isclose(
        out, (unknown + weights[4]) / 2
    ).all(1)
    assert abs(kept_good.float().mean() - (1 - expected[0])) < 0.03
    assert abs(kept_bad.float().mean() - (1 - expected[2])) < 0.03


def test_number_log1p_is_fitted_in_log_space_and_inverts():
    f = build_feature(
        {"name": "price", "type": "number", "preprocessing": {"normalization": "log1p"}}, "output"
    )
    values = [1000.0, 10000.0, 100000.0, 10.0, 0.0, -5.0]
    stats = fit(f, values)
    assert stats == pytest.approx(fit(f, values, parts=3))  # partition-independent
    out, _ = f.transform(pd.Series(values), stats, np.arange(6))
    assert np.mean(out) == pytest.approx(0.0, abs=1e-6) and np.std(out) == pytest.approx(
        1.0, rel=1e-5
    )
    # Spaced evenly in log space: 1e3 -> 1e4 -> 1e5 are equal steps.
    assert out[1] - out[0] == pytest.approx(out[2] - out[1], rel=1e-3)
    # A target trained in log space comes back in raw units (sign kept).
    np.testing.assert_allclose(
        f.denormalize(out.astype(np.float64), stats), values, rtol=1e-5, atol=1e-4
    )


def test_number_quantile_does_not_depend_on_partitioning_and_inverts():
    f = build_feature(
        {
            "name": "income",
            "type": "number",
            "preprocessing": {"normalization": "quantile", "num_quantiles": 101},
        },
        "output",
    )
    rng = np.random.default_rng(0)
    values = rng.lognormal(mean=10, sigma=1.5, size=30000)  # heavy right tail
    one, many = fit(f, values), fit(f, values, parts=7)
    assert one["quantiles"] == many["quantiles"]  # bottom-k by row number: exact, any cut
    out, _ = f.transform(pd.Series(values), one, np.arange(len(values)))
    # Ranks are near uniform: unit variance, centred, bounded.
    assert abs(float(np.mean(out))) < 0.05 and float(np.std(out)) == pytest.approx(1.0, abs=0.05)
    assert out.min() >= -np.sqrt(3) - 1e-6 and out.max() <= np.sqrt(3) + 1e-6
    median = f.denormalize(np.array([0.0]), one)[0]
    assert median == pytest.approx(np.median(values), rel=0.05)
    with pytest.raises(UserError, match="num_quantiles < 2"):
        build_feature(
            {"name": "x", "type": "number", "preprocessing": {"num_quantiles": 1}}, "input"
        )


def test_vector_length_scaling_missing_and_errors():
    f = build_feature({"name": "emb", "type": "vector"}, "input")
    train = ["1,2,3", "[3, 4, 5]", None, "2 3 4"]
    stats, split = fit(f, train), fit(f, train, parts=3)
    assert split["length"] == 3 and split["std"] == pytest.approx(stats["std"])
    assert stats["length"] == 3 and stats["mean"] == pytest.approx([2.0, 3.0, 4.0])
    columns, keep = f.transform(pd.Series(["2,3,4", None, [3.0, 4.0, 5.0]]), stats, np.arange(3))
    assert list(columns) == ["emb.0", "emb.1", "emb.2"] and keep.all()
    assert [round(float(columns["emb.0"][i]), 4) for i in range(3)] == [0.0, 0.0, 1.2247]
    with pytest.raises(
        UserError, match=r"'emb' has 2 values where the others have 3 at data row 2"
    ):
        f.transform(pd.Series(["1,2,3", "1,2"]), stats, np.arange(2))
    with pytest.raises(UserError, match=r"non-numeric member in '1,x,3' at data row 1"):
        f.partial_stats(pd.Series(["1,x,3"]), np.arange(1))
    with pytest.raises(UserError, match=r"row 1 field 'emb' has 2 values where the others have 3"):
        f.check_values(pd.Series(["1,2,3", "1,2"]), stats)


def test_set_vocabulary_unseen_missing_and_partition_independence():
    f = build_feature(
        {"name": "tags", "type": "set", "preprocessing": {"min_count": 2, "lowercase": True}},
        "input",
    )
    train = ["red|large|sale", "Red | small", None, "large|red|red", "sale|", "blue"]
    stats = fit(f, train)
    assert stats == fit(f, train, parts=3)
    assert stats["vocab"] == ["red", "large", "sale"]  # by count, then name; blue (1) < min_count
    out, keep = f.transform(
        pd.Series(["sale|red", "", None, "green|large", ["red", "sale"]]), stats, np.arange(5)
    )
    assert keep.all()
    assert out.tolist() == [[2, 4], [], [], [1, 3], [2, 4]]  # sorted members; green unseen -> 1
    with pytest.raises(UserError, match=r"set feature 'tags' has no members.*delimiter"):
        fit(f, [None, ""])


def test_set_output_keeps_empty_sets_drops_unseen_members_and_metrics_match_sklearn():
    f = build_feature({"name": "tags", "type": "set"}, "output")
    stats = fit(f, ["a|b", "b", "c|a", ""])
    out, keep = f.transform(pd.Series(["a|z", None, "", "c"]), stats, np.arange(4))
    assert keep.all() and out.tolist()[1:3] == [[], []]  # missing or empty: no members
    assert out.tolist()[0] == [stats["vocab"].index("a") + 2]  # z (unseen) dropped
    rng = np.random.default_rng(1)
    y = rng.random((200, 5)) < 0.3
    y[:3] = False  # rows with no members
    logits = rng.normal(size=(200, 5)) + np.where(y, 1.0, -1.0)
    got = output_metrics("set", logits.astype(np.float32), y.astype(np.float32))
    predicted = logits > 0
    assert got["jaccard"] == pytest.approx(
        skm.jaccard_score(y, predicted, average="samples", zero_division=1.0)
    )
    assert got["micro_f1"] == pytest.approx(skm.f1_score(y, predicted, average="micro"))
    assert got["macro_f1"] == pytest.approx(skm.f1_score(y, predicted, average="macro"))
    halves = [
        partial("set", logits[:70], y[:70].astype(np.float32)),
        partial("set", logits[70:], y[70:].astype(np.float32)),
    ]
    assert finish("set", merge("set", halves)) == pytest.approx(got)  # shards merge exactly


def test_date_parts_cycles_missing_and_formats():
    f = build_feature({"name": "when", "type": "date"}, "input")
    train = [
        "2024-03-05",
        "2024-03-05 14:30",
        None,
        "2023-12-31T23:59:00Z",
        "1709596800",
        "03/05/2024",
    ]
    stats = fit(f, train)
    assert stats == pytest.approx(fit(f, train, parts=3))
    columns, keep = f.transform(pd.Series(train), stats, np.arange(6))
    assert list(columns) == date_columns("when") and keep.all()
    frame = pd.DataFrame(columns)
    assert frame["when.missing"].tolist() == [0, 0, 1, 0, 0, 0]
    # 2024-03-05 14:30: hour 14 of 24 on the circle; the date-only one sits at midnight.
    assert frame.loc[1, "when.hour_sin"] == pytest.approx(np.sin(2 * np.pi * 14 / 24), abs=1e-6)
    assert frame.loc[0, "when.hour_cos"] == pytest.approx(1.0)
    # Epoch seconds and a US-style string are the same day as the ISO one.
    for row in (4, 5):
        assert frame.loc[row, "when.dayofyear_sin"] == pytest.approx(
            frame.loc[0, "when.dayofyear_sin"]
        )
    # December 31st and January 1st are neighbours on the year's circle.
    jan = f.transform(pd.Series(["2024-01-01"]), stats, np.arange(1))[0]
    dec = columns["when.dayofyear_cos"][3]
    assert abs(jan["when.dayofyear_cos"][0] - dec) < 0.01
    assert all(v.dtype == np.float32 for v in columns.values())


def test_date_errors_name_column_and_row():
    f = build_feature({"name": "when", "type": "date"}, "input")
    with pytest.raises(
        UserError, match=r"date feature 'when' has value 'soon' that is no date at data row 3"
    ):
        f.partial_stats(pd.Series(["2024-01-01", None, "soon"]), np.arange(3))
    pinned = build_feature(
        {"name": "when", "type": "date", "preprocessing": {"datetime_format": "%d.%m.%Y"}}, "input"
    )
    stats = fit(pinned, ["05.03.2024", "06.03.2024"])
    with pytest.raises(UserError, match=r"data row 1; .*match datetime_format '%d.%m.%Y'"):
        pinned.transform(pd.Series(["2024-03-05"]), stats, np.arange(1))
    with pytest.raises(UserError, match="has no dates in the training split"):
        fit(f, [None, ""])


def test_unknown_type_and_option_errors():
    with pytest.raises(
        UserError, match="known input types: binary, category, date, number, set, text, vector"
    ):
        build_feature({"name": "x", "type": "image"}, "input")
    with pytest.raises(UserError, match="known output types: binary, category, number, set"):
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


def test_auto_numbers_robust_scaled_log_when_skewed_smoothly_clipped_and_stored_with_reason():
    """`auto` (the default) decides on the training split and says why: a never-negative,
    right-skewed input is taken in log space; every input is median-centred, IQR-scaled and
    its outliers squashed smoothly below 3; the same is fitted however the rows are cut."""
    rng = np.random.default_rng(0)
    skewed = rng.lognormal(3.0, 1.2, 5000)
    symmetric = rng.normal(50.0, 10.0, 5000)
    symmetric[:5] = 1e6  # outliers a z-score would turn into 1e3-sized inputs
    f = build_feature({"name": "x", "type": "number"}, "input")
    lognormal, normal = fit(f, skewed), fit(f, symmetric)
    cut = fit(f, skewed, parts=4)
    assert {k: v for k, v in cut.items() if k not in ("mean", "std")} == {
        k: v for k, v in lognormal.items() if k not in ("mean", "std")
    }  # decided on an exact bottom-k sample: the same however the rows are cut
    assert lognormal["normalization"] == "robust" and lognormal["log"] is True
    assert (
        lognormal["reason"].startswith("log1p, robust scaling")
        and "skewness" in lognormal["reason"]
    )
    assert normal["normalization"] == "robust" and normal["log"] is False
    out, _ = f.transform(pd.Series(symmetric), normal, np.arange(5000))
    assert np.abs(out).max() <= 3.0  # smooth clipping bounds every value
    assert np.median(out) == pytest.approx(0.0, abs=0.05)  # median-centred
    # The bulk keeps a z-score's scale, not the outliers': quartiles near +-0.674, squashed a bit.
    np.testing.assert_allclose(np.quantile(out, [0.25, 0.75]), [-0.657, 0.657], atol=0.04)
    logged, _ = f.transform(pd.Series(skewed), lognormal, np.arange(5000))
    assert abs(float(np.mean(logged))) < 0.2  # symmetric after the log
    # Bin edges for the piecewise-linear encoder, in the normalized space, increasing.
    edges = np.array(lognormal["bin_edges"])
    assert len(edges) > 10 and np.all(np.diff(edges) > 0)
    assert edges[0] == pytest.approx(logged.min(), abs=0.05)
    # A configured normalization is taken as it is; negative values never go to log space.
    z = build_feature(
        {"name": "x", "type": "number", "preprocessing": {"normalization": "zscore"}}, "input"
    )
    assert "normalization" not in fit(z, skewed) and "reason" not in fit(z, skewed)
    assert fit(f, skewed - 100.0)["log"] is False


def test_auto_target_is_log1p_when_skewed_else_zscored_and_inverts():
    rng = np.random.default_rng(1)
    prices = rng.lognormal(11.0, 0.8, 4000)
    ratings = rng.normal(6.0, 1.5, 4000)
    f = build_feature({"name": "y", "type": "number"}, "output")
    price_stats, rating_stats = fit(f, prices), fit(f, ratings)
    assert price_stats["normalization"] == "log1p" and "log1p target" in price_stats["reason"]
    assert rating_stats["normalization"] == "zscore" and "z-scored target" in rating_stats["reason"]
    with pytest.raises(UserError, match="output feature 'y' has normalization 'robust'"):
        build_feature(
            {"name": "y", "type": "number", "preprocessing": {"normalization": "robust"}},
            "output",
        )
    for values, stats in ((prices, price_stats), (ratings, rating_stats)):
        out, _ = f.transform(pd.Series(values), stats, np.arange(len(values)))
        assert abs(float(out.mean())) < 0.05 and float(out.std()) == pytest.approx(1.0, abs=0.05)
        np.testing.assert_allclose(f.denormalize(out.astype(np.float64), stats), values, rtol=1e-4)


def test_number_predictions_are_kept_inside_the_training_target_range():
    """A network extrapolates; the decoded prediction does not leave [min, max] of training,
    while the targets themselves are decoded unclipped (metrics see the true values)."""
    from runner.scoring.decoding import Decoders

    meta = {
        "input_features": ["x"],
        "output_features": ["y"],
        "features": {
            "x": {"type": "number", "preprocessing": {}, "stats": {}},
            "y": {
                "type": "number",
                "preprocessing": {},
                "stats": {
                    "normalization": "zscore",
                    "mean": 5.0,
                    "std": 2.0,
                    "min": 1.0,
                    "max": 10.0,
                },
            },
        },
    }
    decoders = Decoders(meta)
    z = np.array([-100.0, 0.0, 100.0])
    np.testing.assert_allclose(decoders.predicted("y")(z), [1.0, 5.0, 10.0])
    np.testing.assert_allclose(decoders.denormalizer("y")(z), [-195.0, 5.0, 205.0])
    stats = partial(
        "number", z, np.array([-1.0, 0.0, 1.0]), decoders.denormalizer("y"), decoders.predicted("y")
    )
    assert finish("number", stats)["mae"] == pytest.approx((2.0 + 0 + 3.0) / 3)


def test_piecewise_linear_encoder_bins_extend_and_pass_through():
    """Per column: 0 below a bin, 1 above, the position inside; the first bin extends below the
    smallest edge and the last above the largest; columns without bins pass through."""
    import torch

    from runner.model.network import PiecewiseLinearEncoder

    encoder = PiecewiseLinearEncoder([[0.0, 1.0, 2.0], [], [-1.0, 1.0]])
    x = torch.tensor([[-1.0, 5.0, 0.0], [0.5, 0.0, 3.0], [1.5, 1.0, -3.0], [3.0, 0.0, 0.0]])
    assert encoder.width == 3 + 2 * 2  # the one-bin column padded with a bin that stays 0
    np.testing.assert_allclose(
        encoder(x)[:, 3:].numpy(),
        [[-1.0, 0.0, 0.5, 0.0], [0.5, 0.0, 2.0, 0.0], [1.0, 0.5, -1.0, 0.0], [1.0, 2.0, 0.5, 0.0]],
    )
    np.testing.assert_allclose(encoder(x)[:, :3].numpy(), x.numpy())  # values kept beside


def test_bin_features_project_each_columns_bins_on_their_own():
    """model.bin_features=k: each binned column's bins through its own linear layer and a ReLU
    to k values (PLE-Q-LR); columns without bins pass through, values kept beside."""
    import torch

    from runner.model.network import PiecewiseLinearEncoder

    edges = [[0.0, 1.0, 2.0], [], [-1.0, 1.0]]
    plain, projected = PiecewiseLinearEncoder(edges), PiecewiseLinearEncoder(edges, 3)
    assert projected.width == 3 + 2 * 3
    x = torch.tensor([[-1.0, 5.0, 0.0], [0.5, 0.0, 3.0], [1.5, 1.0, -3.0], [3.0, 0.0, 0.0]])
    bins = plain(x)[:, 3:].reshape(4, 2, 2)  # [rows, binned columns, bins]
    with torch.no_grad():
        got = projected(x)
    assert projected.projection is not None
    for column in range(2):  # column 0 by the first layer, column 2 by the second
        want = torch.relu(
            bins[:, column] @ projected.projection[column] + projected.projection_bias[column]
        )
        torch.testing.assert_close(got[:, 3 + 3 * column : 6 + 3 * column], want.detach())
    np.testing.assert_allclose(got[:, :3].numpy(), x.numpy())
    assert PiecewiseLinearEncoder(edges, 0).projection is None  # 0: off, the bins as they are


def test_bin_edges_spend_no_bins_on_a_value_that_holds_most_rows():
    """A capital gain (92 % zeros) gets its 32 bins over the values that vary, not 3; a column
    of few distinct values an edge at each; a continuous column plain quantiles."""
    from runner.processing.features.number import BIN_EDGES, bin_edges

    rng = np.random.default_rng(0)
    gains = np.where(rng.random(20000) < 0.92, 0.0, rng.lognormal(8, 1, 20000))
    plain = np.unique(np.quantile(gains, np.linspace(0, 1, BIN_EDGES)))
    edges = bin_edges(gains, BIN_EDGES)
    assert len(plain) <= 4 and len(edges) == BIN_EDGES
    assert edges[0] == 0.0 and edges[-1] == gains.max() and np.all(np.diff(edges) > 0)
    positive = gains[gains > 0]  # the rest spread over the non-zero values' quantiles
    shares = np.histogram(positive, edges[1:])[0] / len(positive)
    assert shares.max() < 3.0 / (BIN_EDGES - 2)
    levels = rng.integers(1, 17, 5000).astype(float)  # education years: 16 values
    np.testing.assert_array_equal(bin_edges(levels, BIN_EDGES), np.arange(1, 17))
    normal = rng.normal(size=20000)
    np.testing.assert_array_equal(
        bin_edges(normal, BIN_EDGES), np.quantile(normal, np.linspace(0, 1, BIN_EDGES))
    )


def test_vocabulary_counts_stay_bounded_and_keep_the_frequent_values():
    """A partition keeps at most PARTIAL_VOCABULARY_FACTOR x max_vocab_size of its value
    counts, the merge likewise, and the frequent values that make the vocabulary survive:
    a category, a set and a scored text, each with thousands of values seen once beside a
    few frequent ones, fit the vocabulary a full count gives. Below the cap nothing is cut
    (every other test here)."""
    from collections import Counter

    from runner.processing.features.base import PARTIAL_VOCABULARY_FACTOR

    rng = np.random.default_rng(0)
    rows = 6000
    frequent = rng.choice(["a", "b", "c", "d", "e"], size=rows, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    rare = [f"id{i}" for i in range(rows)]  # each seen once
    cells = np.where(rng.random(rows) < 0.5, frequent, rare)
    cap = PARTIAL_VOCABULARY_FACTOR * 5

    category = build_feature(
        {"name": "c", "type": "category", "preprocessing": {"max_vocab_size": 5}}, "input"
    )
    partial = category.partial_stats(pd.Series(cells[:2000]), np.arange(2000))
    assert len(partial["counts"]) == cap
    assert {"a", "b", "c", "d", "e"} <= set(partial["counts"])
    exact = [v for v, _ in sorted(Counter(cells).items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    assert fit(category, cells, parts=6)["vocab"] == exact

    members = build_feature(
        {"name": "s", "type": "set", "preprocessing": {"max_vocab_size": 5}}, "input"
    )
    joined = [f"{f}|{r}" for f, r in zip(frequent, rare, strict=True)]
    assert len(members.partial_stats(pd.Series(joined), np.arange(rows))["counts"]) == cap
    assert fit(members, joined, parts=3)["vocab"] == ["a", "b", "c", "d", "e"]

    texts = pd.DataFrame(
        {
            "t": [f"{f} {r}" for f, r in zip(frequent, rare, strict=True)],
            "y": (frequent == "a").astype(float) + rng.normal(scale=0.1, size=rows),
        }
    )
    features = _title_features(max_vocab_size=5, min_count=2, target_score=True)
    partial = fit_partial(texts.iloc[:3000], np.arange(3000), features)["t"]
    assert len(partial["counts"]) == cap
    assert set(partial["score"]["words"]) <= set(partial["counts"])
    stats = _fit_set(features, texts, 3)["t"]
    assert stats["vocab"] == ["a", "b", "c", "d", "e"]
    assert set(stats["score"]["words"]) == {"a", "b", "c", "d", "e"}


def test_class_labels_come_back_as_the_values_they_were():
    """Predicted and true labels: true/false as booleans, plain whole numbers as integers (a
    0/1 or 1-5 target), anything else (codes with a leading zero, words, decimals) as strings."""
    from runner.processing.features.model_side.base import typed_labels

    assert typed_labels(["False", "True"]).tolist() == [False, True]
    assert typed_labels(["false", "true"]).dtype == bool
    assert (
        typed_labels(["0", "1"]).tolist() == [0, 1] and typed_labels(["-2", "10"]).dtype == np.int64
    )
    for strings in (["007", "12"], ["no", "yes"], ["1.5", "2"], ["1", "one"]):
        assert typed_labels(strings).tolist() == strings
