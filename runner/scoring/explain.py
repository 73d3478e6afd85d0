"""command=explain: why each row got its prediction. Per row and per input an attribution that,
added to the row's base value, gives the model's output for the row:

    output = base + the sum of the row's attribution.<input> columns

Explained is the first output (as permutation importance): a binary output's log-odds, a
number in the target's normalized units, a category's logit of the class the model predicts
for the row (the `class` column). Each family explains itself:

  network   integrated gradients (Sundararajan et al., 2017) from one baseline row, the
            all-zero processed row: every number at its training mean (numbers are
            standardized) and not missing, every category at its unknown code, every text
            empty. The path runs straight from the baseline's encodings to the row's (the
            numbers' encoding, each category's and text's embedding: what the network's
            layers take), on explain.steps Gauss-Legendre points, and each value's share goes
            to the input it encodes; base is the network's output on the baseline. The sum
            meets the output within the quadrature's error (the ReLUs' kinks): under 0.01
            logits at 64 steps on the tests' networks.
  gbm       LightGBM's exact TreeSHAP (predict with pred_contrib); base is the trees' expected
            output on their training rows.
  ensemble  the output and base in the space its members are averaged in (a probability, the
            normalized number): each member's attributions scaled by (its value there - its
            base there) / (its output - its base), then weighted as the ensemble weighs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from runner.config import TREE_OUTPUT_TYPES
from runner.errors import UserError
from runner.loading.tensors import TensorTable
from runner.model.ensemble import EnsembleModel
from runner.model.gbm import TreeModel
from runner.model.layout import CATEGORY, NUMERIC, Layout, OutputSpec, feature_columns, text_key
from runner.model.registry import family
from runner.model.tree_features import feature_matrix

IG_CHUNK_ROWS = 2048  # rows per integrated-gradients pass (its graph holds one step at a time)


@dataclass
class Explanation:
    logits: np.ndarray  # [rows, size]: the model's output
    base_logits: np.ndarray  # [rows, size]: its base value
    attributions: np.ndarray  # [rows, inputs]: of the explained logit
    chosen: np.ndarray  # [rows]: the explained logit (a category's class; 0 otherwise)

    def explained(self, values: np.ndarray) -> np.ndarray:
        return values[np.arange(len(values)), self.chosen]


def explain_processed(predictor, table: pa.Table, steps: int = 64) -> pd.DataFrame:
    """Rows already through the feature transforms -> one row each: `row`, `class` (a
    category output), `output`, `base`, and attribution.<input> per input."""
    layout, spec = predictor.layout, predictor.layout.outputs[0]
    if spec.type not in TREE_OUTPUT_TYPES:
        raise UserError(
            f"command=explain explains a binary, category or number output; {spec.name} is "
            f"{spec.type}"
        )
    data = TensorTable.from_arrow(table, layout, False, exact=True)
    inputs = {name: tensor.cpu() for name, tensor in data.inputs.items()}
    owners = _owners(layout, predictor.input_names)
    model = predictor.saved.model.eval()
    method = explain_method(predictor.saved.settings.family)
    if method == MEMBERS:
        output, base, attributions, chosen = _ensemble(model, inputs, layout, spec, owners, steps)
    else:
        found = EXPLAINERS[method](model, inputs, layout, spec, owners, steps, None)
        output, base = found.explained(found.logits), found.explained(found.base_logits)
        attributions, chosen = found.attributions, found.chosen
    frame = pd.DataFrame({"row": data.row_ids.numpy()})
    if spec.type == "category":
        frame["class"] = np.asarray(spec.labels, dtype=object)[chosen]
    frame["output"] = output.astype(np.float64)
    frame["base"] = base.astype(np.float64)
    for i, name in enumerate(predictor.input_names):
        frame[f"attribution.{name}"] = attributions[:, i].astype(np.float64)
    return frame


def explain_method(name: str) -> str:
    """How command=explain explains model.family=`name` (Family.explain_method)."""
    method = family(name).explain_method
    if method != MEMBERS and method not in EXPLAINERS:
        raise UserError(
            f"command=explain cannot explain model.family={name} (its explain_method is "
            f"{method!r}; one of {', '.join([*EXPLAINERS, MEMBERS])} explains)"
        )
    return method


def _owners(layout: Layout, input_names: list[str]) -> np.ndarray:
    """[columns, inputs] 0/1: which input owns each explained column (the numeric columns, then
    each category, then each text: the network's encodings in order; the trees' features are the
    first two groups)."""
    numeric_owner = {
        column: input_names.index(name)
        for name, columns in feature_columns(layout.numeric, input_names).items()
        for column in columns
    }
    indices = [numeric_owner[column] for column in layout.numeric]
    indices += [input_names.index(name) for name, *_ in (*layout.categories, *layout.texts)]
    owners = np.zeros((len(indices), len(input_names)))
    owners[np.arange(len(indices)), indices] = 1.0
    return owners


def _trees(model: TreeModel, inputs, layout, spec, owners, steps, chosen) -> Explanation:
    matrix = feature_matrix(inputs, layout)
    contributions = model.predict(matrix, pred_contrib=True)
    rows, columns = matrix.shape
    # [rows, classes, columns + 1]: per class, each feature's share, then the expected value
    contributions = np.asarray(contributions, np.float64).reshape(rows, spec.size, columns + 1)
    logits = contributions.sum(axis=2)
    if chosen is None:
        chosen = logits.argmax(axis=1)
    shares = contributions[np.arange(rows), chosen, :columns]
    return Explanation(logits, contributions[:, :, columns], shares @ owners[:columns], chosen)


def _network(model, inputs, layout, spec, owners, steps, chosen) -> Explanation:
    rows = len(next(iter(inputs.values())))
    device = next(model.parameters()).device  # a GPU actor's network is on its GPU
    inputs = {name: tensor.to(device) for name, tensor in inputs.items()}
    baseline = {
        NUMERIC: torch.zeros(1, len(layout.numeric)),
        CATEGORY: torch.zeros(1, len(layout.categories), dtype=torch.long),
        **{text_key(name): torch.zeros(1, 1, dtype=torch.long) for name, *_ in layout.texts},
    }
    baseline = {name: tensor.to(device) for name, tensor in baseline.items()}
    with torch.no_grad():
        logits = model(inputs)[spec.name].double().cpu().numpy()
        base_encoded = _encodings(model, baseline, layout)
        base_logits = model.from_encodings(base_encoded)[spec.name].double().cpu().numpy()
        base_logits = base_logits.repeat(rows, axis=0)
    if chosen is None:
        chosen = logits.argmax(axis=1)
    shares = np.zeros((rows, owners.shape[0]))
    for low in range(0, rows, IG_CHUNK_ROWS):
        chunk = {name: tensor[low : low + IG_CHUNK_ROWS] for name, tensor in inputs.items()}
        picked = torch.as_tensor(chosen[low : low + IG_CHUNK_ROWS], device=device)[:, None]
        shares[low : low + len(picked)] = _integrated_gradients(
            model, chunk, layout, spec, picked, base_encoded, steps
        )
    return Explanation(logits, base_logits, shares @ owners, chosen)


def _integrated_gradients(
    model, inputs, layout, spec, picked, base_encoded, steps: int
) -> np.ndarray:
    """[rows, columns]: each number column's and each embedding's share of the picked logit."""
    with torch.no_grad():
        encoded = _encodings(model, inputs, layout)
    points, weights = np.polynomial.legendre.leggauss(steps)
    summed = [torch.zeros_like(e) for e in encoded]
    with torch.enable_grad():
        for point, weight in zip((points + 1) / 2, weights / 2, strict=True):
            path = [
                (b + point * (e - b)).requires_grad_()
                for e, b in zip(encoded, base_encoded, strict=True)
            ]
            picked_logit = model.from_encodings(path)[spec.name].gather(1, picked)
            for total, grad in zip(
                summed, torch.autograd.grad(picked_logit.sum(), path), strict=True
            ):
                total += weight * grad
    shares = [(e - b) * g for e, b, g in zip(encoded, base_encoded, summed, strict=True)]
    columns = []
    if layout.numeric:  # each value of the numbers' encoding to the column it comes from
        first = shares.pop(0)
        numbers = torch.zeros(len(first), len(layout.numeric), dtype=first.dtype)
        numbers.index_add_(1, model.number_sources(), first.cpu())
        columns.append(numbers)
    columns += [share.sum(dim=1, keepdim=True).cpu() for share in shares]
    return torch.cat(columns, dim=1).double().numpy()


def _encodings(model, inputs, layout) -> list[torch.Tensor]:
    """What from_encodings takes: the numbers' encoding, then each embedding."""
    numbers = [model.encode_numbers(inputs[NUMERIC].float())] if layout.numeric else []
    return [*numbers, *model.embed(inputs)]


def _ensemble(model: EnsembleModel, inputs, layout, spec: OutputSpec, owners, steps: int):
    """(output, base, attributions, chosen) in the members' averaging space."""
    with torch.no_grad():
        logits = model(inputs)[spec.name].double().cpu().numpy()
    chosen = logits.argmax(axis=1)
    rows = np.arange(len(logits))
    output = base = attributions = 0.0
    for name, member in model.members.items():
        weight = model.weights[name]
        if weight <= 0:
            continue
        explain = EXPLAINERS[explain_method(model.families[name])]
        found = explain(member, inputs, layout, spec, owners, steps, chosen)
        value = spec.head.to_space(found.logits)[rows, chosen]
        value_base = spec.head.to_space(found.base_logits)[rows, chosen]
        moved = found.explained(found.logits) - found.explained(found.base_logits)
        scale = np.divide(
            value - value_base, moved, out=np.zeros_like(moved), where=np.abs(moved) > 1e-12
        )
        output = output + weight * value
        base = base + weight * value_base
        attributions = attributions + weight * scale[:, None] * found.attributions
    return np.asarray(output), np.asarray(base), np.asarray(attributions), chosen


# Each explain method (Family.explain_method names them): (model, inputs, layout, spec,
# owners, steps, chosen) -> its Explanation. MEMBERS: an ensemble's, each member's weighted.
EXPLAINERS: dict[str, Callable[..., Explanation]] = {
    "tree SHAP": _trees,
    "integrated gradients": _network,
}
MEMBERS = "members"
