"""model: the family and the network's shape, and the decisions of a classifier."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.config.bagging import BaggingConfig
from runner.config.catboost import CatBoostConfig
from runner.config.checks import _one_of, _require
from runner.config.dataset import FeatureConfig
from runner.config.gbm import GBMConfig
from runner.errors import UserError


def rare(shares: list[float]) -> bool:
    """A class under RARE_CLASS_RATIO / classes of the training rows."""
    return min(shares) < RARE_CLASS_RATIO / len(shares)


def _family_module(name: str) -> bool:
    """model.family names a module of one's own (with a FAMILY, runner.model.registry), not a
    built-in family: one that Python finds."""
    import importlib.util

    if name in ("auto", *MODEL_FAMILIES) or not name.replace(".", "").replace("_", "").isalnum():
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# model.ensemble_size=null's members on a table small enough (docs/accuracy.md: 8 members gained
# on 10 of 11 suite tables and cost up to 4.2x the wall time; 4 keep that within 3x).
ENSEMBLE_AUTO = 4


MODEL_FAMILIES = ("network", "gbm", "ensemble", "catboost", "bagged")


CLASS_WEIGHTS = ("none", "balanced", "auto")  # or {label: weight}


# A class is rare below this share of the training rows divided by the classes (a binary
# output's positive class: below 20%): model.class_weights=auto balances the classes, and
# model.decision_threshold=auto picks the threshold on validation.
RARE_CLASS_RATIO = 0.4


# The output types whose model side says trees can fit them (ModelSide.trees): the config sits
# below the features' layer, so it keeps the names; tests/test_families.py checks they agree.
TREE_OUTPUT_TYPES = ("binary", "category", "number")
TREE_FAMILIES = ("gbm", "ensemble", "catboost")  # those that fit trees: one such output


@dataclass
class ModelConfig:
    # null (model=auto): inferred from the table, with dataset.target as the output.
    input_features: list[FeatureConfig] | None = None
    output_features: list[FeatureConfig] | None = None
    # network (the neural network below) | gbm (gradient-boosted trees: model.gbm) |
    # ensemble (both on the same splits, weighted on the validation split) | catboost
    # (CatBoost's trees: model.catboost) | bagged (a portfolio of those, each over k folds,
    # weighted out of fold: model.bagging; preset=best) | auto (the ensemble where trees fit
    # the output, at every size, else the network: pick_family)
    family: str = "auto"
    gbm: GBMConfig = field(default_factory=GBMConfig)
    catboost: CatBoostConfig = field(default_factory=CatBoostConfig)
    bagging: BaggingConfig = field(default_factory=BaggingConfig)
    combiner: str = "concat"  # concat (MLP) | residual (residual MLP) | transformer
    hidden_size: int = 256  # picked by the defaults sweep (docs/accuracy.md)
    num_layers: int = 2
    dropout: float = 0.0
    embedding_size: int = 16
    # Category inputs' embedding width; null: model.embedding_size (texts and sets keep that).
    category_embedding_size: int | None = None
    token_size: int = 32  # transformer: the width of every feature's token
    num_heads: int = 4  # transformer: attention heads (token_size must divide by it)
    # auto (piecewise, except with the transformer, which makes its own token of each number) |
    # none (values as they are) | piecewise (PLE: quantile bins of the training split) |
    # periodic (PLR embeddings)
    number_encoder: str = "auto"
    # piecewise: each column's bins through its own linear layer and a ReLU to this many
    # features (PLE-Q-LR, Gorishniy et al., 2022); 0: the bins go to the MLP as they are.
    bin_features: int = 0
    # Share of a text's tokens that training replaces by the unknown token (vocabulary texts).
    token_dropout: float = 0.5
    # Vocabulary texts: a token seen c times in training is also dropped with probability
    # alpha / (alpha + c) (alpha = this; 0: off), so rare words lean less on their few rows.
    rare_token_dropout: float = 20.0
    # Members of a parameter-efficient ensemble (TabM-mini: one MLP shared by k members, each
    # with its own sign adapter on the MLP's input and its own head; predictions averaged).
    # null (auto): ENSEMBLE_AUTO members when the training split has at most
    # ensemble_max_rows rows, else 1 (off): the members multiply the MLP's work per row, a few
    # seconds on a small table, the run's whole cost at a million rows (docs/accuracy.md).
    # In the ensemble family, auto is 1: the trees bring what the members would.
    ensemble_size: int | None = None
    # The largest training split whose network auto gives members (ensemble_size): they
    # multiply the MLP's work per row.
    ensemble_max_rows: int = 50_000
    # The ensemble trains its network and its trees at once (each on a share of the cores,
    # runner/training/ensemble_fit.py) from this many training rows; below, one after the other:
    # there the trees take a second or two and the network's lost core costs more than the
    # overlap saves (docs/accuracy.md). 0: always; null: never.
    ensemble_side_by_side_rows: int | None = 50_000
    # A binary or category output's class weights in the loss (the network's and the trees'):
    # `none`; `balanced` (each class weighs rows / (classes x its rows), from the training
    # split); `auto` (balanced where a class is rare: under RARE_CLASS_RATIO / classes of the
    # training rows, else none); or {label: weight} (a label left out weighs 1).
    class_weights: Any = "none"
    # A binary output's decision: `auto` (where the positive class is rare, the probability
    # threshold of the best F1 on the validation split, else 0.5) or a probability in (0, 1).
    # predict, serve, the test metrics and export.json apply it (runner/scoring/decisions.py).
    decision_threshold: Any = "auto"

    def __post_init__(self):
        if not _family_module(self.family):
            _one_of(self.family, ("auto", *MODEL_FAMILIES), "model.family")
        weights = self.class_weights
        if isinstance(weights, Mapping):
            for label, weight in weights.items():
                _require(
                    isinstance(weight, int | float) and weight > 0,
                    f"model.class_weights.{label}",
                    "a number above 0",
                    weight,
                )
        else:
            _one_of(weights, CLASS_WEIGHTS, "model.class_weights")
        threshold = self.decision_threshold
        if threshold != "auto":
            _require(
                isinstance(threshold, int | float) and 0 < threshold < 1,
                "model.decision_threshold",
                "auto or a probability in (0, 1)",
                threshold,
            )
        outputs = self.output_features
        if self.family in TREE_FAMILIES and outputs is not None:
            kinds = [f"{f.name} ({f.type})" for f in outputs]
            if not self.trees_fit(outputs):
                raise UserError(
                    f"model.family={self.family} trains trees for one binary, category or number "
                    f"output; this model has {', '.join(kinds)}: use model.family=network or "
                    "one such output"
                )
        _one_of(self.combiner, ("concat", "residual", "transformer"), "model.combiner")
        _one_of(
            self.number_encoder, ("auto", "none", "piecewise", "periodic"), "model.number_encoder"
        )
        if self.number_encoder not in ("auto", "none") and self.combiner == "transformer":
            raise UserError(
                f"model.number_encoder={self.number_encoder} feeds the concat or residual "
                "combiner; the transformer makes its own token of each number (drop one of the two)"
            )
        _require(self.num_heads >= 1, "model.num_heads", "at least 1", self.num_heads)
        _require(
            self.token_size >= 1 and self.token_size % self.num_heads == 0,
            "model.token_size",
            f"a positive multiple of model.num_heads={self.num_heads}",
            self.token_size,
        )
        _require(
            self.bin_features >= 0, "model.bin_features", "0 or more (0: off)", self.bin_features
        )
        _require(self.hidden_size >= 1, "model.hidden_size", "at least 1", self.hidden_size)
        _require(self.num_layers >= 0, "model.num_layers", "0 or more", self.num_layers)
        _require(0.0 <= self.dropout < 1.0, "model.dropout", "in [0, 1)", self.dropout)
        _require(
            0.0 <= self.token_dropout < 1.0, "model.token_dropout", "in [0, 1)", self.token_dropout
        )
        _require(
            self.rare_token_dropout >= 0,
            "model.rare_token_dropout",
            "0 or more (0: off)",
            self.rare_token_dropout,
        )
        _require(
            self.embedding_size >= 1, "model.embedding_size", "at least 1", self.embedding_size
        )
        _require(
            self.category_embedding_size is None or self.category_embedding_size >= 1,
            "model.category_embedding_size",
            "at least 1, or null (model.embedding_size)",
            self.category_embedding_size,
        )
        _require(
            self.ensemble_size is None or self.ensemble_size >= 1,
            "model.ensemble_size",
            "at least 1, or null (auto)",
            self.ensemble_size,
        )
        _require(
            self.ensemble_side_by_side_rows is None or self.ensemble_side_by_side_rows >= 0,
            "model.ensemble_side_by_side_rows",
            "0 or more (0: always), or null (never)",
            self.ensemble_side_by_side_rows,
        )
        if (self.ensemble_size or 1) > 1 and self.combiner == "transformer":
            raise UserError(
                "model.ensemble_size>1 shares the concat or residual combiner's MLP among its "
                "members; set model.combiner=concat or model.ensemble_size=1"
            )

    @staticmethod
    def trees_fit(outputs) -> bool:
        """Trees (model.family gbm, ensemble) predict one binary, category or number output."""
        return len(outputs) == 1 and outputs[0].type in TREE_OUTPUT_TYPES

    def pick_family(self) -> tuple[str, str]:
        """model.family, or its auto pick for these outputs, and why (docs/accuracy.md): the
        ensemble at every size where trees fit, its members weighted on validation."""
        if self.family != "auto":
            return self.family, "model.family"
        outputs = self.output_features or []
        if not self.trees_fit(outputs):
            kinds = ", ".join(f"{f.name} ({f.type})" for f in outputs)
            return "network", f"trees predict one binary, category or number output, not {kinds}"
        return "ensemble", (
            "the network and the trees on the same splits, weighted on validation, so the "
            "model is at least the better of the two there (the weights below)"
        )

    def class_weights_of(self, labels: list, shares: list[float] | None) -> list[float] | None:
        """Each class's weight in the loss (labels' order), from the training split's class
        shares; None: every class weighs the same."""
        weights = self.class_weights
        if isinstance(weights, Mapping):
            known = {str(label): float(w) for label, w in weights.items()}
            return [known.get(str(label), 1.0) for label in labels]
        if weights == "none" or not shares:
            return None
        if weights == "auto" and not rare(shares):
            return None
        return [1.0 / (len(shares) * max(share, 1e-12)) for share in shares]

    def threshold_of(self, positive_share: float) -> float | str:
        """A binary output's decision threshold, or "validation" where the auto rule picks it
        there (the positive class is rare)."""
        if self.decision_threshold != "auto":
            return float(self.decision_threshold)
        return "validation" if positive_share < RARE_CLASS_RATIO / 2 else 0.5

    def network_members(self, train_rows: int | None) -> tuple[int, str, bool] | None:
        """The network's members, why, and whether the saved config should say the number
        (model.ensemble_size), where the family has a network; None where it has none.
        The ensemble family's network is one: the trees bring the diversity, and members
        would double its cost."""
        if self.ensemble_size is not None or self.family not in ("network", "ensemble"):
            return None
        if self.family == "ensemble":
            return 1, "in the ensemble family, the trees stand in for the network's members", True
        return (*self.ensemble_members(train_rows), False)

    def ensemble_members(self, train_rows: int | None) -> tuple[int, str]:
        """The ensemble's members and why: model.ensemble_size, or its auto pick for a training
        split of `train_rows` rows."""
        if self.ensemble_size is not None:
            return self.ensemble_size, "model.ensemble_size"
        if self.combiner == "transformer":
            return 1, "the transformer combiner has no shared MLP to ensemble"
        if train_rows is not None and train_rows <= self.ensemble_max_rows:
            return ENSEMBLE_AUTO, (
                f"{train_rows:,} training rows, at most model.ensemble_max_rows="
                f"{self.ensemble_max_rows:,}"
            )
        return 1, (
            f"{train_rows:,} training rows, more than model.ensemble_max_rows="
            f"{self.ensemble_max_rows:,}: the members' cost would grow with the rows"
            if train_rows is not None
            else "the training split's size is unknown"
        )

    @property
    def number_encoding(self) -> str:
        """The number encoder in use: `auto` made concrete."""
        if self.number_encoder == "auto":
            return "none" if self.combiner == "transformer" else "piecewise"
        return self.number_encoder

    def embedding_of(self, name: str, category: bool = False) -> int:
        """The embedding width of input `name`: its own embedding_size, else the model's."""
        for feature in self.input_features or ():
            if feature.name == name and feature.embedding_size:
                return int(feature.embedding_size)
        if category and self.category_embedding_size is not None:
            return self.category_embedding_size
        return self.embedding_size
