"""The benchmark suite (nox -s bench): every figure side by side with its floor, in one run.

Writes bench-results/figures.json and bench-results/figures.md. Sizes default to
100k,1M,10M rows; `nox -s bench -- --sizes 100k,1M --quick` narrows it down.
--smoke runs tiny sizes and is what the test suite calls to check that every
figure is produced.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from ray_head import warm_ray
from render import PROCESSORS, parse_size, ratio, render_markdown

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, str(ROOT / "run.py")]
MODEL = ["trainer.progress_bar=false"]


def scaling_model(epochs: int, batch: int) -> list[str]:
    """The scaling section's compute-bound training (bench/worker_threads.py profiles it)."""
    return [
        "model.hidden_size=512",
        "model.num_layers=3",
        "trainer.num_threads=1",
        "trainer.learning_rate_scaling=none",  # dropped for the one local run
        "loader=local",
        f"trainer.epochs={epochs}",
        "trainer.early_stopping.patience=0",
        f"trainer.batch_size={batch}",
    ]


def label(rows: int) -> str:
    return (
        f"{rows // 1_000_000}M"
        if rows >= 1_000_000 and rows % 1_000_000 == 0
        else f"{rows // 1000}k"
        if rows >= 1000
        else str(rows)
    )


def tree_memory(process: psutil.Process) -> int:
    """Proportional set size of a process and all its descendants (shared memory counted once)."""
    total = 0
    for p in [process, *process.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def worker_memory(process: psutil.Process, peaks: dict[int, tuple[str, int]]) -> None:
    """Each Ray worker's (a descendant named ray::...) peak proportional set size so far."""
    for child in process.children(recursive=True):
        try:
            name = child.cmdline()[0] if child.cmdline() else ""
            if not name.startswith("ray::") or name.startswith("ray::IDLE"):
                continue
            pss = child.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, IndexError):
            continue
        peaks[child.pid] = (name.split()[0], max(pss, peaks.get(child.pid, ("", 0))[1]))


def measure(
    args: list[str],
    env: dict | None = None,
    timeout: float = 3600,
    memory: bool = True,
    per_worker: bool = False,
) -> dict:
    """Wall time and peak memory (process tree) of a command; its output too. memory=False
    for a wall that must not pay for the watching: reading every process's PSS five times a
    second took 0.44 CPU-s of a 5-second run on 2 cores (its peaks read 0 then). per_worker:
    each Ray worker's peak too (`worker_peaks_mb`, largest first)."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=err, text=True
    )
    watched, peak, driver_peak = psutil.Process(proc.pid), 0, 0
    workers: dict[int, tuple[str, int]] = {}  # Ray worker pid -> (name, peak PSS)
    while proc.poll() is None:
        if memory:
            peak = max(peak, tree_memory(watched))
            try:
                driver_peak = max(driver_peak, watched.memory_full_info().pss)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        if per_worker:
            worker_memory(watched, workers)
        if time.perf_counter() - started > timeout:
            proc.kill()
        try:  # not sleep(0.2): the wall would be rounded up to the next poll, up to 0.2 s
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
    wall = time.perf_counter() - started
    out.seek(0), err.seek(0)
    result = {
        "wall_seconds": wall,
        "peak_memory_mb": peak / 2**20,
        "driver_peak_memory_mb": driver_peak / 2**20,  # the command's own process alone
        "worker_peaks_mb": sorted(
            ((round(p / 2**20, 1), name) for name, p in workers.values()), reverse=True
        ),
        "rc": proc.returncode,
        "stdout": out.read(),
        "stderr": err.read(),
    }
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args)} failed ({proc.returncode}):\n{result['stderr'][-3000:]}"
        )
    return result


def write_csv(rows: int, path: Path) -> Path:
    """The synthetic table (the embedded default's generator) as CSV, written chunk by chunk."""
    from runner.processing.synthetic import chunk_sizes, synthetic_chunk

    with open(path, "w") as handle:
        for i, n in enumerate(chunk_sizes(rows)):
            synthetic_chunk(i, n).to_csv(handle, index=False, header=i == 0)
    return path


def logged_seconds(text: str, pattern: str) -> float | None:
    match = re.search(pattern, text)
    return float(match.group(1)) if match else None


def machine_facts() -> dict:
    """What a figure was measured on, and when (every results file carries it)."""
    return {
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }


class Suite:
    def __init__(self, work: Path, out: Path, smoke: bool = False):
        self.work, self.out = work, out
        self.smoke = smoke
        self.ceiling_steps = 2 if smoke else 60  # steps of each bare loop in parallel_ceiling
        self.scaling_epochs = 2 if smoke else 6  # the first is warm-up, the rest are measured
        self.figures: dict = {"machine": machine_facts(), "sections": {}}

    BETTER = {
        "wall_seconds": min,
        "script_seconds": min,
        "train_seconds": min,
        "prep_seconds": min,
        "first_step_seconds": min,
        "peak_memory_mb": min,
        "train_samples_per_second": max,
        "prep_rows_per_second": max,
    }

    def record(self, section: str, key: str, value) -> None:
        """Stores a figure; a repeated measurement keeps the better value of each number."""
        previous = self.figures["sections"].setdefault(section, {}).get(key)
        if isinstance(previous, dict) and isinstance(value, dict):
            value = {
                k: (
                    self.BETTER[k](v, previous[k])
                    if k in self.BETTER and previous.get(k) is not None and v is not None
                    else v
                )
                for k, v in value.items()
            }
        self.figures["sections"][section][key] = value
        print(f"[bench] {section} / {key}: {json.dumps(value, default=str)[:300]}", flush=True)

    def fresh_cache(self, name: str) -> Path:
        path = self.work / "caches" / name
        shutil.rmtree(path, ignore_errors=True)
        return path

    # -- the floor -----------------------------------------------------------------------------
    def floor(self, data: Path, rows: int, epochs: int) -> dict:
        result = measure([sys.executable, str(ROOT / "bench" / "floor.py"), str(data), str(epochs)])
        figures = json.loads(result["stdout"].strip().splitlines()[-1])
        figures.update(wall_seconds=result["wall_seconds"], peak_memory_mb=result["peak_memory_mb"])
        self.record("floor", label(rows), figures)
        return figures

    # -- preprocessing -------------------------------------------------------------------------
    def preprocessing(self, data: Path, rows: int, processor: str) -> dict:
        backend = (
            ["backend=local", "loader=local"]
            if processor == "pandas"
            else ["backend=ray", "backend.num_cpus=2", "loader=local"]
        )
        cache = self.fresh_cache(f"pre-{processor}-{rows}")
        args = [
            *RUN,
            "command=preprocess",
            f"dataset.path={data}",
            f"processor={processor}",
            *backend,
            f"cache_dir={cache}",
            f"hydra.run.dir={self.work / 'runs' / f'pre-{processor}-{rows}'}",
        ]
        cold = measure(args)
        log = cold["stderr"] + cold["stdout"]
        # Ray starts lazily, inside the timed preprocessing: its start is its own figure.
        ray_start = logged_seconds(log, r"started a local Ray \(.*?\) in ([\d.]+)s") or 0.0
        seconds = logged_seconds(log, r"preprocessed in ([\d.]+)s") - ray_start
        warm = measure(args)
        hit = logged_seconds(warm["stderr"] + warm["stdout"], r"cache hit .*?; ([\d.]+)s\)")
        figures = {
            "seconds": seconds,
            "ray_start_seconds": ray_start,
            "rows_per_second": rows / seconds,
            "cache_hit_seconds": hit,
            "cold_wall_seconds": cold["wall_seconds"],
            "warm_wall_seconds": warm["wall_seconds"],
            "peak_memory_mb": cold["peak_memory_mb"],
        }
        self.record(f"preprocessing {processor}", label(rows), figures)
        return figures

    # -- whole experiment ----------------------------------------------------------------------
    def experiment(
        self,
        data: Path,
        rows: int,
        backend: str,
        epochs: int = 3,
        extra: list[str] = (),
        section: str | None = None,
        per_worker: bool = False,
    ) -> dict:
        name = f"exp-{section or backend}-{rows}"
        run_dir = self.work / "runs" / name
        shutil.rmtree(run_dir, ignore_errors=True)
        chosen = ["backend=local"] if backend == "local" else ["backend=ray", "backend.num_cpus=2"]
        # The floor trains the network: so do the experiments (auto's pick at 100k rows and up;
        # the smoke test's 2,000 rows would get the ensemble).
        if not any(e.startswith("model.family=") for e in extra):
            chosen.append("model.family=network")
        result = measure(
            [
                *RUN,
                f"dataset.path={data}",
                *chosen,
                *MODEL,
                f"trainer.epochs={epochs}",
                "trainer.early_stopping.patience=0",
                f"cache_dir={self.fresh_cache(name)}",
                f"hydra.run.dir={run_dir}",
                *extra,
            ],
            per_worker=per_worker,
        )
        metrics = json.loads((run_dir / "metrics.json").read_text())
        log = result["stderr"] + result["stdout"]
        figures = {
            "wall_seconds": result["wall_seconds"],
            "peak_memory_mb": result["peak_memory_mb"],
            "test_roc_auc": metrics["test"]["label/roc_auc"],
            "train_samples_per_second": metrics["training"]["train_samples_per_second"],
            "steady_train_samples_per_second": metrics["training"].get(
                "steady_train_samples_per_second"
            ),
            "preprocessing_seconds": metrics["training"]["preprocessing_seconds"],
            "first_step_seconds": logged_seconds(log, r"first training step done ([\d.]+)s"),
            "ray_start_seconds": logged_seconds(log, r"started a local Ray \(.*?\) in ([\d.]+)s"),
            "cache_entry": metrics["training"]["cache_entry"],
        }
        if per_worker:
            figures["driver_peak_memory_mb"] = result["driver_peak_memory_mb"]
            figures["worker_peaks_mb"] = result["worker_peaks_mb"]
        self.record(section or f"experiment {backend}", label(rows), figures)
        return figures

    def loader_rate(self, cache_entry: str, rows: int) -> dict:
        """Batches/s of the local loader alone over the training split (no model)."""
        from runner.loading.local import LocalLoader
        from runner.model.layout import Layout
        from runner.processing.cache import META_FILE
        from runner.storage import Location

        splits = Location(cache_entry)
        meta = json.loads((Path(cache_entry).parent / META_FILE).read_text())
        from hydra import compose, initialize_config_dir

        from runner.config import register_configs

        register_configs()
        from hydra.utils import instantiate

        from runner.config import check_config

        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(
                config_name="config", overrides=["loader=local", "trainer.batch_size=256"]
            )
        layout = Layout.from_meta(meta, check_config(cfg).model)
        loader: LocalLoader = instantiate(cfg.loader)
        started = time.perf_counter()
        data = loader.open(loader.shards(splits.join("train"), 1, equal=True)[0], layout)
        load_seconds = time.perf_counter() - started
        started = time.perf_counter()
        batches = sum(1 for _ in loader.train_batches(data, 0, 0))
        seconds = time.perf_counter() - started
        figures = {
            "batches_per_second": batches / seconds,
            "load_seconds": load_seconds,
            "batches": batches,
        }
        self.record("loader local", label(rows), figures)
        return figures

    def startup(self) -> dict:
        help_run = measure([*RUN, "--help"])
        figures = {"help_seconds": help_run["wall_seconds"]}
        self.record("startup", "run.py --help", figures)
        return figures

    # -- distributed scaling (issue 4) ---------------------------------------------------------
    def scaling(self, data: Path, rows: int) -> dict:
        """Training samples/s with 1 and 2 workers, one thread each, on a compute-bound model
        (3 x 512 MLP, 4096 rows per worker step: the gradient exchange is small next to the compute),
        after the first epoch (warm-up). Horovod is measured with its default cycle time and with
        HOROVOD_CYCLE_TIME=5 ms (fewer wake-ups of its background thread on busy cores)."""
        epochs, batch = self.scaling_epochs, 4096
        heavy = scaling_model(epochs, batch)
        figures = {"batch_per_worker": batch, **self.parallel_ceiling(batch)}
        local = self.experiment(
            data, rows, "local", epochs, heavy[:3] + heavy[4:], section="scaling local"
        )
        figures["local_1"] = local["steady_train_samples_per_second"]
        # (trainer, environment, worker counts); the smoke run takes each code path once.
        variants = {
            "horovod": ("horovod", {}, (1, 2)),
            "ddp": ("ddp", {}, (2,) if self.smoke else (1, 2)),
            "horovod_cycle5": (
                "horovod",
                {"HOROVOD_CYCLE_TIME": "5"},
                () if self.smoke else (1, 2),
            ),
        }

        def steady_rate(
            address: str, name: str, trainer: str, workers: int, extra: list[str], env: dict
        ) -> float:
            run_dir = self.work / "runs" / name
            shutil.rmtree(run_dir, ignore_errors=True)
            measure(
                [
                    *RUN,
                    f"dataset.path={data}",
                    "backend=ray",
                    f"backend.address={address}",
                    f"trainer={trainer}",
                    f"trainer.num_workers={workers}",
                    "trainer.resources_per_worker={CPU:1}",
                    *extra,
                    *MODEL,
                    *heavy,
                    f"cache_dir={self.work / 'caches' / 'scaling'}",
                    f"hydra.run.dir={run_dir}",
                ],
                env=env,
            )
            report = json.loads((run_dir / "metrics.json").read_text())["training"]
            return report["steady_train_samples_per_second"]

        # The runs attach to one warm Ray (2 CPUs): a rate after the first epoch does not
        # depend on whose Ray it is, and each run's own start and stop cost seconds.
        with warm_ray() as address:
            for variant, (trainer, env, counts) in variants.items():
                for workers in counts:
                    figures[f"{variant}_{workers}"] = steady_rate(
                        address, f"scale-{variant}-{workers}", trainer, workers, [], env
                    )
                if len(counts) == 2:
                    figures[f"{variant}_efficiency"] = figures[f"{variant}_2"] / (
                        2 * figures[f"{variant}_1"]
                    )
                    figures[f"{variant}_speedup"] = (
                        figures[f"{variant}_2"] / figures[f"{variant}_1"]
                    )
            # fp16 gradient compression, 2 workers, against none
            for trainer in ("horovod",) if self.smoke else ("horovod", "ddp"):
                figures[f"{trainer}_fp16_2"] = steady_rate(
                    address,
                    f"scale-{trainer}-fp16-2",
                    trainer,
                    2,
                    ["trainer.compression=fp16"],
                    {},
                )
        figures.update(self.parallel_ceiling(batch, "_after"))
        self.record("scaling", label(rows), figures)
        return figures

    def parallel_ceiling(self, batch: int, suffix: str = "") -> dict:
        """Two bare training loops at once vs one (no communication): what the machine gives
        two workers right now, in the precision the trainers' steps take here. Measured before
        and after the strategies, as the machines are shared."""
        import torch

        from runner.training.step import training_precision

        precision, _ = training_precision("auto", torch.device("cpu"))
        script = [
            sys.executable,
            str(ROOT / "bench" / "parallel_ceiling.py"),
            str(batch),
            str(self.ceiling_steps),
            precision,
        ]
        one = float(subprocess.run(script, capture_output=True, text=True, check=True).stdout)
        pair = [subprocess.Popen(script, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        two = sum(float(p.communicate()[0]) for p in pair)
        return {
            f"bare_1{suffix}": one,
            f"bare_2{suffix}": two,
            f"ceiling{suffix}": two / one,
            "ceiling_precision": precision,
        }

    # -- out of core (issue 3) -----------------------------------------------------------------
    # -- the distributed path's overhead (issue 16) ----------------------------------------
    def overhead(self, data: Path, rows: int, rounds: int = 2) -> dict:
        """The forced distributed path (Dask preprocessing, Ray Data loader) with one trainer
        and with 2 Horovod workers, against the local experiment: side by side, interleaved,
        fresh caches, the best of `rounds` of each (shared, noisy machines)."""
        forced = ["processor=dask", "loader=ray"]
        two_workers = ["trainer.num_workers=2"]  # the design card's call: auto picks the rest
        variants = {
            "local": ("local", []),
            "ray": ("ray", forced),
            "horovod": ("ray", [*forced, "trainer=horovod", "trainer.num_workers=2"]),
            "arrow": ("ray", ["processor=arrow", "loader=ray"]),  # the fastest engine on Ray
            "horovod-arrow": (
                "ray",
                ["processor=arrow", "loader=ray", "trainer=horovod", "trainer.num_workers=2"],
            ),
            "two-workers": ("ray", two_workers),
        }
        if self.smoke:  # each code path once: the arrow runs differ from these by the processor
            for name in ("arrow", "horovod-arrow", "two-workers"):
                variants.pop(name)
        best: dict[str, dict] = {}
        with warm_ray() as address:  # `ray start --head` once; these runs attach to it
            variants["two-workers-attached"] = ("ray", [*two_workers, f"backend.address={address}"])
            for _ in range(rounds):
                for name, (backend, extra) in variants.items():
                    run = self.experiment(data, rows, backend, 3, extra, section=f"overhead {name}")
                    if name not in best or run["wall_seconds"] < best[name]["wall_seconds"]:
                        best[name] = run
        local, ray, horovod = best["local"], best["ray"], best["horovod"]
        figures = {
            "local_seconds": local["wall_seconds"],
            "ray_seconds": ray["wall_seconds"],
            "horovod_seconds": horovod["wall_seconds"],
            "ray_vs_local": ratio(ray["wall_seconds"], local["wall_seconds"]),
            "horovod_vs_local": ratio(horovod["wall_seconds"], local["wall_seconds"]),
            "local_first_step_seconds": local["first_step_seconds"],
            "ray_first_step_seconds": ray["first_step_seconds"],
            "ray_start_seconds": ray["ray_start_seconds"],
            "local_samples_per_second": local["steady_train_samples_per_second"],
            "ray_samples_per_second": ray["steady_train_samples_per_second"],
        }
        for name, key in (
            ("arrow", "arrow"),
            ("horovod-arrow", "horovod_arrow"),
            ("two-workers", "two_workers"),
            ("two-workers-attached", "two_workers_attached"),
        ):
            if name in best:
                figures[f"{key}_seconds"] = best[name]["wall_seconds"]
                figures[f"{key}_vs_local"] = ratio(
                    best[name]["wall_seconds"], local["wall_seconds"]
                )
        if "arrow" in best:
            figures["arrow_first_step_seconds"] = best["arrow"]["first_step_seconds"]
            figures["arrow_ray_start_seconds"] = best["arrow"]["ray_start_seconds"]
        for name in variants:  # the rounds' records: replaced by the summary
            self.figures["sections"].pop(f"overhead {name}", None)
        self.record("overhead", label(rows), figures)
        return figures

    def out_of_core(self, data: Path, rows: int, object_store_mb: int = 128) -> dict:
        name = f"ooc-{rows}"
        run_dir = self.work / "runs" / name
        result = measure(
            [
                *RUN,
                f"dataset.path={data}",
                "backend=ray",
                "backend.num_cpus=2",
                f"backend.object_store_memory={object_store_mb * 2**20}",
                "processor=arrow",  # what processor=auto picks on Ray for data this large
                "processor.persist=false",
                "processor.blocksize=16MB",
                "loader=ray",
                "loader.window_size_bytes=16000000",
                *MODEL,
                "trainer.epochs=1",
                "trainer.early_stopping.patience=0",
                f"cache_dir={self.fresh_cache(name)}",
                f"hydra.run.dir={run_dir}",
            ]
        )
        metrics = json.loads((run_dir / "metrics.json").read_text())
        processed = sum(
            f.stat().st_size for f in Path(metrics["training"]["cache_entry"]).rglob("*.parquet")
        )
        in_memory = rows * 8 * 10  # ~ten 8-byte columns once decoded
        figures = {
            "raw_csv_mb": data.stat().st_size / 2**20,
            "decoded_table_mb": in_memory / 2**20,
            "processed_parquet_mb": processed / 2**20,
            "object_store_mb": object_store_mb,
            "peak_memory_mb": result["peak_memory_mb"],
            "wall_seconds": result["wall_seconds"],
            "test_roc_auc": metrics["test"]["label/roc_auc"],
        }
        self.record("out of core", label(rows), figures)
        return figures

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "figures.json").write_text(json.dumps(self.figures, indent=2, default=str))
        (self.out / "figures.md").write_text(render_markdown(self.figures))
        print(f"[bench] wrote {self.out / 'figures.json'} and {self.out / 'figures.md'}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100k,1M,10M")
    parser.add_argument("--out", default=str(ROOT / "bench-results"))
    parser.add_argument("--work", default=None, help="scratch folder (data, caches, runs)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, every figure, for the test suite"
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated sections to skip (see SECTIONS)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="run just these sections (e.g. scaling,tune), keeping the other figures of the "
        "existing figures.json",
    )
    args = parser.parse_args(argv)
    sizes = [2000] if args.smoke else [parse_size(s) for s in args.sizes.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-"))
    (work / "data").mkdir(parents=True, exist_ok=True)
    suite = Suite(work, Path(args.out), smoke=args.smoke)
    if args.only:
        chosen = [name for name in args.only.split(",") if name]
        unknown = sorted(set(chosen) - set(SECTIONS))
        if unknown:
            parser.error(f"unknown section(s) {unknown}; choose from {sorted(SECTIONS)}")
        previous = Path(args.out) / "figures.json"
        if previous.exists():  # the other sections' figures stay
            suite.figures["sections"] = json.loads(previous.read_text())["sections"]
    else:
        skip = set(filter(None, args.skip.split(",")))
        chosen = [name for name in SECTIONS if name not in skip]
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    for name in chosen:
        started = time.perf_counter()
        SECTIONS[name](suite, work, sizes, args.smoke)
        seconds = round(time.perf_counter() - started, 1)
        suite.figures.setdefault("section_seconds", {})[name] = seconds
        print(f"[bench] section {name} took {seconds}s", flush=True)
    suite.write()


def startup_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """`--help`'s wall, and what each trick of runner/fast_start.py saves."""
    from bench.startup_tricks import trick_figures

    suite.startup()
    suite.figures["sections"].pop("start-up tricks", None)
    for trick, figures in trick_figures(work, smoke).items():
        suite.record("start-up tricks", trick, figures)


def local_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """The floor, pandas preprocessing, the local experiment and the loader; at up to 1M rows
    floor and experiment run twice, interleaved, and the best of each counts (shared machines)."""
    for rows in sizes:
        data = synthetic_csv(work, rows)
        suite.floor(data, rows, 3)
        suite.preprocessing(data, rows, "pandas")
        if rows <= 1_000_000 or smoke:
            local = suite.experiment(data, rows, "local", 3)
            suite.loader_rate(local["cache_entry"], rows)
            if not smoke:
                suite.floor(data, rows, 3)
                suite.experiment(data, rows, "local", 3)


def processors_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """Every processor's preprocessing, side by side (pandas is the local section's)."""
    for rows in sizes:
        if rows <= 10_000_000:
            for processor in PROCESSORS[1:]:
                suite.preprocessing(synthetic_csv(work, rows), rows, processor)


def ray_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    for rows in sizes:
        if rows == 100_000 or smoke:
            suite.experiment(synthetic_csv(work, rows), rows, "ray", 3)


def scaling_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    for rows in sizes:
        if rows == 100_000 or smoke:
            suite.figures["sections"].pop("scaling", None)
            suite.scaling(synthetic_csv(work, rows), rows)


def sweeps_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.sweeps import sweep_figures

    suite.record("sweeps", "3 trials", sweep_figures(work, smoke=smoke))


def synthetic_csv(work: Path, rows: int) -> Path:
    """The synthetic table's CSV of this many rows under work/data, written once."""
    path = work / "data" / f"synthetic-{rows}.csv"
    return path if path.exists() else write_csv(rows, path)


def prediction_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.prediction import prediction_figures

    sizes = [2000] if smoke else [1_000_000, 10_000_000]
    data = {label(rows): synthetic_csv(work, rows) for rows in sizes}
    suite.figures["sections"].pop("prediction", None)
    for name, figures in prediction_figures(work, data, measure).items():
        suite.record("prediction", name, figures)


def families_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """The model families on the same 1M-row table, fresh caches: the network, the trees
    (model=gbm) and their ensemble, each trained as its default trains (the network's epochs
    and early stopping, not the 3 epochs of the sections above: the budget names the network
    default's wall), interleaved twice; the best wall of each counts."""
    from runner.config import EarlyStoppingConfig, TrainerConfig

    rows = 2000 if smoke else 1_000_000
    data = synthetic_csv(work, rows)
    suite.figures["sections"].pop("families", None)
    default = [
        f"trainer.epochs={TrainerConfig.epochs}",
        f"trainer.early_stopping.patience={EarlyStoppingConfig.patience}",
    ]
    families = {name: [f"model.family={name}", *default] for name in ("network", "gbm", "ensemble")}
    for _ in range(1 if smoke else 2):
        for name, extra in families.items():
            suite.experiment(data, rows, "local", 3, extra, section=f"family {name}")
    network = suite.figures["sections"]["family network"][label(rows)]
    figures = {"rows": rows, "network_wall_seconds": network["wall_seconds"]}
    figures["network_test_roc_auc"] = network["test_roc_auc"]
    for name in ("gbm", "ensemble"):
        entry = suite.figures["sections"][f"family {name}"][label(rows)]
        figures[f"{name}_wall_seconds"] = entry["wall_seconds"]
        figures[f"{name}_test_roc_auc"] = entry["test_roc_auc"]
    suite.record("families", label(rows), figures)


def explanation_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.explanation import explanation_figures

    rows = 500 if smoke else 10_000
    suite.figures["sections"].pop("explanation", None)
    figures = explanation_figures(work, synthetic_csv(work, rows), 2000 if smoke else 20_000)
    for family, entry in figures.items():
        suite.record("explanation", f"{family}, {label(rows)}", entry)


def folds_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.folds import folds_figures

    rows = 500 if smoke else 10_000
    suite.figures["sections"].pop("k_fold", None)
    figures = folds_figures(work, synthetic_csv(work, rows), 1 if smoke else 2)
    suite.record("k_fold", label(rows), figures)


def inference_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.inference_sample import inference_figures

    sizes = [2000, 20000] if smoke else [1_000_000, 10_000_000]
    data = {label(rows): synthetic_csv(work, rows) for rows in sizes}
    suite.figures["sections"].pop("inference", None)
    repeats = 1 if smoke else 3
    for size, figures in inference_figures(data, repeats=repeats).items():
        suite.record("inference", size, figures)


def soak_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.soak import soak_figures

    suite.figures["sections"].pop("soak", None)
    for name, figures in soak_figures(work, smoke).items():
        suite.record("soak", name, figures)


def results_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.results_cost import results_figures

    suite.figures["sections"].pop("results", None)
    suite.record("results", "default experiment", results_figures(work, measure, smoke))


def overhead_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    rows = 2000 if smoke else 100_000
    suite.figures["sections"].pop("overhead", None)
    suite.overhead(synthetic_csv(work, rows), rows, 1 if smoke else 2)


def ooc_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """Two sizes: bounded memory means the peak does not grow with the data."""
    suite.figures["sections"].pop("out of core", None)
    for rows in [4000] if smoke else [1_000_000, 10_000_000]:
        suite.out_of_core(synthetic_csv(work, rows), rows, 128)


def tune_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.tune_sweeps import tune_figures

    suite.figures["sections"].pop("tune", None)
    figures = tune_figures(work, smoke=smoke)
    suite.record("tune", f"{figures['trials']} trials", figures)


def serve_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    from bench.serving import serving_figures

    suite.figures["sections"].pop("serving", None)
    for name, figures in serving_figures(work, smoke=smoke).items():
        suite.record("serving", name, figures)


def synthetic_parquet(work: Path, rows: int) -> Path:
    """The synthetic table's Parquet file of this many rows under work/data, written once,
    chunk by chunk (the same rows as its CSV)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runner.processing.synthetic import chunk_sizes, synthetic_chunk

    path = work / "data" / f"synthetic-{rows}.parquet"
    if not path.exists():
        writer = None
        for i, n in enumerate(chunk_sizes(rows)):
            table = pa.Table.from_pandas(synthetic_chunk(i, n), preserve_index=False)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        assert writer is not None
        writer.close()
    return path


# The scale ladder's runs: (family override, backend, extra overrides).
SCALE_FAMILIES = {"default": "model.family=auto", "gbm": "model.family=gbm"}
SCALE_FAMILIES["network"] = "model.family=network"
RAY_TWO = ["trainer.num_workers=2", "trainer.resources_per_worker={CPU: 1}"]


def scale_section(suite, work: Path, sizes: list[int], smoke: bool) -> None:
    """The scale ladder: the synthetic table at each size (100k, 1M, 10M by default), as CSV and
    as Parquet, trained by the default, model=gbm and model=network (3 epochs), locally and on
    Ray with 2 workers (model=gbm's trees on Ray Train at every size): wall, rows/s, the
    driver's and each Ray worker's peak PSS, fresh caches.
    The smoke run takes its one path of its own (the trees on Ray from Parquet, each worker's
    memory watched); the other sections run the rest."""
    runs = [
        (fmt, family, backend)
        for fmt in ("csv", "parquet")
        for family in SCALE_FAMILIES
        for backend in ("local", "ray")
    ]
    if smoke:
        runs = [("parquet", "gbm", "ray")]
    for rows in sizes:
        data = {"csv": synthetic_csv(work, rows), "parquet": synthetic_parquet(work, rows)}
        for fmt, family, backend in runs:
            extra = [SCALE_FAMILIES[family], *(RAY_TWO if backend == "ray" else [])]
            if (family, backend) == ("gbm", "ray"):  # Ray Train's trees at every size
                extra.append("model.gbm.ray_from_rows=0")
            section = f"scale {family} {backend} {fmt}"
            figures = suite.experiment(
                data[fmt], rows, backend, 3, extra, section=section, per_worker=True
            )
            figures["rows_per_second"] = rows / figures["wall_seconds"]
            suite.record(section, label(rows), figures)


# Every section in the order a whole run takes them; --only and --skip name them.
SECTIONS = {
    "startup": startup_section,
    "local": local_section,
    "processors": processors_section,
    "ray": ray_section,
    "scaling": scaling_section,
    "overhead": overhead_section,
    "ooc": ooc_section,
    "sweeps": sweeps_section,
    "tune": tune_section,
    "serving": serve_section,
    "prediction": prediction_section,
    "inference": inference_section,
    "families": families_section,
    "scale": scale_section,
    "explanation": explanation_section,
    "k_fold": folds_section,
    "results": results_section,
    "soak": soak_section,
}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
