"""What a run leaves in its output dir: model/, metrics.json, predictions, curves, summary.

Every file is written to a temporary name and renamed into place, so a failed
run never leaves a half-written output behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from runner.model.layout import Layout
from runner.redact import redact
from runner.storage import write_text_atomic


def write_json(path: Path, payload: dict) -> None:
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True, default=_json_default))


def _json_default(value):
    return float(value) if hasattr(value, "__float__") else str(value)


def save_model(model_dir: Path, model, meta: dict, cfg) -> None:
    """The family's files (weights, booster, members) + feature metadata + resolved config:
    all predict needs, without the cache."""
    from runner.model.registry import LEGACY_FAMILY, family

    tmp = model_dir.with_name(model_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    family(str(cfg.model.get("family", LEGACY_FAMILY))).save(model, tmp)
    write_json(tmp / "meta.json", meta)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    (tmp / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(redact(resolved))))
    shutil.rmtree(model_dir, ignore_errors=True)
    os.rename(tmp, model_dir)


def main_metric(layout: Layout) -> str:
    spec = layout.outputs[0]
    return f"{spec.name}/{spec.head.metrics[0]}"


def format_summary(
    metrics: dict[str, dict[str, float]], locations: dict[str, str], warnings: Sequence[str] = ()
) -> str:
    """A metric table (rows: metric, columns: split), warnings, and where each output went."""
    splits = [
        s
        for s in ("train", "validation", "holdout", "test", "evaluation", "baseline", "explanation")
        if metrics.get(s)
    ]
    names = list(dict.fromkeys(name for s in splits for name in metrics[s]))
    width = max([len(n) for n in names] + [6])
    lines = ["", "metric".ljust(width) + "".join(s.rjust(12) for s in splits)]
    for name in names:
        cells = "".join(
            (f"{metrics[s][name]:12.4f}" if name in metrics[s] else " " * 12) for s in splits
        )
        lines.append(name.ljust(width) + cells)
    lines.append("")
    if warnings:
        lines += [*warnings, ""]
    lines += [f"{what:<12} {where}" for what, where in locations.items()]
    return "\n".join(lines)
