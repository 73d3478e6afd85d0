"""run.py's commands, in one table: what each does and what it needs. The config checks a
command's name against it, `--help` lists it (the help's text is here too), and
runner.commands runs `command_<name>`. Light on purpose: the config imports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    summary: str  # one line for --help
    trains: bool = False  # a trainer's need for Ray is certain: it may start early
    reads_features: bool = (
        False  # features from the config (model=auto infers them); else a saved model's
    )
    writes_results: bool = False  # metrics, figures, report.html and the tracker's run


COMMANDS: dict[str, Command] = {
    "experiment": Command(
        "preprocess, train, and score the test split (the default)",
        trains=True,
        reads_features=True,
        writes_results=True,
    ),
    "preprocess": Command("read, split and process the table into the cache", reads_features=True),
    "train": Command(
        "train on the cached splits, scored on validation",
        trains=True,
        reads_features=True,
        writes_results=True,
    ),
    "evaluate": Command("score a saved model (model_dir=...) on a table", writes_results=True),
    "predict": Command("a saved model's predictions for a table (predictions.parquet)"),
    "explain": Command(
        "why a saved model predicts what it does, per row and input (explanations.parquet)",
        writes_results=True,
    ),
    "serve": Command("a saved model behind HTTP (POST /predict)"),
    "export": Command("a saved model in a format loaded without this package"),
    "init": Command(
        "show and write the features inferred from a table, without training", reads_features=True
    ),
}


def commands_where(flag: str) -> tuple[str, ...]:
    """The names of the commands whose `flag` is set, in the table's order."""
    return tuple(name for name, command in COMMANDS.items() if getattr(command, flag))


def help_lines() -> str:
    """The commands as --help lists them, one per line."""
    width = max(len(name) for name in COMMANDS)
    return "\n".join(f"  command={name:<{width}}  {c.summary}" for name, c in COMMANDS.items())


# Hydra's help template: $APP_CONFIG_GROUPS is Hydra's list of the groups and their options.
_HELP = """run.py trains a model on a table and writes its metrics, plots, report.html and a model
that predicts and serves. Column types are inferred; one override moves the run onto Ray.

  python run.py                                        the default experiment (a built-in table)
  python run.py dataset.path=t.csv dataset.target=y    your table: CSV, Parquet, JSON, ...; s3://
  python run.py ... model=gbm                          gradient-boosted trees (model=ensemble: both)
  python run.py ... preset=best time_limit=600         a bagged portfolio: the best 10 minutes buy
  python run.py ... backend=ray trainer.num_workers=4  preprocess and train on a Ray cluster
  python run.py --multirun hydra/sweeper=tune trainer.learning_rate=0.001,0.01   a sweep

== Commands ==
{commands}

== Config groups (group=option) ==
$APP_CONFIG_GROUPS

Every setting with its value: python run.py --cfg job [overrides]; what each means:
docs/configuration.md. Hydra's own flags: python run.py --hydra-help
"""


def help_template() -> str:
    return _HELP.format(commands=help_lines())
