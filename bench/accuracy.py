"""The accuracy suite (nox -s accuracy): real tables, each trained by the runner as a user
would (default config, then each other combiner) and, on the same split in the same run, by
scikit-learn's HistGradientBoosting with its default settings (and TF-IDF + a linear model
where the table has text). Writes bench-results/accuracy.{json,md}.

    nox -s accuracy                        # every table, every variant
    nox -s accuracy -- --tables adult --variants default
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
}
# The bar: within this much of gradient boosting (or ahead of it).
TOLERANCE = {"roc_auc": 0.005, "accuracy": 0.005, "r2": 0.01}


def split_labels(rows: int, seed: int = 0) -> np.ndarray:
    """70 / 15 / 15, shuffled once; the runner and the baselines read the same labels."""
    draw = np.random.default_rng(seed).random(rows)
    return np.where(draw < 0.7, "train", np.where(draw < 0.85, "validation", "test"))


def prepare(table: Table, work: Path) -> tuple[pd.DataFrame, dict]:
    """The table as Parquet with a split column, and the model config a user would write."""
    features, target = table.load()
    frame = features.reset_index(drop=True)
    frame[TARGET] = target.reset_index(drop=True)
    frame["split"] = split_labels(len(frame))
    path = work / f"{table.name}.parquet"
    frame.to_parquet(path, index=False)
    inputs = [{"name": c, "type": feature_type(frame[c], table)} for c in features.columns]
    model = {
        "defaults": ["model_schema", "_self_"],
        "input_features": inputs,
        "output_features": [{"name": TARGET, "type": OUTPUT_TYPE[table.task]}],
    }
    conf = work / "conf" / "model"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / f"{table.name}.yaml").write_text(yaml.safe_dump(model, sort_keys=False))
    return frame, {"path": path, "types": {f["name"]: f["type"] for f in inputs}}


def run_ours(table: Table, prepared: dict, work: Path, variant: str, extra: list[str]) -> dict:
    run_dir = work / "runs" / f"{table.name}-{variant}"
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        f"--config-dir={work / 'conf'}",
        f"model={table.name}",
        "dataset=file",
        f"dataset.path={prepared['path']}",
        "dataset.split.method=column",
        "dataset.split.column=split",
        "backend=local",
        "trainer.progress_bar=false",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={run_dir}",
        *VARIANTS[variant],
        *extra,
    ]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{table.name} {variant} failed:\n{done.stderr[-3000:]}")
    report = json.loads((run_dir / "metrics.json").read_text())
    metric = METRIC[table.task]
    return {
        "value": report["test"][f"{TARGET}/{metric}"],
        "wall_seconds": wall,
        "epochs": report["training"].get("epochs_run"),
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


def markdown(results: dict) -> str:
    variants = [v for v in VARIANTS if any(v in r["ours"] for r in results["tables"].values())]
    head = ["table", "task", "rows", "metric", *[f"ours: {v}" for v in variants]]
    head += ["GBM (HGB)", "TF-IDF + linear", "default - GBM", "best - GBM", "wall: default / GBM"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in results["tables"].items():
        cells = [name, r["task"], f"{r['rows']:,}", r["metric"]]
        cells += [f"{r['ours'][v]['value']:.4f}" if v in r["ours"] else "" for v in variants]
        linear = r["linear_text"]
        cells += [f"{r['gbm']['value']:.4f}", f"{linear['value']:.4f}" if linear else ""]
        cells += [f"{r['default_gap']:+.4f}" if r["default_gap"] is not None else ""]
        cells += [f"{r['best_gap']:+.4f} ({r['best_variant']})"]
        default = r["ours"].get("default", {}).get("wall_seconds")
        cells += [f"{default:.0f} s / {r['gbm']['wall_seconds']:.0f} s" if default else ""]
        lines.append("| " + " | ".join(cells) + " |")
    machine = results["machine"]
    lines.append(
        f"\n{machine['date']}, {machine['cpus']} CPUs, {machine['memory_gb']} GiB, Python "
        f"{machine['python']}. Test split (15 %) of one shuffled 70/15/15 split per table; "
        "gap = ours - GBM (positive: ours ahead)."
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="overrides for every run, e.g. trainer.learning_rate=0.001",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {
        "overrides": args.set,
        "machine": machine_facts(),
        "tables": {},
    }
    with tempfile.TemporaryDirectory(prefix="accuracy-") as scratch:
        work = Path(scratch)
        for name in args.tables.split(","):
            table = TABLES[name]
            frame, prepared = prepare(table, work)
            entry = {"task": table.task, "rows": len(frame), "metric": METRIC[table.task]}
            entry["source"] = table.source
            entry["gbm"] = run_gbm(table, frame, prepared["types"])
            entry["linear_text"] = run_linear_text(table, frame, prepared["types"])
            entry["ours"] = {}
            for variant in args.variants.split(","):
                entry["ours"][variant] = run_ours(table, prepared, work, variant, args.set)
                print(f"{name} {variant}: {entry['ours'][variant]}", flush=True)
            gbm = entry["gbm"]["value"]
            best = max(entry["ours"], key=lambda v: entry["ours"][v]["value"])
            default = entry["ours"].get("default")
            entry["default_gap"] = default["value"] - gbm if default else None
            entry["best_variant"], entry["best_gap"] = best, entry["ours"][best]["value"] - gbm
            tolerance = TOLERANCE[entry["metric"]]
            entry["default_meets_target"] = bool(default and entry["default_gap"] >= -tolerance)
            print(f"{name}: gbm {entry['gbm']}, linear {entry['linear_text']}", flush=True)
            results["tables"][name] = entry
            (out / "accuracy.json").write_text(json.dumps(results, indent=2))
            (out / "accuracy.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
