"""command=export: the model in its family's own format (the network as TorchScript, the trees
as LightGBM's or CatBoost's own model, an ensemble as its members, each in theirs, and their
weights), or one as an ONNX graph (export.format=onnx, for runtimes without Python:
onnxruntime, Java, C#, browsers). Each takes the encoded tensors (the groups of
runner.model.layout: a float matrix of numbers and binaries, an integer matrix of category
codes, a token matrix per text feature; the trees: the numbers then the category codes as one
matrix) and returns logits per output (the trees: raw scores); export.json beside it says
which column is which, and meta.json holds the encodings (vocabularies, statistics) that turn
raw values into those tensors."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import torch

from runner.errors import UserError
from runner.model.artifact import SavedModel
from runner.model.base import OnnxFamily
from runner.model.catboost import MODEL_FILE as CATBOOST_FILE
from runner.model.catboost import CatBoostModel
from runner.model.ensemble import EnsembleModel
from runner.model.gbm import BOOSTER_FILE, TreeModel
from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key
from runner.model.onnx_graph import OPSET, example_inputs
from runner.model.registry import family
from runner.model.tree_features import categorical_indices, feature_names, tree_columns

ARTIFACT = "model.torchscript.pt"
ONNX_ARTIFACT = "model.onnx"


def export_model(saved: SavedModel, target: Path, format_: str = "auto") -> Path:
    """Writes the model's artifact(s), meta.json and export.json under target (whole or not at
    all); returns the artifact's path (an ensemble's: its folder)."""
    name = saved.settings.family
    formats = family(name).export_formats
    if format_ not in ("auto", *formats) or not formats:
        raise UserError(
            f"export.format={format_} does not fit this model ({name}: "
            f"{', '.join(formats) or 'no format'}); use export.format=auto"
        )
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write = WRITERS[formats[0] if format_ == "auto" else format_]
    try:
        artifact = write(family(name), saved.model, saved.layout, tmp)
        (tmp / "meta.json").write_text(
            json.dumps(saved.meta, indent=2, sort_keys=True, default=str)
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    return target / artifact


def _write_members(_, model: EnsembleModel, layout: Layout, folder: Path) -> str:
    """Each member in its family's own format, in a folder of its name, and the weights."""
    for name, member in model.members.items():
        (folder / name).mkdir()
        member_family = family(model.families[name])
        WRITERS[member_family.export_formats[0]](member_family, member, layout, folder / name)
    saved = {"weights": model.weights, "families": model.families}
    (folder / "ensemble.json").write_text(json.dumps(saved, indent=2))
    return "ensemble.json"


def _write_lightgbm(_, model: TreeModel, layout: Layout, folder: Path) -> str:
    """The booster as LightGBM's text model, and its export.json."""
    model.booster.save_model(str(folder / BOOSTER_FILE))
    _describe_trees(folder, "lightgbm", layout, features=feature_names(layout))
    return BOOSTER_FILE


def _write_catboost(_, model: CatBoostModel, layout: Layout, folder: Path) -> str:
    """The model in CatBoost's own format (its numeric columns, then its category codes as
    text, as catboost_pool gives them), and its export.json."""
    model.booster.save_model(str(folder / CATBOOST_FILE))
    _describe_trees(folder, "catboost", layout)
    return CATBOOST_FILE


def _describe_trees(folder: Path, format_: str, layout: Layout, **named) -> None:
    """A tree model's export.json: its feature matrix's columns, which are categorical, and
    the outputs."""
    described = {
        "format": format_,
        **named,
        "columns": tree_columns(layout),
        "categorical": categorical_indices(layout),
        "outputs": _outputs(layout),
    }
    (folder / "export.json").write_text(json.dumps(described, indent=2))


def _write_torchscript(_, model, layout: Layout, folder: Path) -> str:
    """The network traced to TorchScript, and its export.json."""
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), (example_inputs(layout),), strict=False)
    traced.save(str(folder / ARTIFACT))
    described = {"format": "torchscript", "inputs": _inputs(layout), "outputs": _outputs(layout)}
    (folder / "export.json").write_text(json.dumps(described, indent=2))
    return ARTIFACT


def _write_onnx(model_family: OnnxFamily, model, layout: Layout, folder: Path) -> str:
    """The model as one ONNX graph (opset OPSET; the trees' nodes from ai.onnx.ml): one named
    input per tensor group it reads, one output of logits per output feature, any number of
    rows. An ensemble's graph holds its members' and their weighted average."""
    graph = model_family.onnx_graph(model, layout)
    onnx.save(graph, str(folder / ONNX_ARTIFACT))
    every_input = _inputs(layout)
    described = {
        "format": "onnx",
        "opset": OPSET,
        "inputs": {value.name: every_input[value.name] for value in graph.graph.input},
        "outputs": _outputs(layout),
    }
    (folder / "export.json").write_text(json.dumps(described, indent=2))
    return ONNX_ARTIFACT


def _inputs(layout: Layout) -> dict:
    return {
        NUMERIC: {"dtype": "float32", "columns": layout.numeric},
        CATEGORY: {"dtype": "int64", "columns": [name for name, *_ in layout.categories]},
        **{
            text_key(name): {"dtype": "int64", "token buckets": buckets}
            for name, buckets, _ in layout.texts
        },
    }


def _outputs(layout: Layout) -> dict:
    """Each output's type, logits and classes; a binary output's decision threshold (its
    positive class above this probability, model.decision_threshold)."""
    return {
        spec.name: {
            "type": spec.type,
            "size": spec.size,
            "classes": spec.labels,
            **({"threshold": spec.threshold} if spec.type == "binary" else {}),
        }
        for spec in layout.outputs
    }


# Each export format's writer (Family.export_formats names them): (family, model, layout,
# folder) -> the artifact's name in folder, with its export.json beside it.
WRITERS: dict[str, Callable[[Any, Any, Layout, Path], str]] = {
    "torchscript": _write_torchscript,
    "onnx": _write_onnx,
    "lightgbm": _write_lightgbm,
    "catboost": _write_catboost,
    "members": _write_members,
}
