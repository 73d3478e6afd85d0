"""Feature types by name. A new type is a module of its own plus one line here."""

from __future__ import annotations

from typing import Any

from runner.errors import UserError
from runner.processing.features.base import Feature
from runner.processing.features.binary import BinaryFeature
from runner.processing.features.category import CategoryFeature
from runner.processing.features.date import DateFeature
from runner.processing.features.model_side import find_plugin
from runner.processing.features.number import NumberFeature
from runner.processing.features.sets import SetFeature
from runner.processing.features.text import TextFeature
from runner.processing.features.vector import VectorFeature

FEATURE_TYPES: dict[str, type[Feature]] = {
    cls.type_name: cls
    for cls in (
        NumberFeature,
        CategoryFeature,
        BinaryFeature,
        TextFeature,
        SetFeature,
        DateFeature,
        VectorFeature,
    )
}


def feature_type(kind: str) -> type[Feature] | None:
    """A built-in type by name, or a type of your own by its module (model_side.find_plugin);
    None for a name that is neither."""
    cls = FEATURE_TYPES.get(kind)
    if cls is None and isinstance(kind, str):
        module, _, _ = find_plugin(kind)
        cls = module.FEATURE if module is not None else None
    return cls


def build_feature(cfg: dict, role: str) -> Feature:
    name = cfg.get("name")
    kind: Any = cfg.get("type")  # whatever the config holds; checked below
    if not name:
        raise UserError(f"an {role} feature has no name; every feature needs name and type")
    cls = feature_type(kind)
    if cls is None or (role == "output" and kind in FEATURE_TYPES and not cls.output_allowed):
        allowed = sorted(t for t, c in FEATURE_TYPES.items() if role == "input" or c.output_allowed)
        _, why, imported = (
            find_plugin(kind) if cls is None and isinstance(kind, str) else ("", "", False)
        )
        yours = (
            f" (a type of your own: {why})"
            if imported
            else ", or a module of yours that defines a feature type"
        )
        raise UserError(
            f"{role} feature '{name}' has unknown type '{kind}'; known {role} types: "
            f"{', '.join(allowed)}{yours}"
        )
    if role == "output" and not cls.output_allowed:
        raise UserError(f"{role} feature '{name}': type '{kind}' cannot be an output")
    return cls(cfg, role)
