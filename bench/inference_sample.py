"""What type inference's sample costs: the spread sample (dataset.inference_rows rows from 40
places across the file) against the head sample it replaced (the first rows in file order), on
the synthetic table's CSV at two sizes. Each draw runs in a fresh process, spread and head
interleaved `repeats` times; the best seconds of each count (shared, noisy machines), and the
process's peak resident memory shows whether the cost grows with the file.

Run as a script with `--child <how> <path> <rows>` it is one such draw."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def draw(how: str, path: str, rows: int) -> dict:
    """One sample drawn in this process: its seconds (imports excluded) and peak memory."""
    from runner.config import DatasetConfig
    from runner.processing import sampling
    from runner.processing.source import DataSource

    source = DataSource.from_config(DatasetConfig(path=path))
    started = time.perf_counter()
    if how == "spread":
        frame = sampling.read_sample(source, rows).frame
        count = len(frame)
    else:  # the head sample: the first rows in file order
        fs, files = source.files()
        table, _ = sampling._stream(source, fs, files[0], rows, 1)
        count = table.num_rows
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    return {"seconds": seconds, "peak_memory_mb": peak, "rows": count}


def inference_figures(data: dict[str, Path], rows: int = 10000, repeats: int = 3) -> dict:
    """{size label: figures} for each CSV in `data`."""
    figures = {}
    for size, path in data.items():
        runs: dict[str, list[dict]] = {"spread": [], "head": []}
        for _ in range(repeats):
            for how in runs:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", how, str(path), str(rows)],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                if out.returncode != 0:
                    raise RuntimeError(
                        f"a {how} draw failed ({out.returncode}): {out.stderr[-2000:]}"
                    )
                runs[how].append(json.loads(out.stdout.strip().splitlines()[-1]))
        spread = min(r["seconds"] for r in runs["spread"])
        head = min(r["seconds"] for r in runs["head"])
        figures[size] = {
            "file_mb": path.stat().st_size / 2**20,
            "sample_rows": runs["spread"][0]["rows"],
            "spread_seconds": spread,
            "head_seconds": head,
            "spread_vs_head": spread / head,
            "spread_peak_memory_mb": min(r["peak_memory_mb"] for r in runs["spread"]),
            "head_peak_memory_mb": min(r["peak_memory_mb"] for r in runs["head"]),
        }
    return figures


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.path.insert(0, str(ROOT))
        how, path, rows = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(draw(how, path, rows)), flush=True)
        # Straight out: the figure is written, and interpreter teardown with Arrow's and
        # fsspec's threads still about once aborted a child (SIGABRT) after its answer.
        os._exit(0)
