"""command=export: the network as TorchScript. The artifact takes the encoded tensors (the
groups of runner.model.layout: a float matrix of numbers and binaries, an integer matrix of
category codes, a token matrix per text feature) and returns logits per output; export.json
beside it says which column is which, and meta.json holds the encodings (vocabularies,
statistics) that turn raw values into those tensors."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from runner.model.artifact import SavedModel
from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key

ARTIFACT = "model.torchscript.pt"


def example_inputs(layout: Layout, rows: int = 2) -> dict[str, torch.Tensor]:
    inputs: dict[str, torch.Tensor] = {}
    if layout.numeric:
        inputs[NUMERIC] = torch.zeros(rows, len(layout.numeric))
    if layout.categories:
        inputs[CATEGORY] = torch.zeros(rows, len(layout.categories), dtype=torch.long)
    for name, *_ in layout.texts:
        inputs[text_key(name)] = torch.ones(rows, 3, dtype=torch.long)
    return inputs


def export_torchscript(saved: SavedModel, target: Path) -> Path:
    """Writes target/model.torchscript.pt, meta.json and export.json; returns the artifact's path."""
    network = saved.network.eval()
    with torch.no_grad():
        traced = torch.jit.trace(network, (example_inputs(saved.layout),), strict=False)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    traced.save(str(tmp / ARTIFACT))
    (tmp / "meta.json").write_text(json.dumps(saved.meta, indent=2, sort_keys=True, default=str))
    layout = saved.layout
    described = {
        "format": "torchscript",
        "inputs": {
            NUMERIC: {"dtype": "float32", "columns": layout.numeric},
            CATEGORY: {"dtype": "int64", "columns": [name for name, *_ in layout.categories]},
            **{
                text_key(name): {"dtype": "int64", "token buckets": buckets}
                for name, buckets, _ in layout.texts
            },
        },
        "outputs": {
            spec.name: {"type": spec.type, "size": spec.size, "classes": spec.labels}
            for spec in layout.outputs
        },
    }
    (tmp / "export.json").write_text(json.dumps(described, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    return target / ARTIFACT
