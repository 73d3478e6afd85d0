"""The network: one encoder per feature group, a concat combiner with an MLP, one head per output."""

from __future__ import annotations

import torch
from torch import nn

from runner.config import ModelConfig
from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key


class TextEncoder(nn.Module):
    """Mean of the hashed-token embeddings of a row; bucket 0 is padding."""

    def __init__(self, buckets: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(buckets, dim, padding_idx=0)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        vectors = self.embedding(tokens)
        counts = (tokens > 0).sum(dim=1, keepdim=True).clamp(min=1)
        return vectors.sum(dim=1) / counts


class TabularModel(nn.Module):
    def __init__(
        self, layout: Layout, hidden_size: int = 64, num_layers: int = 2, dropout: float = 0.0
    ):
        super().__init__()
        self.layout = layout
        self.embeddings = nn.ModuleList(
            nn.Embedding(size, dim) for _, size, dim in layout.categories
        )
        self.texts = nn.ModuleDict(
            {name: TextEncoder(buckets, dim) for name, buckets, dim in layout.texts}
        )
        width = (
            len(layout.numeric)
            + sum(d for *_, d in layout.categories)
            + sum(d for *_, d in layout.texts)
        )
        layers: list[nn.Module] = []
        for _ in range(num_layers):
            layers += [nn.Linear(width, hidden_size), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden_size
        self.mlp = nn.Sequential(*layers)
        self.heads = nn.ModuleDict(
            {spec.name: nn.Linear(width, spec.size) for spec in layout.outputs}
        )

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        parts = []
        if self.layout.numeric:
            parts.append(inputs[NUMERIC])
        if self.layout.categories:
            codes = inputs[CATEGORY]
            parts += [emb(codes[:, i]) for i, emb in enumerate(self.embeddings)]
        parts += [encoder(inputs[text_key(name)]) for name, encoder in self.texts.items()]
        hidden = self.mlp(torch.cat(parts, dim=1))
        return {name: head(hidden) for name, head in self.heads.items()}


def build_model(layout: Layout, model: ModelConfig) -> TabularModel:
    """The network for this data layout and model config (model.combiner=concat)."""
    return TabularModel(layout, model.hidden_size, model.num_layers, model.dropout)
