"""The model families (model.family) by name: one entry each; a new family is one module and a
line here."""

from __future__ import annotations

from runner.model.base import Family
from runner.model.ensemble import EnsembleFamily
from runner.model.gbm import GBMFamily
from runner.model.network import NetworkFamily


def family(name: str) -> Family:
    """The family of model.family=`name` (runner.config.MODEL_FAMILIES)."""
    return FAMILIES[name]


FAMILIES: dict[str, Family] = {
    f.name: f for f in (NetworkFamily(), GBMFamily(), EnsembleFamily(family))
}
