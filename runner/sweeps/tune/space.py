"""Hydra's sweep overrides as Tune's search space."""

from __future__ import annotations

from dataclasses import dataclass

from runner.errors import UserError


@dataclass
class SearchSpace:
    fixed: list[str]  # overrides every trial gets
    space: dict  # safe id -> Tune domain (or grid_search)
    keys: dict  # safe id -> config key

    def overrides(self, params: dict) -> list[str]:
        return self.fixed + [f"{self.keys[k]}={params[k]}" for k in sorted(params)]


def search_space(arguments: list[str], params: dict, search: str) -> SearchSpace:
    """Hydra's sweep overrides -> Tune's space. Values of choices and ranges stay Hydra's
    own strings (so `model.hidden_size=64` reaches the trial as typed); intervals sample
    numbers (log-uniform when tagged log; integers when both ends are)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep, Transformer
    from ray import tune

    given = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    fixed: list[str] = []
    space: dict = {}
    keys: dict[str, str] = {}
    for override in OverridesParser.create().parse_overrides(given):
        key = override.get_key_element()
        if not override.is_sweep_override():
            fixed.append(f"{key}={override.get_value_element_as_str()}")
            continue
        safe = f"p{len(keys)}"
        keys[safe] = key
        if override.is_interval_sweep():
            if search == "grid":
                raise UserError(
                    f"{key}: an interval has no grid; give a list or range(...) with "
                    "hydra.sweeper.search=grid, or use search=random"
                )
            value = override.value()
            assert isinstance(value, IntervalSweep)  # is_interval_sweep()
            low, high = value.start, value.end
            assert low is not None and high is not None  # interval(low, high) gives both
            log_scale = "log" in value.tags
            if isinstance(low, int) and isinstance(high, int):
                space[safe] = (
                    tune.lograndint(low, high + 1) if log_scale else tune.randint(low, high + 1)
                )
            else:
                space[safe] = tune.loguniform(low, high) if log_scale else tune.uniform(low, high)
        else:  # a comma list, choice(...) or range(...): a finite set of values
            values = list(override.sweep_iterator(transformer=Transformer.encode))
            space[safe] = tune.grid_search(values) if search == "grid" else tune.choice(values)
    if not space:
        raise UserError(
            "hydra/sweeper=tune found nothing to sweep; give e.g. trainer.learning_rate="
            "'tag(log, interval(0.0003, 0.03))' or model.hidden_size=32,64 (or hydra.sweeper.params)"
        )
    return SearchSpace(fixed, space, keys)


def scheduled_metric(objective: str) -> str:
    """The per-epoch metric the scheduler compares: the objective itself for train/val; a
    test objective is only known at the end, so epochs are compared on its val twin."""
    split, _, name = objective.partition("/")
    return f"val/{name}" if split == "test" else objective
