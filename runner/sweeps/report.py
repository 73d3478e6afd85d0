"""The sweep report: a table of trials (overrides, objective, wall time, status),
best first, as CSV, Markdown and on stdout; a PNG of the objective per trial and
per swept parameter (TensorBoard's hparams: runner/tracking/tensorboard.py)."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import pandas as pd

from runner.redact import redact
from runner.reports.html import sweep_report
from runner.sweeps.objective import sort_key

log = logging.getLogger(__name__)
TRIAL_FILE = "trial.json"


LEDGER = ".trials.jsonl"


def record_jobs(sweep_dir: Path, jobs: list[dict]) -> list[dict]:
    """Appends this batch's jobs to the sweep's ledger; returns all jobs of the sweep so far.
    Credentials in a trial's overrides (or in its error) are masked from here on: the
    ledger, the reports and MLflow all read them from this."""
    ledger = sweep_dir / LEDGER
    with open(ledger, "a") as handle:
        for job in jobs:
            masked = {**job, "overrides": redact(list(job["overrides"]))}
            masked["error"] = redact(str(job.get("error") or ""))
            handle.write(json.dumps(masked, default=str) + "\n")
    latest = {}
    for line in ledger.read_text().splitlines():
        job = json.loads(line)
        latest[job["num"]] = job
    return [latest[k] for k in sorted(latest)]


def write_trial(job_dir: Path, record: dict) -> None:
    """Atomic: a resumed sweep trusts a trial.json it finds (a killed write leaves none)."""
    partial = job_dir / f".{TRIAL_FILE}.partial"
    partial.write_text(json.dumps(record, indent=2, default=str))
    os.replace(partial, job_dir / TRIAL_FILE)


def _parse(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def collect(sweep_dir: Path, jobs: list[dict]) -> pd.DataFrame:
    """One row per trial: what the trial wrote, else what the launcher knows of it."""
    rows = []
    for job in jobs:
        record = {}
        trial_file = sweep_dir / str(job["num"]) / TRIAL_FILE
        if trial_file.exists():
            record = json.loads(trial_file.read_text())
        overrides = dict(_parse(o) for o in job["overrides"])
        rows.append(
            {
                "trial": job["num"],
                "status": record.get("status", job.get("status", "failed")),
                "objective": record.get("value"),
                "epochs": record.get("epochs", job.get("epochs")),
                "seconds": record.get("seconds", job.get("seconds")),
                "overrides": " ".join(job["overrides"]),
                "error": record.get("error") or job.get("error") or "",
                **{f"param:{k}": v for k, v in overrides.items()},
            }
        )
    return pd.DataFrame(rows)


def write_report(sweep_dir: Path, jobs: list[dict], objective: str, maximize: bool) -> pd.DataFrame:
    table = collect(sweep_dir, jobs)
    if table.empty:
        return table
    table = table.iloc[
        sorted(range(len(table)), key=lambda i: sort_key(table["objective"].iloc[i], maximize))
    ]
    table = table.reset_index(drop=True)
    table.insert(0, "rank", range(1, len(table) + 1))
    table.to_csv(sweep_dir / "sweep_report.csv", index=False)
    shown = table.drop(columns=[c for c in table.columns if c.startswith("param:")])
    markdown = _markdown(shown, objective, maximize)
    (sweep_dir / "sweep_report.md").write_text(markdown)
    _plot(table, objective, sweep_dir / "sweep_report.png")
    sweep_report(sweep_dir, table, objective, maximize)
    print("\n" + markdown)
    return table


def _markdown(table: pd.DataFrame, objective: str, maximize: bool) -> str:
    header = (
        f"Sweep objective: {objective} ({'maximize' if maximize else 'minimize'}), best first\n\n"
    )
    columns = ["rank", "trial", "status", "objective", "epochs", "seconds", "overrides", "error"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in table.iterrows():
        cells = []
        for c in columns:
            value = row[c]
            if isinstance(value, float):
                value = "" if math.isnan(value) else f"{value:.4g}"
            cells.append(str(value if value is not None else "").replace("|", "\\|")[:160])
        lines.append("| " + " | ".join(cells) + " |")
    return header + "\n".join(lines) + "\n"


def _plot(table: pd.DataFrame, objective: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    params = [
        c
        for c in table.columns
        if c.startswith("param:") and table[c].nunique() > 1 and not c.startswith("param:hydra")
    ]
    done = table[table["status"] == "completed"]
    fig, axes = plt.subplots(
        1, 1 + len(params), figsize=(4 * (1 + len(params)), 3.5), squeeze=False
    )
    axes = axes[0]
    axes[0].bar(done["trial"].astype(str), done["objective"].astype(float))
    axes[0].set_xlabel("trial")
    axes[0].set_title(objective)
    for ax, column in zip(axes[1:], params, strict=True):
        values = pd.to_numeric(done[column], errors="coerce")
        x = (
            values if values.notna().all() else done[column].astype(str)
        )  # numbers as numbers, else categories
        ax.scatter(x, done["objective"].astype(float))
        ax.set_xlabel(column.removeprefix("param:"))
        ax.set_title(f"{objective} by {column.removeprefix('param:')}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
