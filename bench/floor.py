"""The floor: the least code that does the same job, the yardstick for the runner.

Reads the CSV with pyarrow, z-scores numbers (missing -> mean) and integer-codes
categories with numpy, and trains the runner's default model (category
embeddings + 2x256 MLP, batch 256, AdamW) with a bare PyTorch loop over
in-memory tensors. Prints one JSON line of timings. Not a product feature.

usage: python bench/floor.py data.csv [epochs]
"""

import json
import sys
import time

STARTED = time.perf_counter()

import numpy as np  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

NUMBERS = ["x1", "x2", "x3", "x4"]
CATEGORIES = ["color", "city"]


def prepare(path: str):
    table = pacsv.read_csv(path)
    numbers = np.stack(
        [table[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in NUMBERS], axis=1
    )
    rows = len(numbers)
    order = np.random.default_rng(0).permutation(rows)
    train = order[: int(0.7 * rows)]
    mean = np.nanmean(numbers[train], axis=0)
    std = np.nanstd(numbers[train], axis=0)
    numbers = np.where(np.isnan(numbers), mean, numbers)
    numbers = ((numbers - mean) / std).astype(np.float32)
    flag = table["flag"].to_numpy(zero_copy_only=False).astype(np.float32)[:, None]
    codes, sizes = [], []
    for column in CATEGORIES:
        values = table[column].to_numpy(zero_copy_only=False)
        vocab, inverse = np.unique(values, return_inverse=True)
        codes.append(inverse)
        sizes.append(len(vocab))
    label = table["label"].to_numpy(zero_copy_only=False).astype(np.float32)
    dense = torch.from_numpy(np.concatenate([numbers, flag], axis=1))
    cats = torch.from_numpy(np.stack(codes, axis=1).astype(np.int64))
    return dense, cats, torch.from_numpy(label), sizes, order


class Model(nn.Module):
    def __init__(self, dense: int, sizes: list[int], embedding: int = 16, hidden: int = 256):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(n, embedding) for n in sizes)
        width = dense + embedding * len(sizes)
        self.mlp = nn.Sequential(
            nn.Linear(width, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, dense, cats):
        parts = [dense] + [emb(cats[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat(parts, dim=1)).squeeze(1)


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    positives = labels.sum()
    return float(
        (ranks[labels > 0.5].sum() - positives * (positives + 1) / 2)
        / (positives * (len(labels) - positives))
    )


def main() -> None:
    path = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    t0 = time.perf_counter()
    dense, cats, label, sizes, order = prepare(path)
    prep_seconds = time.perf_counter() - t0
    rows = len(label)
    train, test = order[: int(0.7 * rows)], order[int(0.85 * rows) :]
    torch.manual_seed(0)
    model = Model(dense.shape[1], sizes)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.003)
    loss_fn = nn.BCEWithLogitsLoss()
    train_t = torch.from_numpy(train)
    t1 = time.perf_counter()
    for _ in range(epochs):
        permutation = train_t[torch.randperm(len(train_t))]
        for start in range(0, len(permutation), 256):
            index = permutation[start : start + 256]
            optimizer.zero_grad()
            loss = loss_fn(model(dense[index], cats[index]), label[index])
            loss.backward()
            optimizer.step()
    train_seconds = time.perf_counter() - t1
    with torch.inference_mode():
        test_t = torch.from_numpy(test)
        scores = model(dense[test_t], cats[test_t]).numpy()
    print(
        json.dumps(
            {
                "rows": rows,
                "prep_seconds": prep_seconds,
                "prep_rows_per_second": rows / prep_seconds,
                "train_seconds": train_seconds,
                "train_samples_per_second": epochs * len(train) / train_seconds,
                "test_roc_auc": auc(label[test_t].numpy(), scores),
                "script_seconds": time.perf_counter() - STARTED,
            }
        )
    )


if __name__ == "__main__":
    main()
