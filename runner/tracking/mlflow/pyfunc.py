"""A trained model in MLflow's format: an mlflow.pyfunc model that wraps the Predictor, so
`mlflow.pyfunc.load_model(uri).predict(frame)` and `mlflow models serve` answer what
`Predictor.predict` answers. The runner's own code travels with it (code_paths)."""

from __future__ import annotations

import warnings
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
from mlflow.pyfunc import PythonModel


class PredictorModel(PythonModel):
    def load_context(self, context) -> None:
        from runner.scoring.predictor import Predictor

        self.predictor = Predictor.load(context.artifacts["model_dir"])

    # The DataFrame hint is one MLflow takes as "no schema to infer": without a hint, MLflow
    # warns at class creation, and its own "once" filter overrides any filter of ours.
    def predict(self, context, model_input: pd.DataFrame, params=None):
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        return self.predictor.predict(frame)


def _requirements(model_dir: Path) -> list[str]:
    """The packages the model scores with, pinned as installed (its family's besides the
    runner's: LightGBM where it has trees)."""
    from importlib.metadata import version

    from omegaconf import OmegaConf

    from runner.model.registry import LEGACY_FAMILY, family

    names = ["torch", "pandas", "pyarrow", "numpy", "mlflow"]
    name = OmegaConf.load(model_dir / "config.yaml").model.get("family", LEGACY_FAMILY)
    names += [p for p in family(name).packages if p not in names]
    return [f"{name}=={version(name)}" for name in names]


def save_pyfunc(model_dir: Path, path: Path) -> None:
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # not in run logs
    with warnings.catch_warnings():  # type hints and cloudpickle: advice, not problems here
        warnings.simplefilter("ignore")
        _save(model_dir, path)


def _save(model_dir: Path, path: Path) -> None:
    import mlflow.utils.environment as environment

    # MLflow checks the pinned requirements against the installed packages, through a map of
    # every installed distribution's modules built on first use (0.45 CPU-s of the logging
    # process's 2.9, on a run that keeps both cores busy). Ours are the installed versions by
    # construction (_requirements), so the check cannot find a mismatch: skipped. The name is
    # looked up, not guarded: should MLflow rename it, log_model fails in the tests.
    check = environment.warn_dependency_requirement_mismatches
    environment.warn_dependency_requirement_mismatches = _nothing_to_check
    try:
        mlflow.pyfunc.save_model(
            path=str(path),
            python_model=PredictorModel(),
            artifacts={"model_dir": str(model_dir)},
            code_paths=[str(Path(__file__).resolve().parents[1])],  # the runner package
            pip_requirements=_requirements(Path(model_dir)),
        )
    finally:
        environment.warn_dependency_requirement_mismatches = check


def _nothing_to_check(model_requirements: list[str]) -> None:
    return None
