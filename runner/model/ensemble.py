"""model.family=ensemble: the network and the trees, their predictions averaged with weights
fitted on the validation split by greedy ensemble selection (Caruana et al., 2004: repeatedly
add, with replacement, the member whose addition most lowers the validation loss; the weights
are the counts). Averaged are probabilities (binary, category) or the normalized number; the
result goes back into logits, so scoring decodes it as any model's."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from runner.errors import UserError
from runner.model.layout import Layout, OutputSpec

WEIGHTS_FILE = "ensemble.json"
MEMBERS_DIR = "members"
SELECTION_ROUNDS = 25


def select_weights(
    spec: OutputSpec, members: dict[str, np.ndarray], target: np.ndarray
) -> tuple[dict[str, float], list[dict]]:
    """Caruana's greedy selection with replacement over the members' validation predictions
    (in averaging space), kept at the round of the lowest loss (its first round is the best
    single member, so the ensemble is never worse than that on validation); returns the
    weights and each round's pick and loss."""
    names = list(members)
    total = None
    rounds: list[dict] = []
    for step in range(1, SELECTION_ROUNDS + 1):
        scored = {
            n: spec.head.selection_loss(
                (members[n] if total is None else total + members[n]) / step, target
            )
            for n in names
        }
        best = min(names, key=lambda n: (scored[n], names.index(n)))
        total = members[best] if total is None else total + members[best]
        rounds.append({"round": step, "added": best, "validation_loss": scored[best]})
    kept = min(rounds, key=lambda r: (r["validation_loss"], r["round"]))["round"]
    picks = [r["added"] for r in rounds[:kept]]
    return {n: picks.count(n) / kept for n in names}, rounds


def weighted_logits(
    spec: OutputSpec, weights: dict[str, float], spaces: dict[str, np.ndarray]
) -> np.ndarray:
    """One output's logits from predictions in averaging space, averaged with `weights`
    (those with weight 0 may be left out of `spaces`)."""
    averaged = sum(weights[n] * space for n, space in spaces.items() if weights[n] > 0)
    return spec.head.to_logits(np.asarray(averaged)).astype(np.float32)


class EnsembleModel:
    """Members behind the ScoringModel seam, combined with fixed weights. `families`: each
    member's family by its name where the name is not the family's (a bagged portfolio's
    fold models: gbm-1, gbm-2, ...)."""

    def __init__(
        self,
        members: dict,
        weights: dict[str, float],
        layout: Layout,
        families: dict[str, str] | None = None,
    ):
        self.members, self.weights, self.layout = members, weights, layout
        self.families = {name: (families or {}).get(name, name) for name in members}

    @property
    def training(self) -> bool:
        return any(getattr(m, "training", False) for m in self.members.values())

    def eval(self):
        for member in self.members.values():
            member.eval()
        return self

    @contextmanager
    def against_reference(self):
        """Its members' (runner.model.base.against_reference)."""
        from runner.model.base import against_reference

        with ExitStack() as stack:
            for member in self.members.values():
                stack.enter_context(against_reference(member))
            yield

    def __call__(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        outputs = {name: m(inputs) for name, m in self.members.items() if self.weights[name] > 0}
        combined = {}
        for spec in self.layout.outputs:
            spaces = {
                n: spec.head.to_space(out[spec.name].float().numpy()) for n, out in outputs.items()
            }
            combined[spec.name] = torch.from_numpy(self.logits_from(spec, spaces))
        return combined

    def logits_from(self, spec: OutputSpec, spaces: dict[str, np.ndarray]) -> np.ndarray:
        """The ensemble's logits of one output from its members' predictions in averaging
        space (those with weight 0 may be left out)."""
        return weighted_logits(spec, self.weights, spaces)


class EnsembleFamily:
    """Its members' families come from `family` (the registry's lookup, handed in: the
    registry lists this family too)."""

    name = "ensemble"
    files: tuple[str, ...] = (WEIGHTS_FILE,)
    export_formats: tuple[str, ...] = ("members", "onnx")  # members: each in its own format
    explain_method = "members"  # each member's, weighted (runner.scoring.explain)
    packages: tuple[str, ...] = ("lightgbm",)  # its trees'

    def __init__(self, family: Callable[[str], Any]):
        self.family = family

    def onnx_graph(self, model, layout: Layout):
        """One graph: the members' graphs and their weighted average."""
        from runner.model.onnx_graph import ensemble_graph  # onnx: export only

        members = {}
        for name, member in model.members.items():
            if model.weights[name] <= 0:
                continue
            member_family = self.family(model.families[name])
            if not hasattr(member_family, "onnx_graph"):
                raise UserError(
                    f"export.format=onnx: the member {name} ({member_family.name}) has no ONNX "
                    "export; use export.format=members (each member in its own format)"
                )
            members[name] = member_family.onnx_graph(member, layout)
        return ensemble_graph(members, model.weights, layout)

    def save(self, model, directory: Path) -> None:
        for name, member in model.members.items():
            (directory / MEMBERS_DIR / name).mkdir(parents=True)
            self.family(model.families[name]).save(member, directory / MEMBERS_DIR / name)
        saved = {"weights": model.weights, "families": model.families}
        (directory / WEIGHTS_FILE).write_text(json.dumps(saved, indent=2))

    def load(self, directory: Path, layout: Layout, settings) -> EnsembleModel:
        saved = json.loads((directory / WEIGHTS_FILE).read_text())
        weights, families = saved["weights"], saved.get("families", {})
        members = {
            name: self.family(families.get(name, name)).load(
                directory / MEMBERS_DIR / name, layout, settings
            )
            for name in weights
        }
        return EnsembleModel(members, weights, layout, families)


class BaggedFamily(EnsembleFamily):
    """model.family=bagged: a portfolio of families, each trained on k folds
    (runner/training/bagged_fit.py), saved as an ensemble of its fold models, each weighted
    by its family's ensemble weight over k (averaging the folds, then the families, is one
    weighted average)."""

    name = "bagged"
    packages: tuple[str, ...] = ("lightgbm", "catboost")
