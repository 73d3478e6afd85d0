"""What every schema shares: OmegaConf's markers and the one-line checks of a value."""

from __future__ import annotations

from typing import Any, TypeVar, cast

from runner.errors import UserError
from runner.overrides import closest_choice

T = TypeVar("T")


# OmegaConf's markers, spelt out: a training worker unpickles these dataclasses without
# importing OmegaConf or Hydra (0.25 s of a fresh Ray actor's start); tests/test_config.py
# checks that they equal omegaconf.MISSING and omegaconf.II.
MISSING = "???"


def II(interpolation: str) -> Any:
    """A field default that interpolates another key (omegaconf.II)."""
    return "${" + interpolation + "}"


def _require(ok: bool, key: str, rule: str, value) -> None:
    if not ok:
        raise UserError(f"{key}={value} is out of range: it must be {rule}")


def _one_of(value, allowed: tuple, key: str) -> None:
    if value not in allowed:
        names = [str(a) for a in allowed]
        hint = closest_choice(key, str(value), names)
        raise UserError(f"{key}={value} is unknown; {hint}use one of: {', '.join(names)}")


def _resources(given, key: str) -> dict[str, float]:
    """A Ray resource mapping ({CPU: 1, GPU: 1, custom: 2}); null means {CPU: 1}."""
    given = given or {"CPU": 1.0}
    if not isinstance(given, dict) or not all(isinstance(v, int | float) for v in given.values()):
        raise UserError(
            f"{key}={given} must map resource names to amounts, e.g. {{CPU: 1, GPU: 1}}"
        )
    resources = {str(k): float(v) for k, v in given.items()}
    for resource, amount in resources.items():
        _require(amount >= 0, f"{key}.{resource}", "0 or more", amount)
    return resources


def component_settings(keys: dict, schema: type[T]) -> T:
    """A component's keys, as hydra's instantiate passes them, as its typed settings (nested
    ones arrive as dicts or dataclasses; types are checked again)."""
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.structured(schema), keys)
    return cast(T, OmegaConf.to_object(merged))
