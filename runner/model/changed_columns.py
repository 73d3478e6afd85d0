"""Scoring rows that differ from a reference in a few columns through the trees that split on
those columns only.

Permutation importance scores the same rows once per input shuffled. A booster's raw score is
the sum of its trees' leaves, and a tree that never splits on the shuffled columns gives each
row the leaf it gave it before. So the shuffled rows' scores are the reference's, less what the
trees that split on those columns gave the reference, plus what they give the shuffled rows:
the same sum in another order (equal to float64 rounding), for the cost of those trees alone.
Those trees are a booster of their own, made from the model's text: the boosting rounds with
a tree that splits on the columns, each round's other trees (a multiclass model grows one per
class, in class order) one-leaf trees of value 0, so that every tree keeps its class.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

_SPLIT_FEATURE = re.compile(r"^split_feature=(.*)$", re.MULTILINE)
_PER_ROUND = re.compile(r"^num_tree_per_iteration=(\d+)$", re.MULTILINE)
_ZERO_TREE = (
    "num_leaves=1\nnum_cat=0\nsplit_feature=\nsplit_gain=\nthreshold=\ndecision_type=\n"
    "left_child=\nright_child=\nleaf_value=0\nleaf_weight=\nleaf_count=0\ninternal_value=\n"
    "internal_weight=\ninternal_count=\nis_linear=0\nshrinkage=1"
)
# Above this share of the trees, scoring the reference and the new rows through them costs
# more than scoring the new rows through every tree (a reference's part is scored once, then
# kept for the repeats that shuffle the same columns).
MOST_TREES = 0.6


class ChangedColumns:
    """The raw scores of matrices with the reference's rows (the first one scored), through
    the trees that split on the columns where they differ from it. `predict(booster, matrix,
    num_iteration)`: the booster's raw scores at that iteration (None: every tree it has)."""

    def __init__(self, booster, best: int | None, predict: Callable):
        from runner.fast_start import import_lightgbm

        self._lightgbm = import_lightgbm()
        self.booster, self.best, self.predict = booster, best, predict
        text = booster.model_to_string(num_iteration=best)
        head, _, rest = text.partition("\nTree=")
        trees, _, self.tail = f"Tree={rest}".partition("\nend of trees")
        # tree_sizes lists each tree's length in characters, for parsing them in parallel;
        # a booster without it parses them one by one.
        self.head = "\n".join(
            line for line in head.split("\n") if not line.startswith("tree_sizes=")
        )
        self.trees = trees.strip("\n").split("\n\n\n") if rest else []
        per_round = _PER_ROUND.search(head)
        self.per_round = int(per_round.group(1)) if per_round else 1
        self.splits_on = [
            {int(f) for f in found.group(1).split()}
            if (found := _SPLIT_FEATURE.search(tree))
            # A tree we cannot read is taken to split on every column.
            else set(range(booster.num_feature()))
            for tree in self.trees
        ]
        self.matrix: np.ndarray | None = None
        self.scores: np.ndarray | None = None
        self.parts: dict[frozenset, tuple | None] = {}  # columns -> (their trees, reference's)

    def scores_of(self, matrix: np.ndarray) -> np.ndarray:
        if self.matrix is None or self.scores is None:
            self.matrix, self.scores = matrix, self.predict(self.booster, matrix, self.best)
            return self.scores
        if matrix.shape != self.matrix.shape:
            return self.predict(self.booster, matrix, self.best)
        same = (matrix == self.matrix) | (np.isnan(matrix) & np.isnan(self.matrix))
        changed = frozenset(np.flatnonzero(~same.all(axis=0)).tolist())
        if changed not in self.parts:
            self.parts[changed] = self._part(changed)
        part = self.parts[changed]
        if part is None:
            return self.predict(self.booster, matrix, self.best)
        trees, before = part
        if trees is None:  # no tree splits on them
            return self.scores
        return self.scores - before + self.predict(trees, matrix, None)

    def _part(self, columns: frozenset) -> tuple | None:
        """(the booster of the trees that split on `columns`, its scores of the reference);
        (None, 0) where no tree does; None where they are most of the trees."""
        assert self.matrix is not None
        k = self.per_round
        kept = [bool(used & columns) for used in self.splits_on]
        rounds = [r for r in range(0, len(kept), k) if any(kept[r : r + k])]
        if not rounds:
            return None, 0.0
        if len(rounds) > MOST_TREES * len(kept) / k:
            return None
        trees: list[str] = []
        for r in rounds:
            for i in range(r, r + k):
                body = self.trees[i].split("\n", 1)[1] if kept[i] else _ZERO_TREE
                trees.append(f"Tree={len(trees)}\n{body}")
        text = f"{self.head}\n\n" + "\n\n\n".join(trees) + f"\n\n\nend of trees{self.tail}"
        booster = self._lightgbm.Booster(model_str=text)
        return booster, self.predict(booster, self.matrix, None)
