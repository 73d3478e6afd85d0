"""Each feature type's model side by type name (see base): the batch columns it fills as an
input and, where it can be an output, its head. A built-in type is a module here plus one line
in MODEL_SIDES, beside its feature module and its line in the features' registry; a type of
your own is one module of yours (see plugin_module)."""

from __future__ import annotations

from functools import cache
from importlib import import_module
from types import ModuleType

from runner.errors import UserError
from runner.processing.features.model_side.base import ModelSide
from runner.processing.features.model_side.binary import BinarySide
from runner.processing.features.model_side.category import CategorySide
from runner.processing.features.model_side.date import DateSide
from runner.processing.features.model_side.number import NumberSide
from runner.processing.features.model_side.sets import SetSide
from runner.processing.features.model_side.text import TextSide
from runner.processing.features.model_side.vector import VectorSide

MODEL_SIDES: dict[str, ModelSide] = {
    side.type_name: side
    for side in (
        NumberSide(),
        CategorySide(),
        BinarySide(),
        TextSide(),
        SetSide(),
        DateSide(),
        VectorSide(),
    )
}


def model_side(type_name: str) -> ModelSide:
    side = MODEL_SIDES.get(type_name)
    return side if side is not None else plugin_module(type_name).MODEL_SIDE


def plugin_module(type_name: str) -> ModuleType:
    """A feature type of your own: `type: <module>`, an importable module (on PYTHONPATH in
    every process that preprocesses, trains or scores) defining FEATURE (a Feature subclass:
    fitting and transforming) and MODEL_SIDE (a ModelSide: its batch columns and, as an output,
    its head), each with type_name = the module's name. The saved model names the module, so
    every scorer imports it the same way."""
    module, why, _ = find_plugin(type_name)
    if module is None:
        raise UserError(f"feature type '{type_name}' is not built in and {why}")
    return module


@cache
def find_plugin(type_name: str) -> tuple[ModuleType | None, str, bool]:
    """(the module, "", True), or (None, why it is no feature type of your own, whether a
    module of that name imported)."""
    if not all(part.isidentifier() for part in type_name.split(".")):
        return None, "cannot name a module", False
    try:
        module = import_module(type_name)
    except ImportError as error:
        return None, f"no module of that name imports ({error}; is it on PYTHONPATH?)", False
    names = {getattr(getattr(module, part, None), "type_name", None) for part in PLUGIN_PARTS}
    if names != {type_name}:
        return (
            None,
            f"the module '{type_name}' defines no feature type (FEATURE and MODEL_SIDE, each "
            f"with type_name '{type_name}')",
            True,
        )
    return module, "", True


PLUGIN_PARTS = ("FEATURE", "MODEL_SIDE")


__all__ = ["MODEL_SIDES", "ModelSide", "model_side"]
