"""What each start-up trick of runner/fast_start.py saves: the same probe in fresh processes with
every trick on and with that one off (RUNNER_TRICKS_OFF), interleaved, the best of each.

Probes (`python bench/startup_tricks.py <probe>` prints its seconds as JSON):
- ray: a run's own Ray started and stopped through RayRuntime (1 CPU, no dashboard), as a
  run with backend=ray does; `--taken` holds the dashboard agent's default port first (another
  Ray on the machine).
- ray_data: switching Ray Data's progress bars off after `import ray`.
- lightgbm: importing LightGBM after torch, pandas and pyarrow, as a tree model's run does.
- run: the default experiment on the synthetic table (`python run.py`, a cache of its own): its
  whole wall.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# trick -> (probe, probe arguments, the figure of the probe that the trick cuts)
MEASURES = {
    "api_server": ("ray", [], "start_stop_seconds"),
    "agent_port": ("ray", ["--taken"], "start_stop_seconds"),
    "monitor_first": ("ray", [], "stop_seconds"),
    "ray_data_unimported": ("ray_data", [], "seconds"),
    "no_teardown": ("run", [], "wall_seconds"),
    "lightgbm_without_sklearn": ("lightgbm", [], "seconds"),
}
SMOKE = ("api_server", "ray_data_unimported", "no_teardown", "lightgbm_without_sklearn")


def probe_ray(taken: bool) -> dict:
    from runner.ports import free_ports
    from runner.runtime import RayRuntime

    held = socket.socket()
    if taken:
        import ray

        try:
            held.bind(("", ray._private.ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT))
        except OSError:
            pass  # held by something else already: the same situation
    runtime = RayRuntime(None, 1, None, None, 5.0, False, "127.0.0.1", free_ports(1)[0], False)
    runtime.check()
    started = time.perf_counter()
    runtime.start()
    ready = time.perf_counter()
    runtime.stop()
    stopped = time.perf_counter()
    held.close()
    return {
        "start_seconds": ready - started,
        "stop_seconds": stopped - ready,
        "start_stop_seconds": stopped - started,
    }


def probe_ray_data() -> dict:
    import ray  # noqa: F401

    from runner.fast_start import quiet_ray_data

    started = time.perf_counter()
    quiet_ray_data()
    return {"seconds": time.perf_counter() - started}


def probe_lightgbm() -> dict:
    """LightGBM's import where a run makes it: after torch, pandas and pyarrow."""
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import torch  # noqa: F401

    from runner.fast_start import import_lightgbm

    started = time.perf_counter()
    import_lightgbm()
    return {"seconds": time.perf_counter() - started}


def probe_run(work: Path, rows: int, name: str, env: dict) -> dict:
    run_dir = work / "startup" / name
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "backend=local",
            f"dataset.synthetic_rows={rows}",
            "trainer.progress_bar=false",
            f"cache_dir={work / 'caches' / 'startup' / name}",  # cold, as a first run's
            f"hydra.run.dir={run_dir}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    wall = time.perf_counter() - started
    return {"wall_seconds": wall}


def _probe(kind: str, args: list[str], off: str | None, work: Path, rows: int, name: str):
    env = {**os.environ, "RAY_ADDRESS": "", "RUNNER_TRICKS_OFF": off or ""}
    if kind == "run":
        return probe_run(work, rows, name, env)
    output = subprocess.run(
        [sys.executable, __file__, kind, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def trick_figures(work: Path, smoke: bool = False) -> dict:
    """{trick: {with_seconds, without_seconds, saved_seconds, figure}}: the best of `rounds`
    probes of each, with and without it, interleaved (probes shared where they are the same)."""
    from runner.fast_start import TRICKS

    rounds, rows = (1, 2000) if smoke else (3, 10_000)
    tricks = SMOKE if smoke else tuple(MEASURES)
    probes: dict[tuple, list[dict]] = {}
    for round_ in range(rounds):
        for trick in tricks:
            kind, args, _ = MEASURES[trick]
            for off in (None, trick):
                key = (kind, tuple(args), off)
                if key in probes and len(probes[key]) > round_:
                    continue  # the all-on probe that another trick shares, this round
                name = f"{kind}-{off or 'all'}-{round_}"
                probes.setdefault(key, []).append(_probe(kind, args, off, work, rows, name))
    figures = {}
    for trick in tricks:
        kind, args, figure = MEASURES[trick]
        best = [min(p[figure] for p in probes[(kind, tuple(args), off)]) for off in (None, trick)]
        figures[trick] = {
            "what": TRICKS[trick],
            "figure": figure,
            "with_seconds": best[0],
            "without_seconds": best[1],
            "saved_seconds": best[1] - best[0],
            "rounds": rounds,
        }
    return figures


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    kind, *flags = sys.argv[1:]
    if kind == "ray":
        result = probe_ray("--taken" in flags)
    elif kind == "ray_data":
        result = probe_ray_data()
    elif kind == "lightgbm":
        result = probe_lightgbm()
    else:
        raise SystemExit(f"unknown probe {kind}")
    print(json.dumps(result))
