"""Hydra's composition errors about a command-line override, said as one line that names the
problem and the fix: a misspelt key (Hydra advises `+key=value`, which would add a key the run
then rejects), a value of the wrong type, a bare comma list."""

from __future__ import annotations

import difflib
import re

_MERGING = re.compile(r"^Error merging override (?P<line>.+)$")
_APPEND = re.compile(r"To append to your config use \+(?P<line>.+)$", re.MULTILINE)
_AMBIGUOUS = re.compile(r"^Ambiguous value for argument '(?P<line>[^']+)'")
_TYPES = {"Integer": "a whole number", "Float": "a number"}
# A model config from before the schemas left the groups names `- model_schema` in its defaults.
_OLD_SCHEMA = re.compile(r"^In '(?P<config>[^']+)': Could not load 'model/model_schema'")
# Config keys that users typed and that are gone, each kept working one release: the old key,
# the override that replaces it (the same value).
RENAMED = {"trainer.strategy": "trainer"}


def replace_renamed(args: list[str]) -> list[str]:
    """The overrides with every renamed key in its new form, each said once as a `warning:`."""
    import sys

    replaced = []
    for arg in args:
        key, equals, value = arg.partition("=")
        new = RENAMED.get(key)
        if new and equals:
            print(
                f"warning: {key}={value} is deprecated and goes in the next release; "
                f"write {new}={value}",
                file=sys.stderr,
            )
            arg = f"{new}={value}"
        replaced.append(arg)
    return replaced


def say_override_errors_in_one_line() -> None:
    """For run.py: Hydra reports what fails inside its main (composing the config included)
    through hydra._internal.utils.run_and_report, which prints its own message and exits 1.
    Wrapped, an override's problem is the one `error:` line and exit 2, as every bad input
    is; anything else goes to Hydra as before (listed in runner/compat.py)."""
    import sys

    from hydra._internal import utils

    report = getattr(utils, "run_and_report", None)
    if report is None or getattr(report, "says_overrides", False):
        return

    def run_and_report(func):
        def composed_or_said():
            try:
                return func()
            except Exception as error:
                problem = override_problem(error)
                if problem is None:
                    raise
                print(f"error: {problem}", file=sys.stderr)
                sys.exit(2)

        return report(composed_or_said)

    run_and_report.says_overrides = True  # type: ignore[attr-defined]
    utils.run_and_report = run_and_report


def override_problem(error: BaseException) -> str | None:
    """The one line for a ConfigCompositionException caused by an override; None for any other
    error (Hydra's own message stands)."""
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    if not isinstance(error, ConfigCompositionException):
        return None
    message, cause = str(error), error.__cause__
    old_schema = _OLD_SCHEMA.match(message)
    if old_schema:
        return (
            f"{old_schema['config']}.yaml names `- model_schema` in its defaults, an old form: "
            "write `- /model_schema@_here_` instead (what command=init writes)"
        )
    ambiguous = _AMBIGUOUS.match(message)
    if ambiguous:
        key, _, value = ambiguous["line"].partition("=")
        return (
            f"{key}={value} is ambiguous: write {key}=[{value}] for a list, or add --multirun to "
            "sweep over the values"
        )
    given = _MERGING.match(message) or _APPEND.search(message)
    line = given["line"] if given else None
    if isinstance(cause, ConfigAttributeError | ConfigKeyError) and line is not None:
        return _unknown_key(line, cause)
    if isinstance(cause, ValidationError) and line is not None:
        return _bad_value(line, cause)
    return None


def _unknown_key(line: str, cause) -> str:
    node = getattr(cause, "parent_node", None)
    known = sorted(str(k) for k in node.keys()) if node is not None else []
    return unknown_key_line(line.partition("=")[0].lstrip("+~"), known)


def closest_choice(key: str, value: str, choices: list[str], cutoff: float = 0.6) -> str:
    """ "did you mean key=<the closest of choices>? " when one is close enough, else ""."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=cutoff)
    return f"did you mean {key}={close[0]}? " if close else ""


def unknown_key_line(key: str, known: list[str]) -> str:
    """`key` is not a config key: the closest of `known` (its parent's keys), else all of them."""
    parent, _, name = key.rpartition(".")
    known = [k for k in known if k != "_target_"]
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        hint = f"did you mean {parent + '.' if parent else ''}{close[0]}?"
    else:
        hint = f"known keys{' of ' + parent if parent else ''}: {', '.join(known)}"
    return f"{key} is not a config key; {hint}"


def _bad_value(line: str, cause) -> str:
    key, _, value = line.partition("=")
    text = str(getattr(cause, "msg", "") or cause)
    if "is not a ListConfig" in text:
        return f"{key}={value}: {key} takes a list; write {key}=[{value}]"
    converted = re.search(r"could not be converted to (\w+)", text)
    if converted:
        kind = _TYPES.get(converted[1], converted[1].lower())
        return f"{key}={value}: {key} takes {kind}"
    if "is not a valid bool" in text:
        return f"{key}={value}: {key} takes true or false"
    return f"{key}={value}: {text.splitlines()[0]}"
