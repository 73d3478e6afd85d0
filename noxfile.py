"""Sessions: tests, lint. They run in the project's .venv (made by ./setup.sh),
so they reuse its installed stack instead of building a new one each time."""

import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "none"


@nox.session
def tests(session: nox.Session) -> None:
    session.run(sys.executable, "-m", "pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.run(sys.executable, "-m", "ruff", "check", "run.py", "runner", "tests", "noxfile.py")


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmark suite: figures in bench-results/figures.{json,md} (takes minutes)."""
    session.run(sys.executable, str(Path(__file__).parent / "bench" / "suite.py"), *session.posargs)
