"""Feature types by name. A new type is a module of its own plus one line here."""

from __future__ import annotations

from typing import Any

from runner.errors import UserError
from runner.processing.features.base import Feature
from runner.processing.features.binary import BinaryFeature
from runner.processing.features.category import CategoryFeature
from runner.processing.features.date import DateFeature
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


def build_feature(cfg: dict, role: str) -> Feature:
    name = cfg.get("name")
    kind: Any = cfg.get("type")  # whatever the config holds; checked below
    if not name:
        raise UserError(f"an {role} feature has no name; every feature needs name and type")
    cls = FEATURE_TYPES.get(kind)
    allowed = sorted(t for t, c in FEATURE_TYPES.items() if role == "input" or c.output_allowed)
    if cls is None or kind not in allowed:
        raise UserError(
            f"{role} feature '{name}' has unknown type '{kind}'; known {role} types: {', '.join(allowed)}"
        )
    return cls(cfg, role)
