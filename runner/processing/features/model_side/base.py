"""What a feature type means to the model's side. As an input: the columns of a batch its
processed values fill (numbers, category codes or token ids). As an output (its head): its
logits' size and labels, its targets' tensor, its loss, how ensemble members average, its
metrics (mergeable statistics), its baseline and how its logits read as predictions.

Numpy here and torch inside the methods that need it: a training worker, a scorer or a
Serve replica imports the heads, never the preprocessing code and pandas with it (a fresh
Ray actor saves 0.3-0.4 s of imports before its first step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from runner.processing.columns import missing_column

if TYPE_CHECKING:
    import torch

EPS = 1e-7  # where probabilities are clipped before a log


@dataclass
class InputColumns:
    """Where an input's processed columns go in a batch: the float matrix (each column with its
    quantile bin edges, [] where none), the category codes (ids, 0 for unseen) or a token
    matrix of its own."""

    numeric: list[tuple[str, list[float]]] = field(default_factory=list)
    category_ids: int | None = None  # ids in the category matrix's column (vocabulary + 1)
    token_ids: int | None = None  # ids its token matrix holds (padding and unseen included)
    # A fitted vocabulary whose id 1 is a trained unknown token (model.token_dropout), and
    # each vocabulary token's training count.
    unknown_token: bool = False
    token_counts: list[int] | None = None


class ModelSide:
    """One feature type's behaviour on the model's side; the output methods take the output's
    spec (name, size, labels) where they need more than the arrays."""

    type_name: ClassVar[str]
    output: ClassVar[bool] = False  # it can be an output (the methods below the inputs')
    metrics: ClassVar[tuple[str, ...]] = ()  # the first is the main metric of an output
    trees: ClassVar[bool] = False  # gradient-boosted trees can fit it (one LightGBM objective)
    drops_missing_rows: ClassVar[bool] = True  # a row without this target is left out
    drops_unseen_classes: ClassVar[bool] = False  # a class training never saw leaves its row out
    normalized: ClassVar[bool] = False  # trained on a normalized scale, reported in raw units
    multi_hot: ClassVar[bool] = False  # targets are member lists, read as [rows, size] 0/1

    # -- as an input ---------------------------------------------------------------------------
    def input_columns(self, name: str, stats: dict) -> InputColumns:
        raise NotImplementedError

    # -- as an output: shape ------------------------------------------------------------------
    def size(self, stats: dict) -> int:
        """Logits per row."""
        return 1

    def labels(self, stats: dict) -> list:
        return []

    # -- targets ------------------------------------------------------------------------------
    def target_dtype(self, exact: bool) -> Any:
        """`exact`: scoring's targets (the true values a prediction file shows)."""
        return np.float32

    def empty_target(self, spec) -> np.ndarray:
        return np.zeros(0, self.target_dtype(False))

    # -- training -----------------------------------------------------------------------------
    def class_shares(self, stats: dict) -> list[float] | None:
        """Each class's share of the training rows (labels' order), where the output has
        classes whose weights may differ (model.class_weights); None otherwise."""
        return None

    def loss(self, logits: torch.Tensor, target: torch.Tensor, weights=None) -> torch.Tensor:
        raise NotImplementedError

    def mean_of_members(self, logits: torch.Tensor) -> torch.Tensor:
        """The prediction of an ensemble from its members' logits [rows, k, size] as logits
        [rows, size]."""
        return logits.mean(dim=1)

    def tree_objective(self, spec) -> dict:
        raise NotImplementedError

    # -- the greedy ensemble (Caruana): members are averaged in this space ---------------------
    def to_space(self, logits: np.ndarray) -> np.ndarray:
        return logits.astype(np.float64)

    def to_logits(self, averaged: np.ndarray) -> np.ndarray:
        return averaged

    def selection_loss(self, averaged: np.ndarray, target: np.ndarray) -> float:
        """The validation loss the greedy selection lowers."""
        raise NotImplementedError

    # -- metrics: partial() per shard -> merge() -> finish() ------------------------------------
    def partial(self, logits, target, denormalize=None, predicted=None) -> dict:
        raise NotImplementedError

    def merge(self, parts: list[dict], merged: dict) -> None:
        """Adds the type's own statistics of `parts` to `merged` (n and loss_sum are there)."""
        raise NotImplementedError

    def finish(self, stats: dict) -> dict[str, float]:
        raise NotImplementedError

    # -- the baseline -------------------------------------------------------------------------
    def constant_row(self, spec, decoders) -> np.ndarray:
        """The logits of the training split's most frequent class or mean (the baseline every
        model has to beat)."""
        return np.full(spec.size, -1.0, dtype=np.float32)  # no positives

    def majority_baseline(self, spec, counts: dict, stats: dict) -> dict[str, float]:
        """The baseline's metrics from the scored rows' statistics (`counts`) and the
        output's fitted statistics, without a second pass."""
        return {}

    # -- plots and predictions ----------------------------------------------------------------
    def plot(self, spec, stats: dict, split: str):
        """The evaluation figure of one split from its merged statistics (None: nothing to
        draw); report.html and the split's PNG show it."""
        return None

    def prediction_columns(self, spec, decoders, logits, target) -> dict[str, np.ndarray]:
        """`<name>_prediction`, its probabilities, and the true value where `target` is given."""
        raise NotImplementedError


def scalar_columns(name: str, stats: dict) -> InputColumns:
    """One float column with its bin edges, and its missing flag where it has one."""
    columns = [(name, list(stats.get("bin_edges", [])))]
    if stats.get("missing_flag"):
        columns.append((missing_column(name), []))
    return InputColumns(numeric=columns)


def logit_of_mean_probability(logits: torch.Tensor) -> torch.Tensor:
    """Members' logits [rows, k, size] -> the logit of their mean probability per logit
    [rows, size], without overflow."""
    import torch

    log_p = torch.nn.functional.logsigmoid(logits).logsumexp(dim=1)
    log_q = torch.nn.functional.logsigmoid(-logits).logsumexp(dim=1)
    return log_p - log_q


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    return np.bincount(labels * classes + predicted, minlength=classes * classes).reshape(
        classes, classes
    )


def auc_of(positive_scores: np.ndarray, negative_scores: np.ndarray) -> float:
    """Mann-Whitney U: for each positive, the negatives scored below it, a tie counting half.
    Searched in the sorted negatives: no rank arrays over all rows (at 1.5M rows those made
    the test split's scoring the peak of the 10M-row streaming bench)."""
    if len(positive_scores) == 0 or len(negative_scores) == 0:
        return float("nan")
    negatives = np.sort(negative_scores)
    below = np.searchsorted(negatives, positive_scores, side="left")
    ties = np.searchsorted(negatives, positive_scores, side="right") - below
    u = float(below.sum()) + 0.5 * float(ties.sum())
    return u / (len(positive_scores) * len(negative_scores))


def macro_f1_of(confusion: np.ndarray) -> float:
    """Macro F1 from a confusion matrix (rows: truth, columns: prediction)."""
    true_positive = np.diag(confusion).astype(np.float64)
    precision_den = confusion.sum(axis=0)
    recall_den = confusion.sum(axis=1)
    f1 = np.where(
        precision_den + recall_den > 0,
        2 * true_positive / np.maximum(precision_den + recall_den, 1),
        0.0,
    )
    # As scikit-learn: over the labels seen in truth or prediction.
    present = (recall_den > 0) | (precision_den > 0)
    return float(f1[present].mean()) if present.any() else 0.0


_WHOLE_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)")


def typed_labels(labels: list) -> np.ndarray:
    """A class label as the value it was in the data: labels that are all true/false as
    booleans, all whole numbers written plainly (no leading zero: not a code like '007') as
    integers; any other set stays strings. Labels are stored as strings, and a 0/1 or a
    boolean target came back as '0'/'1' or 'True'/'False', which no comparison with the data's
    own values matched."""
    texts = [str(label) for label in labels]
    if texts and {t.lower() for t in texts} <= {"true", "false"}:
        return np.array([t.lower() == "true" for t in texts], dtype=bool)
    if texts and all(_WHOLE_NUMBER.fullmatch(t) for t in texts):
        return np.array([int(t) for t in texts], dtype=np.int64)
    return np.asarray(labels, dtype=object)
