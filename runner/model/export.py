"""command=export: the model in its family's own format: the network as TorchScript (or ONNX,
export.format=onnx, for runtimes without Python: onnxruntime, Java, C#, browsers), the trees
as LightGBM's text model, an ensemble as its members (each in theirs) and their weights. Each
takes the encoded tensors (the groups of runner.model.layout: a float matrix of numbers and
binaries, an integer matrix of category codes, a token matrix per text feature; the trees: the
numbers then the category codes as one matrix) and returns logits per output (the trees: raw
scores); export.json beside it says which column is which, and meta.json holds the encodings
(vocabularies, statistics) that turn raw values into those tensors."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from runner.errors import UserError
from runner.model.artifact import SavedModel
from runner.model.ensemble import EnsembleModel
from runner.model.gbm import BOOSTER_FILE, TreeModel, categorical_indices, feature_names
from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key
from runner.model.registry import family

ARTIFACT = "model.torchscript.pt"
ONNX_ARTIFACT = "model.onnx"
ONNX_OPSET = 17


def example_inputs(layout: Layout, rows: int = 2) -> dict[str, torch.Tensor]:
    inputs: dict[str, torch.Tensor] = {}
    if layout.numeric:
        inputs[NUMERIC] = torch.zeros(rows, len(layout.numeric))
    if layout.categories:
        inputs[CATEGORY] = torch.zeros(rows, len(layout.categories), dtype=torch.long)
    for name, *_ in layout.texts:
        inputs[text_key(name)] = torch.ones(rows, 3, dtype=torch.long)
    return inputs


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
    artifact = write(saved.model, saved.layout, tmp)
    (tmp / "meta.json").write_text(json.dumps(saved.meta, indent=2, sort_keys=True, default=str))
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    return target / artifact


def _write_members(model: EnsembleModel, layout: Layout, folder: Path) -> str:
    """Each member in its family's own format, in a folder of its name, and the weights."""
    for name, member in model.members.items():
        (folder / name).mkdir()
        WRITERS[family(name).export_formats[0]](member, layout, folder / name)
    (folder / "ensemble.json").write_text(json.dumps({"weights": model.weights}, indent=2))
    return "ensemble.json"


def _write_lightgbm(model: TreeModel, layout: Layout, folder: Path) -> str:
    """The booster as LightGBM's text model, and its export.json."""
    model.booster.save_model(str(folder / BOOSTER_FILE))
    described = {
        "format": "lightgbm",
        "features": feature_names(layout),
        "columns": [*layout.numeric, *(name for name, *_ in layout.categories)],
        "categorical": categorical_indices(layout),
        "outputs": _outputs(layout),
    }
    (folder / "export.json").write_text(json.dumps(described, indent=2))
    return BOOSTER_FILE


def _write_torchscript(model, layout: Layout, folder: Path) -> str:
    """The network traced to TorchScript, and its export.json."""
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), (example_inputs(layout),), strict=False)
    traced.save(str(folder / ARTIFACT))
    described = {"format": "torchscript", "inputs": _inputs(layout), "outputs": _outputs(layout)}
    (folder / "export.json").write_text(json.dumps(described, indent=2))
    return ARTIFACT


def _write_onnx(model, layout: Layout, folder: Path) -> str:
    """The network as ONNX (torch's TorchScript-based exporter, opset ONNX_OPSET): one named
    input per tensor group, one output of logits per output feature, any number of rows (and
    of tokens per text)."""
    inputs = example_inputs(layout)
    names = list(inputs)
    outputs = [spec.name for spec in layout.outputs]
    dynamic = {name: {0: "rows"} for name in names}
    for name, *_ in layout.texts:  # each its own length: one name would tie them together
        dynamic[text_key(name)] = {0: "rows", 1: f"{text_key(name)}.tokens"}
    dynamic.update({name: {0: "rows"} for name in outputs})
    with torch.no_grad():
        torch.onnx.export(
            model.eval(),
            (inputs, {}),  # the dict as one positional argument (an empty kwargs dict last)
            str(folder / ONNX_ARTIFACT),
            input_names=names,
            output_names=outputs,
            dynamic_axes=dynamic,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    described = {
        "format": "onnx",
        "opset": ONNX_OPSET,
        "inputs": _inputs(layout),
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


# Each export format's writer (Family.export_formats names them): (model, layout, folder) ->
# the artifact's name in folder, with its export.json beside it.
WRITERS: dict[str, Callable[[Any, Layout, Path], str]] = {
    "torchscript": _write_torchscript,
    "onnx": _write_onnx,
    "lightgbm": _write_lightgbm,
    "members": _write_members,
}
