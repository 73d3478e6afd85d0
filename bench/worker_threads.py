"""Where the training workers' CPU goes (issue 32, item 1): runs the scaling bench's
compute-bound configuration (300k synthetic rows, 3 x 512 MLP, 4096 rows per worker step,
one thread per worker) on a local Ray, waits 20 s into training, then reads every worker
thread's CPU time from /proc over 10 s. Not a product feature; results in docs/benchmarks.md.

usage: python bench/worker_threads.py TRAINER WORKERS TAG [ENV=VALUE ...]
    python bench/worker_threads.py horovod 2 hvd2 HOROVOD_CYCLE_TIME=5
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from suite import scaling_model

ROOT = Path(__file__).resolve().parents[1]
WORKER_TITLES = ("HorovodWorker", "RayTrainWorker")


def thread_times(pids: list[int]) -> dict[tuple[int, str, str], float]:
    """(pid, thread id, thread name) -> CPU seconds so far."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            out[(pid, task.name, name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> None:
    trainer, workers, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    env = {**os.environ, "RAY_ADDRESS": "", **dict(kv.split("=", 1) for kv in sys.argv[4:])}
    work = Path(os.environ.get("WORK", "/tmp/worker-threads"))
    run_dir = work / f"run-{tag}"
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        "dataset.synthetic_rows=300000",
        "backend=ray",
        "backend.num_cpus=2",
        f"trainer={trainer}",
        f"trainer.num_workers={workers}",
        "trainer.resources_per_worker={CPU:1}",
        "trainer.progress_bar=false",
        "model.ensemble_size=1",
        *scaling_model(epochs=10, batch=4096),
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={run_dir}",
    ]
    work.mkdir(parents=True, exist_ok=True)
    with open(work / f"{tag}.out", "w") as log:
        run = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        pids: list[int] = []
        while run.poll() is None and not pids:
            for p in psutil.process_iter(["pid", "cmdline"]):
                title = " ".join(p.info["cmdline"] or [])
                if title.startswith("ray::") and any(w in title for w in WORKER_TITLES):
                    pids.append(p.info["pid"])
            time.sleep(0.5)
        time.sleep(20)  # past the first epoch
        before = thread_times(pids)
        time.sleep(10)
        after = thread_times(pids)
        run.wait()
    print("CPU seconds per thread in 10 s:")
    for seconds, (pid, _, name) in sorted(
        ((after[k] - before.get(k, 0.0), k) for k in after), reverse=True
    )[:12]:
        print(f"  {seconds:5.2f}  pid {pid}  {name}")
    training = json.loads((run_dir / "metrics.json").read_text())["training"]
    print("steady training samples/s:", training.get("steady_train_samples_per_second"))


if __name__ == "__main__":
    main()
