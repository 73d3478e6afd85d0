"""The model seam: what every model family gives scoring, and how its model/ dir is written
and read.

A trained model, whatever its family, is a `ScoringModel`: called on a batch's input groups (the
loader's tensors: runner.model.layout's NUMERIC matrix, CATEGORY codes, a token matrix per text)
it returns the logits of each output in the network's conventions (a binary output's log-odds,
a category's unnormalized log-probabilities, a number in the target's normalized units). So the
one scoring path (runner.scoring), its decoders and metrics, the Predictor, batch scoring, the
Ray actor pool and serving hold no family's code. A `Family` saves and loads its models; the
training side of a family (how it fits from the cached splits) lives in runner.training.fitting;
the registry of families by name in runner.model.registry.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from runner.config import ModelConfig
from runner.model.layout import Layout


@runtime_checkable
class ScoringModel(Protocol):
    def __call__(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Logits per output for a batch of processed rows."""

    def eval(self):
        """Inference mode (dropout off); returns the model."""


class Family(Protocol):
    """A model family: how its model/ dir is written and read, and what the commands ask of
    it instead of its model's type. Fitting is runner.training.fitting's for the built-in
    families (training sits above scoring); a family from a module of its own (model.family=
    <module>, runner.model.registry) fits itself: `fit(job)` with a FitJob, returning a
    TrainingResult."""

    name: str
    files: tuple[str, ...]  # what its model/ dir holds besides meta.json and config.yaml
    # command=export's formats (runner.model.export WRITERS), its own first (format=auto)
    export_formats: tuple[str, ...]
    # command=explain's method (runner.scoring.explain EXPLAINERS); "" where it has none
    explain_method: str
    packages: tuple[str, ...]  # what its saved model scores with beyond torch (MLflow's pyfunc)

    def save(self, model: ScoringModel, directory: Path) -> None: ...

    def load(self, directory: Path, layout: Layout, settings: ModelConfig) -> ScoringModel: ...


class OnnxFamily(Protocol):
    """A family whose export_formats has "onnx" also has this."""

    def onnx_graph(self, model: ScoringModel, layout: Layout) -> Any:
        """The model as an onnx.ModelProto that takes the layout's tensor groups by name and
        gives each output's logits (runner.model.onnx_graph)."""


def against_reference(model: ScoringModel):
    """A context in which `model` may score rows that differ from the first it scored in it in
    a few columns for less (permutation importance: a tree model through the trees that split
    on them, runner/model/changed_columns.py); a model without the means scores as always."""
    means = getattr(model, "against_reference", None)
    return means() if means is not None else nullcontext()
