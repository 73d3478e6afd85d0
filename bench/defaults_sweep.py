"""How the training defaults are chosen (nox -s defaults_sweep): a grid over the accuracy
suite, each table swept by the project's own Ray Tune sweeper (`--multirun
hydra/sweeper=tune hydra.sweeper.search=grid`), every setting on every split seed. Each
table's Parquet carries one split column per seed (split0, split1, ...) and the trials pick
theirs by interpolation (`dataset.split.column=split${seed}`), so a table's trials share the
cache of each split: preprocessed once per seed, whatever the grid's size.

The pick is made on the validation split (the trials' best-epoch validation metric), never on
test: each setting's mean over seeds is ranked within each table (1 = best), and the setting
with the lowest mean rank over the tables wins. The report also shows test means, the gap to
HistGradientBoosting on the same splits and how many tables are within one standard error of
it. Writes bench-results/defaults_sweep.{json,md}.

    nox -s defaults_sweep
    nox -s defaults_sweep -- --grid trainer.weight_decay=0,0.01,0.1 --tables adult,ames
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import (  # noqa: E402
    METRIC,
    ROOT,
    TARGET,
    run_gbm,
    summarize,
    write_table,
)
from accuracy_tables import TABLES, Table  # noqa: E402
from suite import machine_facts  # noqa: E402

# The stage-1 grid (learning rate x schedule x weight averaging x dropout); later stages pass
# their own with --grid.
GRID = [
    "trainer.learning_rate=0.001,0.003",
    "trainer.schedule=constant,cosine",
    "trainer.ema_epochs=0,1",
    "model.dropout=0,0.1",
]


def prepare(table: Table, work: Path, seeds: list[int]) -> tuple[Path, dict, object]:
    """The table as Parquet with one split column per seed, and the model config a user would
    write."""
    frame, path, types = write_table(table, work, {f"split{s}": s for s in seeds}, table.name)
    return path, types, frame


def sweep_table(table: Table, path: Path, work: Path, seeds: list[int], grid: list[str], extra):
    sweep_dir = work / "sweeps" / table.name
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        "--multirun",
        f"--config-dir={work / 'conf'}",
        f"model={table.name}",
        "dataset=file",
        f"dataset.path={path}",
        "dataset.split.method=column",
        "dataset.split.column=split${seed}",
        "backend=local",
        "model.family=network",  # the network's defaults; the trees keep their own
        "trainer.progress_bar=false",
        f"cache_dir={work / 'cache'}",
        "hydra/sweeper=tune",
        "hydra.sweeper.search=grid",
        "hydra.sweeper.scheduler=none",
        "hydra.sweeper.num_samples=1",
        f"hydra.sweep.dir={sweep_dir}",
        f"seed={','.join(map(str, seeds))}",
        *grid,
        *extra,
    ]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{table.name}: the sweep failed:\n{done.stderr[-4000:]}")
    wall = time.perf_counter() - started
    metric = f"{TARGET}/{METRIC[table.task]}"
    trials = []
    for trial in sorted(p for p in sweep_dir.iterdir() if p.name.isdigit()):
        overrides = yaml.safe_load((trial / ".hydra" / "overrides.yaml").read_text())
        report = json.loads((trial / "metrics.json").read_text())
        values = dict(o.split("=", 1) for o in overrides)
        trials.append(
            {
                "seed": int(values["seed"]),
                "setting": canonical([f"{k}={values[k]}" for k in (g.split("=")[0] for g in grid)]),
                "validation": report["validation"][metric],
                "test": report["test"][metric],
                "epochs": report["training"].get("epochs_run"),
            }
        )
    return trials, wall


def canonical(assignments: list[str]) -> tuple:
    """key=value pairs compared as values: Hydra writes 0.00001 back as 1.0e-05."""

    def value(text: str):
        try:
            return float(text)
        except ValueError:
            return text

    return tuple((k, value(v)) for k, v in (a.split("=", 1) for a in assignments))


def settings_of(grid: list[str]) -> list[str]:
    keys = [g.split("=")[0] for g in grid]
    values = [g.split("=", 1)[1].split(",") for g in grid]
    return [
        " ".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        for combo in itertools.product(*values)
    ]


def rank(results: dict, settings: list[str], split: str) -> dict[str, float]:
    """Each setting's mean rank over the tables (1 = best; ties share the mean rank)."""
    from scipy.stats import rankdata

    ranks = {s: [] for s in settings}
    for entry in results["tables"].values():
        means = [entry["settings"][s][split]["mean"] for s in settings]
        for s, r in zip(settings, rankdata([-m for m in means]), strict=True):
            ranks[s].append(float(r))
    return {s: float(np.mean(r)) for s, r in ranks.items()}


def markdown(results: dict) -> str:
    settings = results["settings"]
    val_rank, test_rank = rank(results, settings, "validation"), rank(results, settings, "test")
    order = sorted(settings, key=lambda s: val_rank[s])
    tables = list(results["tables"])
    lines = [
        "| setting | mean rank (validation) | mean rank (test) | tables within 1 SE of GBM (test) | "
        + " | ".join(tables)
        + " |",
        "|---|---|---|---|" + "---|" * len(tables),
    ]
    for s in order:
        cells, within = [], 0
        for name in tables:
            entry = results["tables"][name]["settings"][s]
            gap = entry["gap"]
            within += gap["mean"] + gap["se"] >= 0
            cells.append(f"{entry['test']['mean']:.4f} ({gap['mean']:+.4f})")
        lines.append(
            f"| `{s}` | {val_rank[s]:.2f} | {test_rank[s]:.2f} | {within}/{len(tables)} | "
            + " | ".join(cells)
            + " |"
        )
    m = results["machine"]
    lines.append("")
    lines.append(
        f"{m['date']}, {m['cpus']} CPUs, {m['memory_gb']} GiB, Python {m['python']}. "
        f"Split seeds {', '.join(map(str, results['seeds']))}; fixed overrides: "
        f"{' '.join(results['fixed']) or 'none'}. Cells: test mean over the seeds "
        "(gap to GBM on the same splits). Ranked by the validation metric: a setting's mean over "
        "the seeds ranked within each table, then averaged over the tables; the first row is "
        "the pick."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--grid", nargs="*", default=GRID, help="key=v1,v2 sweep overrides")
    parser.add_argument("--set", nargs="*", default=[], help="fixed overrides for every trial")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = settings_of(args.grid)
    results = {
        "grid": args.grid,
        "fixed": args.set,
        "seeds": seeds,
        "settings": settings,
        "machine": machine_facts(),
        "tables": {},
    }
    with tempfile.TemporaryDirectory(prefix="defaults-sweep-") as scratch:
        work = Path(scratch)
        for name in args.tables.split(","):
            table = TABLES[name]
            path, types, frame = prepare(table, work, seeds)
            trials, wall = sweep_table(table, path, work, seeds, args.grid, args.set)
            gbm = {}
            for seed in seeds:
                frame["split"] = frame[f"split{seed}"]
                gbm[seed] = run_gbm(table, frame, types)["value"]
            entry = {"rows": len(frame), "wall_seconds": wall, "gbm": gbm, "settings": {}}
            for s in settings:
                mine = [t for t in trials if t["setting"] == canonical(s.split(" "))]
                mine.sort(key=lambda t: t["seed"])
                if len(mine) != len(seeds):
                    raise RuntimeError(f"{name}: {len(mine)} trials for {s!r}, not {len(seeds)}")
                entry["settings"][s] = {
                    "validation": summarize([t["validation"] for t in mine]),
                    "test": summarize([t["test"] for t in mine]),
                    "gap": summarize([t["test"] - gbm[t["seed"]] for t in mine]),
                    "epochs": [t["epochs"] for t in mine],
                }
            results["tables"][name] = entry
            print(f"{name}: {len(trials)} trials in {wall:.0f}s", flush=True)
            (out / "defaults_sweep.json").write_text(json.dumps(results, indent=2))
            (out / "defaults_sweep.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
