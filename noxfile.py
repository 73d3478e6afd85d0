"""Sessions: tests (the full suite, what CI runs), fast (the quick tier for iterating),
lint, typecheck, bench. They run in the project's .venv (made by ./setup.sh), so they reuse its
installed stack instead of building a new one each time."""

import sys
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "none"
PYTHON_DIRS = ["run.py", "runner", "tests", "bench", "scripts", "hydra_plugins", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """Every test: real Ray clusters, Horovod and DDP workers, the S3 server (about 60 minutes on
    2 cores). The bench's every-section smoke run is its own session (bench_smoke): the
    figures' code has the bench, and 16 minutes of the suite were its."""
    session.run(sys.executable, "-m", "pytest", "-q", "-m", "not bench_smoke", *session.posargs)


@nox.session
def bench_smoke(session: nox.Session) -> None:
    """Every bench section at tiny sizes, every figure produced (about 16 minutes on 2 cores):
    run it after changing bench/."""
    session.run(sys.executable, "-m", "pytest", "-q", "-m", "bench_smoke", *session.posargs)


@nox.session
def fast(session: nox.Session) -> None:
    """The quick tier (about 6 minutes on 2 cores): no Ray cluster, no worker processes, nothing
    slow (the end-to-end runs of a CLI command take `slow`: the full suite runs them)."""
    marks = "not slow and not distributed and not needs_root"
    session.run(sys.executable, "-m", "pytest", "-q", "-m", marks, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) on every Python directory; import-linter: layers import downward."""
    session.run(sys.executable, "-m", "ruff", "check", *PYTHON_DIRS)
    session.run(sys.executable, "-m", "ruff", "format", "--check", *PYTHON_DIRS)
    session.run(str(Path(sys.executable).parent / "lint-imports"))


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy on runner/ (settings in pyproject.toml)."""
    session.run(sys.executable, "-m", "mypy", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite: figures in bench-results/figures.{json,md} (takes minutes)."""
    session.run(sys.executable, str(Path(__file__).parent / "bench" / "suite.py"), *session.posargs)


@nox.session
def accuracy(session: nox.Session) -> None:
    """The accuracy suite: real tables, ours vs HistGradientBoosting on the same split
    (bench-results/accuracy.{json,md}; about 8 minutes)."""
    session.run(
        sys.executable, str(Path(__file__).parent / "bench" / "accuracy.py"), *session.posargs
    )


@nox.session
def defaults_sweep(session: nox.Session) -> None:
    """How the training defaults were chosen: a grid over the accuracy suite through the
    project's Tune sweeper, ranked on validation (bench-results/defaults_sweep.{json,md})."""
    session.run(
        sys.executable,
        str(Path(__file__).parent / "bench" / "defaults_sweep.py"),
        *session.posargs,
    )
