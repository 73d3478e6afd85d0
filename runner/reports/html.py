"""report.html: one self-contained page per run and per sweep (plots inlined as base64
PNG, no script, no stylesheet or font from the network), written atomically."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path

from runner.storage import write_text_atomic

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; } img { max-width: 100%; margin: 0.4em 0; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.warn { color: #a40; }
"""


def escape(value) -> str:
    return html.escape(str(value))


def cell(value) -> str:
    if isinstance(value, float):
        text = "" if math.isnan(value) else f"{value:.4g}"
        return f'<td class="n">{text}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="n">{value}</td>'
    return f"<td>{escape('' if value is None else value)}</td>"


def table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def image(path: Path, alt: str = "") -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{escape(alt or Path(path).stem)}" src="data:image/png;base64,{data}">'


def page(title: str, sections: list[tuple[str, str]]) -> str:
    body = "".join(f"<h2>{escape(name)}</h2>{content}" for name, content in sections if content)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def write_page(path: Path, title: str, sections: list[tuple[str, str]]) -> Path:
    write_text_atomic(path, page(title, sections))
    return path


SPLITS = ("train", "validation", "test", "evaluation", "baseline", "explanation")


def metric_table(report: dict) -> str:
    """Rows: metric; columns: the splits metrics.json has."""
    splits = [s for s in SPLITS if isinstance(report.get(s), dict) and report[s]]
    names = list(dict.fromkeys(n for s in splits for n in report[s]))
    rows = [[n, *[report[s].get(n, math.nan) for s in splits]] for n in names]
    return table(["metric", *splits], rows)


def run_report(
    run_dir: Path,
    report: dict,
    components: dict[str, str],
    config_yaml: str,
    plots: list[Path],
    warnings: Sequence[str] = (),
) -> Path:
    """<run_dir>/report.html: metrics, warnings, plots, importance, timings, components, config."""
    sections = [("Metrics", metric_table(report))]
    if warnings:
        sections.append(("Warnings", "".join(f'<p class="warn">{escape(w)}</p>' for w in warnings)))
    curves = run_dir / "learning_curves.png"
    if curves.exists():
        sections.append(("Learning curves", image(curves)))
    sections.append(("Evaluation", "".join(image(p) for p in plots if p.exists())))
    explained = report.get("explained")
    if explained:
        means = [
            [k.removeprefix("mean_abs/"), v]
            for k, v in report["explanation"].items()
            if k.startswith("mean_abs/")
        ]
        extreme = [
            [
                e["row"],
                e.get("class", ""),
                e["output"],
                e["base"],
                ", ".join(f"{k} {v:+.3g}" for k, v in e["top_inputs"].items()),
            ]
            for e in explained["extreme_rows"]
        ]
        chart = run_dir / "plots" / "attributions.png"
        sections.append(
            (
                f"Explanations of {explained['output']} ({explained['method']})",
                (image(chart) if chart.exists() else "")
                + table(["input", "mean |attribution|"], means)
                + "<p>The rows whose output moved furthest from the base:</p>"
                + table(["row", "class", "output", "base", "largest attributions"], extreme),
            )
        )
    importance = report.get("importance")
    if importance:
        rows = [[f["input"], f["mean"], f["std"]] for f in importance["features"]]
        chart = run_dir / "plots" / "importance.png"
        sections.append(
            (
                f"Permutation importance ({importance['metric']}, test split)",
                (image(chart) if chart.exists() else "")
                + table(["input", "fall when shuffled", "std"], rows),
            )
        )
    training = report.get("training")
    if training:
        sections.append(("Training", table(["", ""], [[k, v] for k, v in training.items()])))
    if components:
        sections.append(("Components", table(["", ""], [[k, v] for k, v in components.items()])))
    sections.append(("Config (resolved, credentials masked)", f"<pre>{escape(config_yaml)}</pre>"))
    return write_page(run_dir / "report.html", f"Run {run_dir.name}", sections)


def sweep_report(sweep_dir: Path, trials, objective: str, maximize: bool) -> Path:
    """<sweep_dir>/report.html: trials best first with their status and overrides, the
    objective by trial and by each swept parameter, the scheduler's epochs (Tune)."""
    columns = ["rank", "trial", "status", "objective", "epochs", "seconds", "overrides", "error"]
    rows = []
    for _, row in trials.iterrows():
        values = [row.get(c) for c in columns]
        report = sweep_dir / str(row["trial"]) / "report.html"
        if report.exists():  # the trial's own page, relative so the folder can move
            values[1] = f"{row['trial']} (report: {row['trial']}/report.html)"
        rows.append(values)
    counts = trials["status"].value_counts().to_dict() if len(trials) else {}
    summary = (
        f"<p>objective {escape(objective)} ({'maximize' if maximize else 'minimize'}); "
        + ", ".join(f"{n} {escape(s)}" for s, n in counts.items())
        + "</p>"
    )
    charts = "".join(
        image(sweep_dir / name)
        for name in ("sweep_report.png", "sweep_epochs.png")
        if (sweep_dir / name).exists()
    )
    sections = [("Trials, best first", summary + table(columns, rows)), ("Charts", charts)]
    return write_page(sweep_dir / "report.html", f"Sweep {sweep_dir.name}", sections)
