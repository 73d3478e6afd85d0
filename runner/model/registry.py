"""The model families (model.family) by name: one entry each for the built-in ones; a family of
one's own is a module with a `FAMILY` (model.family=<module>, its name the module's)."""

from __future__ import annotations

import importlib

from runner.errors import UserError
from runner.model.base import Family
from runner.model.catboost import CatBoostFamily
from runner.model.ensemble import BaggedFamily, EnsembleFamily
from runner.model.gbm import GBMFamily
from runner.model.network import NetworkFamily
from runner.overrides import closest_choice

# A model saved before model.family existed is a network.
LEGACY_FAMILY = NetworkFamily.name


def family(name: str) -> Family:
    """The family of model.family=`name`: a built-in one, else the `FAMILY` of the module
    `name` (imported once)."""
    found = FAMILIES.get(name)
    if found is None:
        found = FAMILIES[name] = _module_family(name)
    return found


def _module_family(name: str) -> Family:
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        hint = closest_choice("model.family", name, list(BUILT_IN))
        raise UserError(
            f"model.family={name} is neither a built-in family nor a module that imports "
            f"({error}); {hint}use one of {', '.join(BUILT_IN)} or a module with a FAMILY"
        ) from None
    found = getattr(module, "FAMILY", None)
    if found is None or getattr(found, "name", None) != name or not hasattr(found, "fit"):
        raise UserError(
            f"model.family={name}: the module needs FAMILY, a family named {name!r} with fit, "
            "save and load (docs/configuration.md: a model family of your own)"
        )
    return found


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        NetworkFamily(),
        GBMFamily(),
        EnsembleFamily(family),
        CatBoostFamily(),
        BaggedFamily(family),
    )
}
BUILT_IN = tuple(FAMILIES)
