"""Models as ONNX graphs that take the encoded tensors (runner.model.layout's groups, one named
input each) and give each output's logits, as the ScoringModel seam does: the trees through
onnxmltools' LightGBM converter, members of an ensemble joined into one graph with their
weights. The network's graph is torch's (runner.model.network)."""

from __future__ import annotations

import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from runner.errors import UserError
from runner.model.layout import CATEGORY, NUMERIC, Layout, OutputSpec, text_key

OPSET = 17  # the default domain's
ML_OPSET = 1  # ai.onnx.ml's: TreeEnsembleRegressor
ML_DOMAIN = "ai.onnx.ml"
CONVERTER_OPSET = 15  # the newest onnxmltools 1.16 converts LightGBM at
ROWS = "rows"
FEATURES = "tree_features"


def example_inputs(layout: Layout, rows: int = 2) -> dict[str, torch.Tensor]:
    inputs: dict[str, torch.Tensor] = {}
    if layout.numeric:
        inputs[NUMERIC] = torch.zeros(rows, len(layout.numeric))
    if layout.categories:
        inputs[CATEGORY] = torch.zeros(rows, len(layout.categories), dtype=torch.long)
    for name, *_ in layout.texts:
        inputs[text_key(name)] = torch.ones(rows, 3, dtype=torch.long)
    return inputs


def network_graph(network: torch.nn.Module, layout: Layout) -> onnx.ModelProto:
    """The network through torch's TorchScript-based exporter (which needs onnx alone; the newer
    one would need onnxscript): any number of rows, and of tokens per text."""
    inputs = example_inputs(layout)
    outputs = [spec.name for spec in layout.outputs]
    dynamic = {name: {0: ROWS} for name in [*inputs, *outputs]}
    for name, *_ in layout.texts:  # each its own length: one name would tie them together
        dynamic[text_key(name)] = {0: ROWS, 1: f"{text_key(name)}.tokens"}
    with tempfile.TemporaryDirectory() as folder, torch.no_grad():
        torch.onnx.export(
            network.eval(),
            (inputs, {}),  # the dict as one positional argument (an empty kwargs dict last)
            f"{folder}/network.onnx",
            input_names=list(inputs),
            output_names=outputs,
            dynamic_axes=dynamic,
            opset_version=OPSET,
            dynamo=False,
        )
        return onnx.load(f"{folder}/network.onnx")


def float32_thresholds(model_text: str) -> str:
    """A LightGBM model text with each numeric split's threshold t replaced by the largest float32
    at or below t. LightGBM compares a float32 input x with t in double, onnxruntime in float: a t
    rounded up to float would send an x between the two the other way. For every float32 x,
    x <= t exactly when x <= that float, so the booster's answers do not change. The header's
    tree_sizes (each tree's length in bytes, for a parallel read) goes: LightGBM then reads the
    trees one after the other."""
    lines = [line for line in model_text.split("\n") if not line.startswith("tree_sizes=")]
    threshold_at = -1
    for i, line in enumerate(lines):
        if line.startswith("Tree="):
            threshold_at = -1
        elif line.startswith("threshold="):
            threshold_at = i
        elif line.startswith("decision_type=") and threshold_at >= 0:
            kinds = [int(v) for v in line.split("=", 1)[1].split()]
            values = lines[threshold_at].split("=", 1)[1].split()
            lines[threshold_at] = "threshold=" + " ".join(
                value if kind & 1 else repr(_float32_at_or_below(float(value)))  # 1: categorical
                for kind, value in zip(kinds, values, strict=True)
            )
    return "\n".join(lines)


def _float32_at_or_below(t: float) -> float:
    f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(-np.inf))
    return float(f)


def tree_graph(booster, layout: Layout) -> onnx.ModelProto:
    """The booster's raw scores (the trees' logits) for the first output, from the numeric matrix
    and the category codes (as LightGBM's categoricals: onnxmltools turns a split on a set of
    categories into equality tests)."""
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    from runner.fast_start import import_lightgbm

    best = booster.best_iteration
    text = booster.model_to_string(num_iteration=best if best > 0 else -1)
    exact = import_lightgbm().Booster(model_str=float32_thresholds(text))
    width = len(layout.numeric) + len(layout.categories)
    converted = convert_lightgbm(
        exact,
        initial_types=[(FEATURES, FloatTensorType([None, width]))],
        target_opset=CONVERTER_OPSET,
        zipmap=False,
    )
    (trees,) = [n for n in converted.graph.node if n.op_type.startswith("TreeEnsemble")]
    spec = layout.outputs[0]
    node = _raw_score_regressor(trees, spec)
    inputs, nodes = _tree_inputs(layout)
    return _model(
        helper.make_graph(
            [*nodes, node],
            "trees",
            inputs,
            [_tensor(spec.name, TensorProto.FLOAT, spec.size)],
        )
    )


def _raw_score_regressor(trees: onnx.NodeProto, spec: OutputSpec) -> onnx.NodeProto:
    """onnxmltools' classifier or regressor node as a regressor of raw scores: the same nodes
    and leaf values, no sigmoid or softmax after them (multiclass: one target per class)."""
    attributes = {a.name: helper.get_attribute_value(a) for a in trees.attribute}
    leaves = "class" if "class_ids" in attributes else "target"
    kept = {name: value for name, value in attributes.items() if name.startswith("nodes_")}
    if "base_values" in attributes:
        kept["base_values"] = attributes["base_values"]
    return helper.make_node(
        "TreeEnsembleRegressor",
        [FEATURES],
        [spec.name],
        domain=ML_DOMAIN,
        n_targets=spec.size,
        post_transform="NONE",
        target_ids=attributes[f"{leaves}_ids"],
        target_nodeids=attributes[f"{leaves}_nodeids"],
        target_treeids=attributes[f"{leaves}_treeids"],
        target_weights=attributes[f"{leaves}_weights"],
        **kept,
    )


def _tree_inputs(layout: Layout) -> tuple[list[onnx.ValueInfoProto], list[onnx.NodeProto]]:
    """The graph's inputs and the nodes that make the trees' one float matrix of them."""
    inputs, parts, nodes = [], [], []
    if layout.numeric:
        inputs.append(_tensor(NUMERIC, TensorProto.FLOAT, len(layout.numeric)))
        parts.append(NUMERIC)
    if layout.categories:
        inputs.append(_tensor(CATEGORY, TensorProto.INT64, len(layout.categories)))
        nodes.append(helper.make_node("Cast", [CATEGORY], ["category_codes"], to=1))
        parts.append("category_codes")
    nodes.append(helper.make_node("Concat", parts, [FEATURES], axis=1))
    return inputs, nodes


# How an ensemble averages each output type (runner.model.ensemble, the heads' to_space and
# to_logits): probabilities for binary and category, the normalized value for a number.
AVERAGED_TYPES = ("binary", "category", "number")


def ensemble_graph(
    members: dict[str, onnx.ModelProto], weights: dict[str, float], layout: Layout
) -> onnx.ModelProto:
    """One graph of the members' graphs (each under its name's prefix, fed the shared inputs)
    and their weighted average per output, computed in double as the ensemble computes it."""
    from runner.processing.features.model_side.base import EPS

    nodes: list[onnx.NodeProto] = []
    initializers: list[onnx.TensorProto] = []
    inputs: dict[str, onnx.ValueInfoProto] = {}
    weighted = {name: w for name, w in weights.items() if w > 0}
    for name in weighted:
        prefix = f"{name}/"
        graph = onnx.compose.add_prefix(members[name], prefix).graph
        for value in graph.input:
            shared = onnx.ValueInfoProto()
            shared.CopyFrom(value)
            shared.name = value.name[len(prefix) :]
            inputs.setdefault(shared.name, shared)
            nodes.append(helper.make_node("Identity", [shared.name], [value.name]))
        nodes.extend(graph.node)
        initializers.extend(graph.initializer)
    outputs = []
    for spec in layout.outputs:
        if spec.type not in AVERAGED_TYPES:
            raise UserError(f"an ensemble's ONNX graph has no average for a {spec.type} output")
        total = ""
        for name, weight in weighted.items():
            space = _to_space(nodes, spec, f"{name}/{spec.name}", f"{name}/{spec.name}.space")
            term = f"{name}/{spec.name}.weighted"
            nodes.append(_times(space, weight, term, initializers))
            if total:
                nodes.append(helper.make_node("Add", [total, term], [f"{term}.sum"]))
                term = f"{term}.sum"
            total = term
        nodes.append(
            helper.make_node(
                "Cast",
                [_to_logits(nodes, spec, total, EPS, initializers)],
                [spec.name],
                to=TensorProto.FLOAT,
            )
        )
        outputs.append(_tensor(spec.name, TensorProto.FLOAT, spec.size))
    order = [name for name in [NUMERIC, CATEGORY] if name in inputs]
    order += sorted(set(inputs) - set(order))
    graph = helper.make_graph(
        nodes, "ensemble", [inputs[n] for n in order], outputs, initializer=initializers
    )
    return _model(graph, max(m.ir_version for m in members.values()))


def _to_space(nodes: list, spec: OutputSpec, logits: str, out: str) -> str:
    nodes.append(helper.make_node("Cast", [logits], [f"{out}.double"], to=TensorProto.DOUBLE))
    if spec.type == "binary":
        nodes.append(helper.make_node("Sigmoid", [f"{out}.double"], [out]))
    elif spec.type == "category":
        nodes.append(helper.make_node("Softmax", [f"{out}.double"], [out], axis=-1))
    else:
        return f"{out}.double"
    return out


def _to_logits(nodes: list, spec: OutputSpec, averaged: str, eps: float, initializers) -> str:
    if spec.type == "number":
        return averaged
    low = _constant(f"{spec.name}.eps", eps, initializers)
    if spec.type == "category":
        nodes.append(helper.make_node("Max", [averaged, low], [f"{averaged}.clipped"]))
        nodes.append(helper.make_node("Log", [f"{averaged}.clipped"], [f"{spec.name}.logits"]))
        return f"{spec.name}.logits"
    high = _constant(f"{spec.name}.1-eps", 1 - eps, initializers)
    one = _constant(f"{spec.name}.one", 1.0, initializers)
    p = f"{averaged}.clipped"
    nodes += [
        helper.make_node("Clip", [averaged, low, high], [p]),
        helper.make_node("Sub", [one, p], [f"{p}.rest"]),
        helper.make_node("Div", [p, f"{p}.rest"], [f"{p}.odds"]),
        helper.make_node("Log", [f"{p}.odds"], [f"{spec.name}.logits"]),
    ]
    return f"{spec.name}.logits"


def _times(value: str, weight: float, out: str, initializers: list) -> onnx.NodeProto:
    return helper.make_node("Mul", [value, _constant(f"{out}.weight", weight, initializers)], [out])


def _constant(name: str, value: float, initializers: list) -> str:
    initializers.append(helper.make_tensor(name, TensorProto.DOUBLE, [], [value]))
    return name


def _tensor(name: str, kind: int, columns: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, kind, [ROWS, columns])


def _model(graph: onnx.GraphProto, ir_version: int = 8) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(ML_DOMAIN, ML_OPSET)],
        ir_version=ir_version,
    )
    onnx.checker.check_model(model)
    return model
