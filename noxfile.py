"""Sessions: tests, lint. They run in the project's .venv (made by ./setup.sh),
so they reuse its installed stack instead of building a new one each time."""

import sys

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "none"


@nox.session
def tests(session: nox.Session) -> None:
    session.run(sys.executable, "-m", "pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.run(sys.executable, "-m", "ruff", "check", "run.py", "runner", "tests", "noxfile.py")
