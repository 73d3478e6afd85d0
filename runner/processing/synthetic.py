"""The built-in deterministic synthetic table.

Numbers, categories, a binary flag and a nonlinear binary target that a small
MLP learns well above the majority-class baseline. The table is generated in
fixed-size chunks, each from its own seed, so a processor can generate chunks in
parallel and still produce exactly the table pandas produces. The bench suite
uses the same generator.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLORS = np.array(["red", "green", "blue", "yellow", "purple"])
CITIES = np.array([f"city_{i}" for i in range(20)])
CHUNK_ROWS = 65536


def _effects(seed: int):
    effects = np.random.default_rng([seed, 1])
    return effects.normal(scale=1.0, size=len(COLORS)), effects.normal(scale=0.8, size=len(CITIES))


def _logit(
    x: np.ndarray, color: np.ndarray, city: np.ndarray, flag: np.ndarray, seed: int
) -> np.ndarray:
    color_effect, city_effect = _effects(seed)
    return (
        2.0 * np.sin(2.0 * x[:, 0])
        + 1.5 * x[:, 1] * x[:, 2]
        - 0.8 * np.abs(x[:, 3])
        + color_effect[color]
        + city_effect[city]
        + np.where(flag, 1.0, -0.5) * x[:, 0]
    )


def _draw(rows: int, rng: np.random.Generator):
    x = rng.normal(size=(rows, 4))
    color = rng.integers(0, len(COLORS), rows)
    city = rng.integers(0, len(CITIES), rows)
    flag = rng.random(rows) < 0.4
    return x, color, city, flag


def _threshold(seed: int) -> float:
    """The median logit of a fixed reference sample: balanced classes, independent of rows."""
    x, color, city, flag = _draw(20000, np.random.default_rng([seed, 2]))
    return float(np.median(_logit(x, color, city, flag, seed)))


def synthetic_chunk(index: int, rows: int, seed: int = 0) -> pd.DataFrame:
    """Chunk `index` (rows index*CHUNK_ROWS onwards) of the table; `rows` <= CHUNK_ROWS."""
    rng = np.random.default_rng([seed, 3, index])
    x, color, city, flag = _draw(rows, rng)
    logit = _logit(x, color, city, flag, seed)
    label = logit + rng.logistic(scale=0.5, size=rows) > _threshold(seed)
    x4 = x[:, 3].copy()
    x4[rng.random(rows) < 0.05] = np.nan  # some missing values to exercise fill strategies
    start = index * CHUNK_ROWS
    return pd.DataFrame(
        {
            "x1": x[:, 0],
            "x2": x[:, 1],
            "x3": x[:, 2],
            "x4": x4,
            "color": COLORS[color],
            "city": CITIES[city],
            "flag": flag,
            "label": label,
        },
        index=pd.RangeIndex(start, start + rows),
    )


def chunk_sizes(rows: int) -> list[int]:
    full, rest = divmod(rows, CHUNK_ROWS)
    return [CHUNK_ROWS] * full + ([rest] if rest else [])


def make_synthetic(rows: int, seed: int = 0) -> pd.DataFrame:
    chunks = [synthetic_chunk(i, n, seed) for i, n in enumerate(chunk_sizes(rows))]
    return pd.concat(chunks).reset_index(drop=True) if len(chunks) != 1 else chunks[0]
