"""Hydra-configured experiment runner for neural models on tabular data."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy: `import runner.x` must not pay for torch; `from runner import Predictor` (or train)
    # does.
    if name == "Predictor":
        from runner.scoring.predictor import Predictor

        return Predictor
    if name == "train":
        from runner.api import train

        return train
    if name == "UserError":  # what train() and Predictor raise for bad input
        from runner.errors import UserError

        return UserError
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
