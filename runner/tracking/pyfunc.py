"""A trained model in MLflow's format: an mlflow.pyfunc model that wraps the Predictor, so
`mlflow.pyfunc.load_model(uri).predict(frame)` and `mlflow models serve` answer what
`Predictor.predict` answers. The runner's own code travels with it (code_paths)."""

from __future__ import annotations

import warnings
from pathlib import Path

import mlflow.pyfunc
from mlflow.pyfunc import PythonModel

with warnings.catch_warnings():  # MLflow advises type hints at class creation: not needed here
    warnings.simplefilter("ignore")

    class PredictorModel(PythonModel):
        def load_context(self, context) -> None:
            from runner.scoring.predictor import Predictor

            self.predictor = Predictor.load(context.artifacts["model_dir"])

        def predict(self, context, model_input, params=None):
            import pandas as pd

            frame = (
                model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
            )
            return self.predictor.predict(frame)


def _requirements() -> list[str]:
    from importlib.metadata import version

    return [
        f"{name}=={version(name)}" for name in ("torch", "pandas", "pyarrow", "numpy", "mlflow")
    ]


def warm_up() -> None:
    """What the first save_model spends most of its time on (0.3 s of its 0.33 s, py-spy):
    MLflow checks the pinned requirements against the installed packages through a map of every
    installed distribution's modules, built on first use. Building it here, while the run
    trains, takes it off the path between the trained model and its figures."""
    from mlflow.utils.requirements_utils import warn_dependency_requirement_mismatches

    warn_dependency_requirement_mismatches(_requirements())


def save_pyfunc(model_dir: Path, path: Path) -> None:
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # not in run logs
    with warnings.catch_warnings():  # type hints and cloudpickle: advice, not problems here
        warnings.simplefilter("ignore")
        _save(model_dir, path)


def _save(model_dir: Path, path: Path) -> None:
    mlflow.pyfunc.save_model(
        path=str(path),
        python_model=PredictorModel(),
        artifacts={"model_dir": str(model_dir)},
        code_paths=[str(Path(__file__).resolve().parents[1])],  # the runner package
        pip_requirements=_requirements(),
    )
