"""The one scoring path: a model over evaluation chunks, in inference mode, on a
device and precision. Validation during training, the test split, predict and
evaluate all go through `score`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from runner.model.base import ScoringModel
from runner.model.layout import Layout

if TYPE_CHECKING:
    from runner.loading.tensors import TensorTable

# trainer.precision -> autocast dtype (None: full precision)
AUTOCAST = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class ForwardPass:
    """Moves inputs to the device and runs the model under the precision's autocast."""

    def __init__(self, model: ScoringModel, device: torch.device, autocast_dtype=None):
        self.model, self.device, self.autocast_dtype = model, device, autocast_dtype

    def to_device(self, tensors: dict) -> dict:
        if self.device.type == "cpu":
            return tensors
        return {k: v.to(self.device, non_blocking=True) for k, v in tensors.items()}

    def autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        )

    def chunks(self, chunks: Iterable) -> Iterator[tuple[TensorTable, dict[str, torch.Tensor]]]:
        """Evaluation chunks moved to the device, outputs back on the CPU in float32."""
        if getattr(self.model, "training", True):  # a module's eval() walks its children
            self.model.eval()
        for chunk in chunks:
            with torch.inference_mode(), self.autocast():
                outputs = self.model(self.to_device(chunk.inputs))
            yield chunk, {k: v.float().cpu() for k, v in outputs.items()}


@dataclass
class Scored:
    """Model outputs over a split, with the targets and raw row numbers they belong to."""

    logits: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    row_ids: np.ndarray


def score(
    model: ScoringModel, chunks: Iterable, layout: Layout, forward: ForwardPass | None = None
) -> Scored:
    """Runs the model over evaluation chunks (TensorTables) in inference mode."""
    forward = forward or ForwardPass(model, torch.device("cpu"))
    logits: dict[str, list] = {spec.name: [] for spec in layout.outputs}
    targets: dict[str, list] = {spec.name: [] for spec in layout.outputs}
    rows = []
    for chunk, outputs in forward.chunks(chunks):
        for name, z in outputs.items():
            logits[name].append(z.numpy())
        for name, y in chunk.targets.items():
            targets[name].append(y.numpy())
        rows.append(chunk.row_ids.numpy())
    # Unlabelled data (predict) has no targets; an empty shard still reports empty ones.
    with_targets = any(targets.values()) or not rows
    return Scored(
        stack_outputs(layout, logits, "logits"),
        stack_outputs(layout, targets, "targets") if with_targets else {},
        np.concatenate(rows) if rows else np.zeros(0, np.int64),
    )


def stack_outputs(layout: Layout, parts: dict[str, list], kind: str) -> dict[str, np.ndarray]:
    """Concatenated per-output arrays; a worker with no rows still returns every output (empty)."""
    out = {}
    for spec in layout.outputs:
        if parts[spec.name]:
            out[spec.name] = np.concatenate(parts[spec.name])
        elif kind == "logits":
            out[spec.name] = np.zeros((0, spec.size), np.float32)
        else:
            out[spec.name] = spec.head.empty_target(spec)
    return out


def concat_scored(parts: list[Scored]) -> Scored:
    """Scored partitions (in order) as one."""
    if len(parts) == 1:
        return parts[0]
    names = parts[0].logits.keys()
    return Scored(
        {n: np.concatenate([p.logits[n] for p in parts]) for n in names},
        {n: np.concatenate([p.targets[n] for p in parts]) for n in parts[0].targets},
        np.concatenate([p.row_ids for p in parts]),
    )
