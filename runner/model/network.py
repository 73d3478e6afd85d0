"""The network: one encoder per feature group, a combiner over their encodings, one head per
output.

Combiners (`model.combiner`): `concat` (the default: the encodings side by side into an MLP),
`residual` (the same, with residual blocks: deeper without losing the gradient) and
`transformer` (FT-Transformer style: every feature becomes a token, a [CLS] token reads
them through self-attention; Gorishniy et al., 2021).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from runner.config import ModelConfig
from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key
from runner.processing.features.model_side import model_side


class TextEncoder(nn.Module):
    """Mean of a row's token embeddings (text words and pairs, or set members); id 0 is padding.
    The embeddings start small (std 0.1, not 1): a row's mean then starts near zero instead of
    as noise the size of the signal. Measured in the accuracy suite: the review table's ROC AUC
    0.75 (std 1) -> 0.86 (0.1 and 0.01); the loans table's short job titles prefer larger
    (accuracy 0.44 at 1, 0.42 at 0.1, 0.39 at 0.01), so 0.1. With `token_dropout`, training
    replaces that share of the tokens by the unknown token (id 1), which is what a word never
    seen in training becomes: the model learns what to make of it, and leans less on any one
    word. With token counts and `rare_token_dropout` (alpha), a token seen c times in training
    is dropped with probability alpha / (alpha + c) besides (word dropout by frequency,
    Kiperwasser & Goldberg, 2016): a word seen twice is mostly the unknown token in training,
    so its embedding, fitted on two rows, cannot carry a row's prediction (measured in
    docs/accuracy.md: the movie table's short titles R² 0.22 -> 0.28 at alpha 20)."""

    drop: torch.Tensor  # a buffer (register_buffer)

    def __init__(
        self,
        size: int,
        dim: int,
        token_dropout: float = 0.0,
        counts: list[int] | None = None,
        rare_token_dropout: float = 0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(size, dim, padding_idx=0)
        drop = torch.full((size,), float(token_dropout))
        if counts and rare_token_dropout > 0:
            seen = torch.tensor(counts, dtype=torch.float32)
            rare = rare_token_dropout / (rare_token_dropout + seen)
            drop[2 : 2 + len(seen)] = 1.0 - (1.0 - token_dropout) * (1.0 - rare)
        drop[:2] = 0.0  # padding and the unknown token itself
        # Each token id's drop probability in training (not saved: rebuilt from the layout).
        self.register_buffer("drop", drop, persistent=False)
        self.dropping = bool((drop > 0).any())
        nn.init.normal_(self.embedding.weight, std=0.1)
        with torch.no_grad():
            self.embedding.weight[0].zero_()  # padding stays zero

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        present = tokens > 0
        if self.training and self.dropping:
            dropped = torch.rand(tokens.shape, device=tokens.device) < self.drop[tokens]
            tokens = torch.where(dropped, torch.ones_like(tokens), tokens)
        vectors = self.embedding(tokens)
        counts = present.sum(dim=1, keepdim=True).clamp(min=1)
        return vectors.sum(dim=1) / counts


class PeriodicEncoder(nn.Module):
    """Number columns as periodic embeddings with learned frequencies (PLR: periodic, linear,
    ReLU; Gorishniy et al., 2022): lets an MLP draw sharp, non-monotonic shapes per column."""

    def __init__(self, columns: int, dim: int, frequencies: int = 16, sigma: float = 1.0):
        super().__init__()
        self.frequencies = nn.Parameter(torch.randn(columns, frequencies) * sigma)
        self.weight = nn.Parameter(
            torch.randn(columns, 2 * frequencies, dim) / (2 * frequencies) ** 0.5
        )
        self.bias = nn.Parameter(torch.zeros(columns, dim))
        self.width = columns * dim

    def forward(self, numbers: torch.Tensor) -> torch.Tensor:
        angles = 2 * torch.pi * numbers.unsqueeze(2) * self.frequencies  # [rows, columns, k]
        periodic = torch.cat([torch.sin(angles), torch.cos(angles)], dim=2)
        out = torch.relu(torch.einsum("bnk,nkd->bnd", periodic, self.weight) + self.bias)
        return out.flatten(1)

    def source_columns(self) -> torch.Tensor:
        """The number column each value of the encoding comes from."""
        return torch.arange(self.weight.shape[0]).repeat_interleave(self.weight.shape[2])


class PiecewiseLinearEncoder(nn.Module):
    """Number columns as piecewise-linear encodings (PLE; Gorishniy et al., 2022): per column,
    one value per quantile bin of the training split (bin edges from preprocessing): 0 below
    the bin, 1 above it, the position inside it in between (the first and last bins extend
    linearly past the data). The MLP then draws a column's shape bin by bin, as a tree's
    thresholds do, at the cost of a wider first layer (and no parameters here without
    `features`). Columns without bins (binary flags, a date's parts, constant columns) pass
    through; every column's value is kept beside its bins. With `features`
    (model.bin_features), each column's bins go through its own linear layer and a ReLU to
    that many values instead (PLE-Q-LR)."""

    # Buffers (register_buffer).
    columns: torch.Tensor
    scale: torch.Tensor
    shift: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, edges: list[list[float]], features: int = 0):
        super().__init__()
        binned = [j for j, e in enumerate(edges) if len(e) >= 2]
        most = max((len(edges[j]) - 1 for j in binned), default=0)
        # Per binned column, x * scale + shift is the position in each of its `most` bins;
        # padding bins (a column with fewer) have scale 0 and shift -1e9, so they stay 0 after
        # the clamp. One multiply-add and one clamp per batch: this runs at every step.
        scale = torch.zeros(len(binned), max(most, 1))
        shift = torch.full((len(binned), max(most, 1)), -1e9)
        low = torch.zeros(len(binned), max(most, 1))
        high = torch.ones(len(binned), max(most, 1))
        for i, j in enumerate(binned):
            e = torch.tensor(edges[j], dtype=torch.float64)
            k = len(e) - 1
            width = (e[1:] - e[:-1]).clamp(min=1e-6)
            scale[i, :k] = (1.0 / width).float()
            shift[i, :k] = (-e[:-1] / width).float()
            low[i, 0] = -torch.inf  # the first bin goes on below the smallest value seen
            high[i, k - 1] = torch.inf  # the last one above the largest
        self.register_buffer("columns", torch.tensor(binned, dtype=torch.long), persistent=False)
        self.register_buffer("scale", scale, persistent=False)
        self.register_buffer("shift", shift, persistent=False)
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("high", high, persistent=False)
        # model.bin_features: each column's bins through its own linear layer and a ReLU.
        self.projection: nn.Parameter | None = None
        self.projection_bias: nn.Parameter | None = None
        if features and binned:
            bound = max(most, 1) ** -0.5  # nn.Linear's initial range
            self.projection = nn.Parameter(
                torch.empty(len(binned), max(most, 1), features).uniform_(-bound, bound)
            )
            self.projection_bias = nn.Parameter(
                torch.empty(len(binned), features).uniform_(-bound, bound)
            )
            most = features
        self.width = len(edges) + len(binned) * most

    def forward(self, numbers: torch.Tensor) -> torch.Tensor:
        if not len(self.columns):
            return numbers
        x = numbers.index_select(1, self.columns).unsqueeze(2)
        position = torch.clamp(torch.addcmul(self.shift, x, self.scale), self.low, self.high)
        if self.projection is not None:  # [columns, rows, bins] @ [columns, bins, features]
            position = torch.bmm(position.transpose(0, 1), self.projection).transpose(0, 1)
            assert self.projection_bias is not None  # set with the projection
            position = torch.relu(position + self.projection_bias)
        return torch.cat([numbers, position.flatten(1)], dim=1)

    def source_columns(self, columns: int) -> torch.Tensor:
        """The number column each value of the encoding comes from (of `columns`)."""
        per_column = (self.width - columns) // max(len(self.columns), 1)
        return torch.cat([torch.arange(columns), self.columns.repeat_interleave(per_column)])


class MemberHeads(nn.Module):
    """One linear head per ensemble member: [rows, k, width] -> [rows, k, size]."""

    def __init__(self, members: int, width: int, size: int):
        super().__init__()
        bound = width**-0.5  # nn.Linear's initial range
        self.weight = nn.Parameter(torch.empty(members, width, size).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, size).uniform_(-bound, bound))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bkw,kws->bks", hidden, self.weight) + self.bias


def mean_of_members(kind: str, logits: torch.Tensor) -> torch.Tensor:
    """The ensemble's prediction from its members' logits [rows, k, size], as logits [rows,
    size]: the mean of the members' probabilities or values, as TabM averages its members
    (each output type's head says which)."""
    return model_side(kind).mean_of_members(logits)


def ensemble_prediction(layout: Layout, logits: dict[str, torch.Tensor]) -> dict:
    """Every output's ensemble prediction from its members' logits (mean_of_members)."""
    return {spec.name: mean_of_members(spec.type, logits[spec.name]) for spec in layout.outputs}


def _mlp(width: int, hidden: int, layers: int, dropout: float) -> tuple[nn.Sequential, int]:
    modules: list[nn.Module] = []
    for _ in range(layers):
        modules += [nn.Linear(width, hidden), nn.ReLU()]
        if dropout > 0:
            modules.append(nn.Dropout(dropout))
        width = hidden
    return nn.Sequential(*modules), width


class _ResidualBlock(nn.Module):
    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.body = nn.Sequential(
            nn.LayerNorm(width),
            nn.Linear(width, 2 * width),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(2 * width, width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResidualCombiner(nn.Module):
    """The encodings side by side, projected, then residual blocks (a ResNet for tables)."""

    def __init__(self, widths: list[int], hidden: int, layers: int, dropout: float):
        super().__init__()
        self.project = nn.Linear(sum(widths), hidden)
        self.blocks = nn.Sequential(*(_ResidualBlock(hidden, dropout) for _ in range(layers)))
        self.out = nn.Sequential(nn.LayerNorm(hidden), nn.ReLU())
        self.width = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The encodings side by side, [rows, width] (or an ensemble's copies, [rows, k, width])."""
        return self.out(self.blocks(self.project(x)))


class TransformerCombiner(nn.Module):
    """Every number column and every embedded feature becomes a token of `token_size`; a
    learned [CLS] token attends to them through `layers` pre-norm Transformer layers."""

    def __init__(self, widths: list[int], numeric: int, settings: ModelConfig):
        super().__init__()
        d = settings.token_size
        self.numeric = numeric
        # One token per number column: value x weight + bias (both learned per column).
        self.number_weight = nn.Parameter(torch.randn(numeric, d) * 0.1)
        self.number_bias = nn.Parameter(torch.zeros(numeric, d))
        embedded = widths[1:] if numeric else widths
        self.projections = nn.ModuleList(nn.Linear(w, d) for w in embedded)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        layer = nn.TransformerEncoderLayer(
            d,
            settings.num_heads,
            dim_feedforward=2 * d,
            dropout=settings.dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, max(settings.num_layers, 1), enable_nested_tensor=False
        )
        self.out = nn.Sequential(nn.LayerNorm(d), nn.ReLU())
        self.width = d

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        tokens = []
        if self.numeric:
            numbers = parts[0]
            tokens.append(numbers.unsqueeze(2) * self.number_weight + self.number_bias)
            parts = parts[1:]
        tokens += [proj(p).unsqueeze(1) for proj, p in zip(self.projections, parts, strict=True)]
        batch = tokens[0].shape[0]
        sequence = torch.cat([self.cls.expand(batch, -1, -1), *tokens], dim=1)
        return self.out(self.encoder(sequence)[:, 0])


def _category_embedding(size: int, dim: int) -> nn.Embedding:
    """A category's embedding, started as the reference implementation of Gorishniy et al.
    starts it: uniform in +-1/sqrt(dim), so a category starts with the norm of about one
    number input instead of sqrt(dim) of them (torch's N(0, 1)), and the category columns do
    not drown the numbers at the MLP's input. Measured (docs/accuracy.md, "Category
    embeddings"): best validation rank of five settings over the 9 suite tables that have
    categories; adult +0.003 ROC AUC, within one SE of gradient boosting on the suite's 3
    splits."""
    # torch draws N(0, 1), then it is redrawn: the measured runs drew both, and so does this.
    embedding = nn.Embedding(size, dim)
    bound = dim**-0.5
    nn.init.uniform_(embedding.weight, -bound, bound)
    return embedding


class TabularModel(nn.Module):
    """Encoders per input group -> combiner -> one head per output. The concat combiner's
    MLP keeps its place (`mlp`) so models saved before the other combiners still load."""

    def __init__(self, layout: Layout, settings: ModelConfig):
        super().__init__()
        self.layout = layout
        self.embeddings = nn.ModuleList(
            _category_embedding(size, dim) for _, size, dim in layout.categories
        )
        self.texts = nn.ModuleDict(
            {
                name: TextEncoder(
                    size,
                    dim,
                    settings.token_dropout if name in layout.unknown_token_texts else 0.0,
                    layout.token_counts.get(name),
                    settings.rare_token_dropout,
                )
                for name, size, dim in layout.texts
            }
        )
        self.periodic = None
        self.piecewise = None
        numeric_width = len(layout.numeric)
        if settings.number_encoding == "periodic" and layout.numeric:
            self.periodic = PeriodicEncoder(len(layout.numeric), settings.embedding_size)
            numeric_width = self.periodic.width
        elif settings.number_encoding == "piecewise" and layout.numeric:
            self.piecewise = PiecewiseLinearEncoder(layout.bin_edges, settings.bin_features)
            numeric_width = self.piecewise.width
        # The width of each encoding, in the order forward passes them to from_encodings.
        widths = (
            [numeric_width] * bool(layout.numeric)
            + [dim for *_, dim in layout.categories]
            + [dim for *_, dim in layout.texts]
        )
        self.combiner: nn.Module | None = None
        if settings.combiner == "transformer":
            self.combiner = TransformerCombiner(widths, len(layout.numeric), settings)
            width = self.combiner.width
        elif settings.combiner == "residual":
            self.combiner = ResidualCombiner(
                widths, settings.hidden_size, settings.num_layers, settings.dropout
            )
            width = self.combiner.width
        else:
            self.mlp, width = _mlp(
                sum(widths), settings.hidden_size, settings.num_layers, settings.dropout
            )
        # TabM-mini (Gorishniy et al., 2024): k members share everything but a sign adapter on
        # the MLP's input (random +-1, trained) and their heads. Training fits every member on
        # every batch (the loss is their mean); prediction averages them.
        self.members, _ = settings.ensemble_members(layout.train_rows)
        self.adapter = None
        if self.members > 1:
            signs = torch.randint(0, 2, (self.members, sum(widths))) * 2.0 - 1.0
            self.adapter = nn.Parameter(signs)
            self.heads = nn.ModuleDict(
                {spec.name: MemberHeads(self.members, width, spec.size) for spec in layout.outputs}
            )
        else:
            self.heads = nn.ModuleDict(
                {spec.name: nn.Linear(width, spec.size) for spec in layout.outputs}
            )

    def encode_numbers(self, numbers: torch.Tensor) -> torch.Tensor:
        if self.periodic is not None:
            return self.periodic(numbers)
        if self.piecewise is not None:
            return self.piecewise(numbers)
        return numbers

    def number_sources(self) -> torch.Tensor:
        """The number column each value of encode_numbers' output comes from."""
        columns = len(self.layout.numeric)
        if self.periodic is not None:
            return self.periodic.source_columns()
        if self.piecewise is not None:
            return self.piecewise.source_columns(columns)
        return torch.arange(columns)

    def embed(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Each category's, then each text's, embedding of the rows, in layout order."""
        parts = []
        if self.layout.categories:
            codes = inputs[CATEGORY]
            parts += [emb(codes[:, i]) for i, emb in enumerate(self.embeddings)]
        parts += [encoder(inputs[text_key(name)]) for name, encoder in self.texts.items()]
        return parts

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Logits per output, [rows, size]; an ensemble in training mode gives each member's,
        [rows, k, size], for the loss to fit every member."""
        numbers = [self.encode_numbers(inputs[NUMERIC])] if self.layout.numeric else []
        return self.from_encodings([*numbers, *self.embed(inputs)])

    def from_encodings(self, parts: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """The logits from the encoded inputs (the numbers' encoding first, then embed()'s):
        where integrated gradients (runner/scoring/explain.py) enters the network."""
        if isinstance(self.combiner, TransformerCombiner):
            hidden = self.combiner(parts)
        else:  # an MLP (plain or residual) over the encodings side by side
            x = torch.cat(parts, dim=1)
            if self.adapter is not None:  # each member's copy, through its sign adapter
                x = x.unsqueeze(1) * self.adapter
            hidden = self.combiner(x) if self.combiner is not None else self.mlp(x)
        logits = {name: head(hidden) for name, head in self.heads.items()}
        if self.adapter is None or self.training:
            return logits
        return ensemble_prediction(self.layout, logits)


def build_model(layout: Layout, model: ModelConfig) -> TabularModel:
    """The network for this data layout and model config."""
    return TabularModel(layout, model)


WEIGHTS_FILE = "weights.pt"


class NetworkFamily:
    name = "network"
    files: tuple[str, ...] = (WEIGHTS_FILE,)
    export_formats: tuple[str, ...] = ("torchscript", "onnx")
    explain_method = "integrated gradients"
    packages: tuple[str, ...] = ()

    def onnx_graph(self, model, layout: Layout):
        from runner.model.onnx_graph import network_graph  # onnx: export only

        return network_graph(model, layout)

    def save(self, model, directory: Path) -> None:
        torch.save(model.state_dict(), directory / WEIGHTS_FILE)

    def load(self, directory: Path, layout: Layout, settings):
        network = build_model(layout, settings)
        state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        network.load_state_dict(state)
        return network.eval()
