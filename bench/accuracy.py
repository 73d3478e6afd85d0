"""The accuracy suite (nox -s accuracy): real tables, each trained by the runner as a user
would (the default config; other variants on request) and, on the same split in the same run,
by scikit-learn's HistGradientBoosting with its default settings, TF-IDF + a linear model
where the table has text, and the mean/majority baseline; each on several shuffled splits
(seeds), reported as mean and standard error. Writes bench-results/accuracy.{json,md}.

    nox -s accuracy                                    # every table, default, seeds 0,1,2
    nox -s accuracy -- --tables adult --variants default,periodic --seeds 0,1,2,3,4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_tables import TABLES, Table, feature_type  # noqa: E402
from suite import machine_facts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = "target"
METRIC = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "r2"}
OUTPUT_TYPE = {"binary": "binary", "multiclass": "category", "regression": "number"}
# The runner's variants: the default config, then one override each.
VARIANTS = {
    "default": [],
    "residual": ["model.combiner=residual"],
    "transformer": ["model.combiner=transformer"],
    "periodic": ["model.number_encoder=periodic"],
    "piecewise": ["model.number_encoder=piecewise"],
    "no_number_encoder": ["model.number_encoder=none"],
    "bins16": ["model.bin_features=16"],  # each column's bins through a linear layer to 16
    "cat4": ["model.category_embedding_size=4"],
    "cat8": ["model.category_embedding_size=8"],
    "lr0.001": ["trainer.learning_rate=0.001"],
    "lr0.002": ["trainer.learning_rate=0.002"],
    "wd0.1": ["trainer.weight_decay=0.1"],
    "wd1": ["trainer.weight_decay=1.0"],
    "ema": ["trainer.ema_epochs=1"],
    "ema0.25": ["trainer.ema_epochs=0.25"],
    "cosine": ["trainer.schedule=cosine"],
    "fp32": ["trainer.precision=32"],  # full-precision steps, where auto picks bf16
    # One network in full-precision steps: the default before the ensemble and bf16 steps.
    "single_fp32": ["model.family=network", "model.ensemble_size=1", "trainer.precision=32"],
    # One network and no members, whatever the table's size.
    "single": ["model.family=network", "model.ensemble_size=1"],
    "ens4": ["model.family=network", "model.ensemble_size=4"],
    "ens8": ["model.family=network", "model.ensemble_size=8"],
    "ens16": ["model.family=network", "model.ensemble_size=16"],
    # The one-argument start: the feature types inferred instead of the suite's written list.
    "inferred": ["model=auto", f"dataset.target={TARGET}"],
    # The model families: the network alone, LightGBM trees on the same cache, and the
    # network + trees ensemble (the default: model.family=auto on the suite's tables).
    "network": ["model.family=network"],
    "trees": ["model.family=gbm"],
    "catboost": ["model.family=catboost"],
    # The bagged portfolio (LightGBM, CatBoost, the network over 5 folds) within 300 s.
    "best": ["preset=best", "time_limit=300"],
    "ensemble": ["model.family=ensemble"],
    # The ensemble with the network's members (the ensemble's auto is one network).
    "ensemble4": ["model.family=ensemble", "model.ensemble_size=4"],
    # A binary output decided at probability 0.5, where auto picks F1's threshold on a rare
    # positive class (its F1 beside the default's: the F1 table).
    "threshold_0.5": ["model.decision_threshold=0.5"],
}


def split_labels(rows: int, seed: int = 0) -> np.ndarray:
    """70 / 15 / 15, shuffled by the seed; the runner and the baselines read the same labels."""
    draw = np.random.default_rng(seed).random(rows)
    return np.where(draw < 0.7, "train", np.where(draw < 0.85, "validation", "test"))


def prepare(table: Table, work: Path, seed: int) -> tuple[pd.DataFrame, dict]:
    """The table as Parquet with the seed's split column, and the model config a user would
    write (the same for every seed)."""
    frame, path, types = write_table(table, work, {"split": seed}, f"{table.name}-{seed}")
    return frame, {"path": path, "types": types, "seed": seed}


def write_table(
    table: Table, work: Path, splits: dict[str, int], stem: str
) -> tuple[pd.DataFrame, Path, dict]:
    """The table as work/<stem>.parquet with a split column per entry of `splits` (column ->
    seed), and work/conf/model/<table>.yaml: the model config a user would write."""
    features, target = table.load()
    frame = features.reset_index(drop=True)
    frame[TARGET] = target.reset_index(drop=True)
    for column, seed in splits.items():
        frame[column] = split_labels(len(frame), seed)
    path = work / f"{stem}.parquet"
    frame.to_parquet(path, index=False)
    model, types = model_config(frame, features.columns, table)
    conf = work / "conf" / "model"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{table.name}.yaml").write_text(yaml.safe_dump(model, sort_keys=False))
    return frame, path, types


def model_config(frame: pd.DataFrame, columns, table: Table) -> tuple[dict, dict]:
    """The model config a user would write (feature types named), and the types by column."""
    inputs = [{"name": c, "type": feature_type(frame[c], table)} for c in columns]
    model = {
        "defaults": ["/model_schema@_here_", "_self_"],
        "input_features": inputs,
        "output_features": [{"name": TARGET, "type": OUTPUT_TYPE[table.task]}],
    }
    return model, {f["name"]: f["type"] for f in inputs}


def run_baseline(table: Table, frame: pd.DataFrame) -> dict:
    """The mean/majority baseline: the training split's mean or most frequent class for every
    test row (ROC AUC of a constant: 0.5)."""
    from sklearn.metrics import accuracy_score, r2_score

    train, test = frame["split"] == "train", frame["split"] == "test"
    y = frame[TARGET]
    if table.task == "binary":
        value = 0.5
    elif table.task == "multiclass":
        value = accuracy_score(y[test], np.repeat(y[train].mode()[0], test.sum()))
    else:
        value = r2_score(y[test], np.full(test.sum(), y[train].mean()))
    return {"value": float(value), "wall_seconds": 0.0}


def run_ours(
    table: Table, prepared: dict, work: Path, variant: str, extra: list[str]
) -> dict | None:
    """The run's test and validation scores; None where the variant cannot run on this table
    (its one error line, exit 2: trees with no input they can split on)."""
    run_dir = work / "runs" / f"{table.name}-{variant}-{prepared['seed']}"
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        f"--config-dir={work / 'conf'}",
        f"model={table.name}",  # a variant's model=auto overrides it
        "dataset=file",
        f"dataset.path={prepared['path']}",
        "dataset.split.method=column",
        "dataset.split.column=split",
        "backend=local",
        "trainer.progress_bar=false",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={run_dir}",
        f"seed={prepared['seed']}",
        *VARIANTS[variant],
        *extra,
    ]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode == 2:
        print(f"{table.name} {variant}: {done.stderr.strip().splitlines()[-1]}", flush=True)
        return None
    if done.returncode != 0:
        raise RuntimeError(f"{table.name} {variant} failed:\n{done.stderr[-3000:]}")
    report = json.loads((run_dir / "metrics.json").read_text())
    metric = METRIC[table.task]
    return {
        "value": report["test"][f"{TARGET}/{metric}"],
        "validation": report["validation"][f"{TARGET}/{metric}"],
        "f1": report["test"].get(f"{TARGET}/f1"),  # a binary output's, at its threshold
        "wall_seconds": wall,
        # The trees' rounds (their curve has about 100 points, not one per round).
        "epochs": report["training"].get("gbm_rounds_run", report["training"].get("epochs_run")),
    }


def _baseline_columns(frame: pd.DataFrame, types: dict, train: np.ndarray, text_as: str):
    """Features as scikit-learn takes them: numbers and dates as floats, categories as pandas
    categories (HGB's native support; integer codes past its 255-level limit), text as
    TF-IDF reduced to 64 SVD components (GBM) or left for a TF-IDF vectorizer (linear)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    columns = {}
    for name, kind in types.items():
        col = frame[name]
        if kind == "number":
            columns[name] = col.astype(float)
        elif kind == "date":
            columns[name] = pd.to_datetime(col, utc=True).astype("int64").astype(float) / 1e9
            columns[name] = columns[name].where(col.notna())
        elif kind == "category":
            strings = col.map(lambda v: None if pd.isna(v) else str(v), na_action=None)
            levels = list(strings[train].dropna().value_counts().index)
            if len(levels) <= 250 or text_as == "raw":
                columns[name] = pd.Categorical(strings, categories=levels)
            else:
                codes = pd.Categorical(strings, categories=levels).codes.astype(float)
                columns[name] = np.where(codes < 0, np.nan, codes)
        elif text_as == "svd":
            text = col.fillna("").astype(str)
            tfidf = TfidfVectorizer(min_df=2).fit(text[train])
            matrix = tfidf.transform(text)
            svd = TruncatedSVD(64, random_state=0).fit(matrix[train])
            reduced = svd.transform(matrix)
            for i in range(reduced.shape[1]):
                columns[f"{name}_svd{i}"] = reduced[:, i]
        else:
            columns[name] = col.fillna("").astype(str)
    return pd.DataFrame(columns, index=frame.index)


def _score(task: str, y_true, model, x) -> float:
    from sklearn.metrics import accuracy_score, r2_score, roc_auc_score

    if task == "binary":
        return float(roc_auc_score(y_true, model.predict_proba(x)[:, 1]))
    if task == "multiclass":
        return float(accuracy_score(y_true, model.predict(x)))
    return float(r2_score(y_true, model.predict(x)))


def run_gbm(table: Table, frame: pd.DataFrame, types: dict) -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    started = time.perf_counter()
    train, test = (frame["split"] == "train").to_numpy(), (frame["split"] == "test").to_numpy()
    x = _baseline_columns(frame, types, train, "svd")
    y = frame[TARGET]
    cls = (
        HistGradientBoostingRegressor
        if table.task == "regression"
        else HistGradientBoostingClassifier
    )
    model = cls(random_state=0).fit(x[train], y[train])
    return {
        "value": _score(table.task, y[test], model, x[test]),
        "wall_seconds": time.perf_counter() - started,
    }


def run_lightgbm(table: Table, frame: pd.DataFrame, types: dict) -> dict:
    """LightGBM with its own defaults (100 rounds, 31 leaves, no early stopping), on HGB's
    features: what a user gets from `lightgbm.LGBMRegressor().fit(x, y)`."""
    import lightgbm as lgb

    started = time.perf_counter()
    train, test = (frame["split"] == "train").to_numpy(), (frame["split"] == "test").to_numpy()
    x = _baseline_columns(frame, types, train, "svd")
    y = frame[TARGET]
    cls = lgb.LGBMRegressor if table.task == "regression" else lgb.LGBMClassifier
    model = cls(random_state=0, verbosity=-1).fit(x[train], y[train])
    return {
        "value": _score(table.task, y[test], model, x[test]),
        "wall_seconds": time.perf_counter() - started,
    }


def run_linear_text(table: Table, frame: pd.DataFrame, types: dict) -> dict | None:
    """TF-IDF (words and bigrams) + logistic / ridge regression: the text tables' usual bar."""
    if not table.text:
        return None
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    started = time.perf_counter()
    train, test = (frame["split"] == "train").to_numpy(), (frame["split"] == "test").to_numpy()
    x = _baseline_columns(frame, types, train, "raw")
    parts = []
    for name, kind in types.items():
        if kind == "text":
            parts.append((name, TfidfVectorizer(ngram_range=(1, 2), min_df=2), name))
        elif kind == "category":
            x[name] = x[name].astype(object).where(x[name].notna(), "missing").astype(str)
            parts.append((name, OneHotEncoder(handle_unknown="ignore"), [name]))
        else:
            parts.append((name, make_pipeline(SimpleImputer(), StandardScaler()), [name]))
    linear = Ridge() if table.task == "regression" else LogisticRegression(max_iter=3000)
    model = make_pipeline(ColumnTransformer(parts), linear).fit(x[train], frame[TARGET][train])
    value = _score(table.task, frame[TARGET][test], model, x[test])
    return {"value": value, "wall_seconds": time.perf_counter() - started}


def summarize(values: list[float]) -> dict:
    """Mean and standard error (of the mean, over the split seeds)."""
    array = np.asarray(values, dtype=np.float64)
    se = float(array.std(ddof=1) / np.sqrt(len(array))) if len(array) > 1 else float("nan")
    return {"mean": float(array.mean()), "se": se, "values": array.tolist()}


def _cell(summary: dict | None) -> str:
    if not summary:
        return ""
    return f"{summary['mean']:.4f} ± {summary['se']:.4f}"


def markdown(results: dict) -> str:
    variants = [v for v in VARIANTS if any(v in r["ours"] for r in results["tables"].values())]
    head = ["table", "task", "rows", "metric", "mean/majority"]
    head += [f"ours: {v}" for v in variants]
    head += ["GBM (HGB)", "LightGBM", "TF-IDF + linear", "default - best GBM", "within 1 SE"]
    head += ["wall: default / GBM"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results["tables"].items():
        cells = [name, r["task"], f"{r['rows']:,}", r["metric"], _cell(r["baseline"])]
        cells += [_cell(r["ours"].get(v)) for v in variants]
        cells += [_cell(r["gbm"]), _cell(r.get("lightgbm")), _cell(r["linear_text"])]
        gap = r.get("default_gap")
        cells += [f"{gap['mean']:+.4f} ± {gap['se']:.4f}" if gap else ""]
        cells += [("yes" if r["default_meets_target"] else "**no**") if gap else ""]
        walls = r.get("wall_seconds", {})
        cells += [f"{walls['default']:.0f} s / {walls['gbm']:.0f} s" if "default" in walls else ""]
        lines.append("| " + " | ".join(cells) + " |")
    machine = results["machine"]
    seeds = results["seeds"]
    lines += _f1_lines(results)
    lines.append(
        f"\n{machine['date']}, {machine['cpus']} CPUs, {machine['memory_gb']} GiB, Python "
        f"{machine['python']}. Test split (15 %) of {len(seeds)} shuffled 70/15/15 splits per "
        f"table (seeds {', '.join(map(str, seeds))}; the runner's seed is the split's): mean ± "
        "standard error over the splits; gap = ours - the better of HGB and LightGBM's "
        "defaults (by mean) on the same split (positive: ours ahead), its standard error that of the paired differences; within 1 SE: the gap's mean "
        "plus its standard error is at least 0. Wall: mean seconds per run."
    )
    return "\n".join(lines) + "\n"


def _f1_lines(results: dict) -> list[str]:
    """The binary tables' test F1 (the positive class's) per variant: the decision threshold
    at work (default: picked on validation where the positive class is rare)."""
    tables = {n: r for n, r in results["tables"].items() if r.get("f1")}
    variants = [v for v in VARIANTS if any(v in r["f1"] for r in tables.values())]
    if not tables or not variants:
        return []
    head = ["table", "positive share", *(f"F1: {v}" for v in variants)]
    lines = ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in tables.items():
        share = r.get("positive_share")
        cells = [name, f"{share:.1%}" if share is not None else ""]
        cells += [_cell(r["f1"].get(v)) for v in variants]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def evaluate_table(table: Table, seeds: list[int], variants: list[str], extra, work) -> dict:
    """Every method on every seed's split of one table; means, standard errors, paired gaps."""
    runs: dict[str, list[dict]] = {}
    rows, share = 0, None
    for seed in seeds:
        frame, prepared = prepare(table, work, seed)
        rows = len(frame)
        if table.task == "binary":
            share = float(frame[TARGET].astype(float).mean())
        done = {
            "baseline": run_baseline(table, frame),
            "gbm": run_gbm(table, frame, prepared["types"]),
            "lightgbm": run_lightgbm(table, frame, prepared["types"]),
            "linear_text": run_linear_text(table, frame, prepared["types"]),
        }
        for variant in variants:
            done[variant] = run_ours(table, prepared, work, variant, extra)
        for method, result in done.items():
            if result is not None:
                runs.setdefault(method, []).append(result)
        print(
            f"{table.name} seed {seed}: "
            + ", ".join(f"{m} {r['value']:.4f}" for m, r in done.items() if r is not None),
            flush=True,
        )
    summary = {m: summarize([r["value"] for r in rs]) for m, rs in runs.items()}
    entry = {
        "task": table.task,
        "rows": rows,
        "metric": METRIC[table.task],
        "source": table.source,
        "positive_share": share,
        "baseline": summary["baseline"],
        "gbm": summary["gbm"],
        "lightgbm": summary["lightgbm"],
        "linear_text": summary.get("linear_text"),
        "ours": {v: summary[v] for v in variants if v in summary},
        "wall_seconds": {
            m: float(np.mean([r["wall_seconds"] for r in rs])) for m, rs in runs.items()
        },
        "epochs": {v: [r.get("epochs") for r in runs[v]] for v in variants if v in runs},
        "f1": {
            v: summarize([r["f1"] for r in runs[v]])
            for v in variants
            if v in runs and all(r.get("f1") is not None for r in runs[v])
        },
        # Defaults are picked on validation, never on test (docs/accuracy.md).
        "validation": {
            v: summarize([r["validation"] for r in runs[v]]) for v in variants if v in runs
        },
    }
    if "default" in variants:
        # The bar: the better of HistGB and LightGBM's defaults on this table (by mean).
        bar = max(("gbm", "lightgbm"), key=lambda m: summary[m]["mean"])
        entry["bar"] = bar
        gaps = np.subtract(summary["default"]["values"], summary[bar]["values"])
        entry["default_gap"] = summarize(gaps.tolist())
        gap = entry["default_gap"]
        entry["default_meets_target"] = bool(
            gap["mean"] + (gap["se"] if len(seeds) > 1 else 0) >= 0
        )
        entry["default_above_baseline"] = bool(
            summary["default"]["mean"] > summary["baseline"]["mean"]
        )
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--variants", default="default")
    parser.add_argument("--seeds", default="0,1,2", help="split seeds (at least 3 for the README)")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="overrides for every run, e.g. trainer.learning_rate=0.001",
    )
    parser.add_argument(
        "--work",
        default=None,
        help="keep the tables, caches and run dirs here (default: a temp dir)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = args.variants.split(",")
    results = {"overrides": args.set, "seeds": seeds, "machine": machine_facts(), "tables": {}}
    with tempfile.TemporaryDirectory(prefix="accuracy-") as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.tables.split(","):
            results["tables"][name] = evaluate_table(TABLES[name], seeds, variants, args.set, work)
            (out / "accuracy.json").write_text(json.dumps(results, indent=2))
            (out / "accuracy.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
