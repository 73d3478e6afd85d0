"""The built-in deterministic synthetic table.

Numbers, categories, a binary flag and a nonlinear binary target that a small
MLP learns well above the majority-class baseline. The bench suite uses the
same generator, so the default experiment and the benchmarks see the same data.
"""

import numpy as np
import pandas as pd

COLORS = np.array(["red", "green", "blue", "yellow", "purple"])
CITY_COUNT = 20


def make_synthetic(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 4)).astype(np.float64)
    color = rng.integers(0, len(COLORS), rows)
    city = rng.integers(0, CITY_COUNT, rows)
    flag = rng.random(rows) < 0.4
    # Fixed per-category effects (from their own stream, so they do not depend on rows).
    effects = np.random.default_rng(seed + 1)
    color_effect = effects.normal(scale=1.0, size=len(COLORS))
    city_effect = effects.normal(scale=0.8, size=CITY_COUNT)
    logit = (
        2.0 * np.sin(2.0 * x[:, 0])
        + 1.5 * x[:, 1] * x[:, 2]
        - 0.8 * np.abs(x[:, 3])
        + color_effect[color]
        + city_effect[city]
        + np.where(flag, 1.0, -0.5) * x[:, 0]
    )
    noise = rng.logistic(scale=0.5, size=rows)
    label = (logit + noise) > np.median(logit)
    x4 = x[:, 3].copy()
    x4[rng.random(rows) < 0.05] = np.nan  # some missing values to exercise fill strategies
    return pd.DataFrame(
        {
            "x1": x[:, 0],
            "x2": x[:, 1],
            "x3": x[:, 2],
            "x4": x4,
            "color": COLORS[color],
            "city": np.char.add("city_", city.astype(str)),
            "flag": flag,
            "label": label,
        }
    )
