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

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, str(ROOT / "run.py")]
MODEL = ["trainer.progress_bar=false"]
PROCESSORS = ("pandas", "arrow", "dask", "modin")  # pandas first: the others' reference


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


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


def measure(args: list[str], env: dict | None = None, timeout: float = 3600) -> dict:
    """Wall time and peak memory (process tree) of a command; its output too."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=err, text=True
    )
    watched, peak, driver_peak = psutil.Process(proc.pid), 0, 0
    while proc.poll() is None:
        peak = max(peak, tree_memory(watched))
        try:
            driver_peak = max(driver_peak, watched.memory_full_info().pss)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
        if time.perf_counter() - started > timeout:
            proc.kill()
        time.sleep(0.2)
    wall = time.perf_counter() - started
    out.seek(0), err.seek(0)
    result = {
        "wall_seconds": wall,
        "peak_memory_mb": peak / 2**20,
        "driver_peak_memory_mb": driver_peak / 2**20,  # the command's own process alone
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
    ) -> dict:
        name = f"exp-{section or backend}-{rows}"
        run_dir = self.work / "runs" / name
        shutil.rmtree(run_dir, ignore_errors=True)
        chosen = ["backend=local"] if backend == "local" else ["backend=ray", "backend.num_cpus=2"]
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
            ]
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
        heavy = [
            "model.hidden_size=512",
            "model.num_layers=3",
            "trainer.num_threads=1",
            "trainer.learning_rate_scaling=none",
            "loader=local",
            f"trainer.epochs={epochs}",
            "trainer.early_stopping.patience=0",
            f"trainer.batch_size={batch}",
        ]
        figures = {"batch_per_worker": batch, **self.parallel_ceiling(batch)}
        local = self.experiment(
            data, rows, "local", epochs, heavy[:3] + heavy[4:], section="scaling local"
        )
        figures["local_1"] = local["steady_train_samples_per_second"]
        variants = {
            "horovod": ("horovod", {}),
            "ddp": ("ddp", {}),
            "horovod_cycle5": ("horovod", {"HOROVOD_CYCLE_TIME": "5"}),
        }

        def steady_rate(
            name: str, trainer: str, workers: int, extra: list[str], env: dict
        ) -> float:
            run_dir = self.work / "runs" / name
            shutil.rmtree(run_dir, ignore_errors=True)
            measure(
                [
                    *RUN,
                    f"dataset.path={data}",
                    "backend=ray",
                    "backend.num_cpus=2",
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

        for variant, (trainer, env) in variants.items():
            for workers in (1, 2):
                figures[f"{variant}_{workers}"] = steady_rate(
                    f"scale-{variant}-{workers}", trainer, workers, [], env
                )
            figures[f"{variant}_efficiency"] = figures[f"{variant}_2"] / (
                2 * figures[f"{variant}_1"]
            )
            figures[f"{variant}_speedup"] = figures[f"{variant}_2"] / figures[f"{variant}_1"]
        for trainer in ("horovod", "ddp"):  # fp16 gradient compression, 2 workers, against none
            figures[f"{trainer}_fp16_2"] = steady_rate(
                f"scale-{trainer}-fp16-2", trainer, 2, ["trainer.compression=fp16"], {}
            )
        figures.update(self.parallel_ceiling(batch, "_after"))
        self.record("scaling", label(rows), figures)
        return figures

    def parallel_ceiling(self, batch: int, suffix: str = "") -> dict:
        """Two bare training loops at once vs one (no communication): what the machine gives
        two workers right now. Measured before and after the strategies, as the machines are shared."""
        script = [
            sys.executable,
            str(ROOT / "bench" / "parallel_ceiling.py"),
            str(batch),
            str(self.ceiling_steps),
        ]
        one = float(subprocess.run(script, capture_output=True, text=True, check=True).stdout)
        pair = [subprocess.Popen(script, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        two = sum(float(p.communicate()[0]) for p in pair)
        return {f"bare_1{suffix}": one, f"bare_2{suffix}": two, f"ceiling{suffix}": two / one}

    # -- out of core (issue 3) -----------------------------------------------------------------
    # -- the distributed path's overhead (issue 16) ----------------------------------------
    def overhead(self, data: Path, rows: int, rounds: int = 2) -> dict:
        """The forced distributed path (Dask preprocessing, Ray Data loader) with one trainer
        and with 2 Horovod workers, against the local experiment: side by side, interleaved,
        fresh caches, the best of `rounds` of each (shared, noisy machines)."""
        forced = ["processor=dask", "loader=ray"]
        variants = {
            "local": ("local", []),
            "ray": ("ray", forced),
            "horovod": ("ray", [*forced, "trainer=horovod", "trainer.num_workers=2"]),
            "arrow": ("ray", ["processor=arrow", "loader=ray"]),  # the fastest engine on Ray
            "horovod-arrow": (
                "ray",
                ["processor=arrow", "loader=ray", "trainer=horovod", "trainer.num_workers=2"],
            ),
        }
        best: dict[str, dict] = {}
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
            "arrow_seconds": best["arrow"]["wall_seconds"],
            "arrow_vs_local": ratio(best["arrow"]["wall_seconds"], local["wall_seconds"]),
            "horovod_arrow_seconds": best["horovod-arrow"]["wall_seconds"],
            "horovod_arrow_vs_local": ratio(
                best["horovod-arrow"]["wall_seconds"], local["wall_seconds"]
            ),
            "arrow_first_step_seconds": best["arrow"]["first_step_seconds"],
            "arrow_ray_start_seconds": best["arrow"]["ray_start_seconds"],
            "local_first_step_seconds": local["first_step_seconds"],
            "ray_first_step_seconds": ray["first_step_seconds"],
            "ray_start_seconds": ray["ray_start_seconds"],
            "local_samples_per_second": local["steady_train_samples_per_second"],
            "ray_samples_per_second": ray["steady_train_samples_per_second"],
        }
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


def ratio(a, b):
    return a / b if a is not None and b else None


def render_markdown(figures: dict) -> str:
    s = figures["sections"]
    m = figures["machine"]
    lines = [
        f"Measured {m['date']} on {m['cpus']} CPUs / {m['memory_gb']} GiB, Python {m['python']}; "
        "every ratio compares two figures of the same run.",
        "",
        "| figure | size | runner | floor / reference | ratio | target |",
        "|---|---|---|---|---|---|",
    ]

    def row(name, size, value, reference, r, target, unit=""):
        def fmt(v):
            return "-" if v is None else f"{v:,.3g}{unit}" if isinstance(v, float) else f"{v}{unit}"

        lines.append(
            f"| {name} | {size} | {fmt(value)} | {fmt(reference)} | "
            f"{'-' if r is None else f'{r:.2f}x'} | {target} |"
        )

    for size, floor in s.get("floor", {}).items():
        for processor in PROCESSORS:
            pre = s.get(f"preprocessing {processor}", {}).get(size)
            if pre:
                row(
                    f"preprocessing rows/s ({processor})",
                    size,
                    pre["rows_per_second"],
                    floor["prep_rows_per_second"],
                    ratio(pre["rows_per_second"], floor["prep_rows_per_second"]),
                    ">= 0.5x" if processor == "pandas" else "",
                )
        pandas = s.get("preprocessing pandas", {}).get(size)
        if pandas and pandas["cache_hit_seconds"] is not None:
            hit = max(pandas["cache_hit_seconds"], 1e-4)  # the log's resolution
            row(
                "cache hit vs cold preprocessing (speed-up)",
                size,
                hit,
                pandas["seconds"],
                ratio(pandas["seconds"], hit),
                ">= 20x",
                "s",
            )
        exp = s.get("experiment local", {}).get(size)
        if exp:
            row(
                "training samples/s (local trainer)",
                size,
                exp["train_samples_per_second"],
                floor["train_samples_per_second"],
                ratio(exp["train_samples_per_second"], floor["train_samples_per_second"]),
                ">= 0.8x",
            )
            row(
                "whole experiment wall (3 epochs)",
                size,
                exp["wall_seconds"],
                floor["script_seconds"],
                ratio(exp["wall_seconds"], floor["script_seconds"]),
                "<= 2x",
                "s",
            )
            row(
                "test ROC AUC",
                size,
                exp["test_roc_auc"],
                floor["test_roc_auc"],
                ratio(exp["test_roc_auc"], floor["test_roc_auc"]),
                ">= floor",
            )
            row(
                "peak memory (experiment vs floor)",
                size,
                exp["peak_memory_mb"],
                floor["peak_memory_mb"],
                ratio(exp["peak_memory_mb"], floor["peak_memory_mb"]),
                "",
                " MB",
            )
            row("time to first training step", size, exp["first_step_seconds"], None, None, "", "s")
            loader = s.get("loader local", {}).get(size)
            if loader:
                consumed = exp["train_samples_per_second"] / 256
                row(
                    "loader batches/s vs training consumption",
                    size,
                    loader["batches_per_second"],
                    consumed,
                    ratio(loader["batches_per_second"], consumed),
                    ">= 5x",
                )
        ray_exp = s.get("experiment ray", {}).get(size)
        if ray_exp and exp:
            row(
                "backend=ray vs backend=local wall",
                size,
                ray_exp["wall_seconds"],
                exp["wall_seconds"],
                ratio(ray_exp["wall_seconds"], exp["wall_seconds"]),
                "<= 1.5x at 100k",
                "s",
            )
    for start in s.get("startup", {}).values():
        row("`python run.py --help`", "-", start["help_seconds"], None, None, "", "s")
    for size, sc in s.get("scaling", {}).items():
        for variant, name in (
            ("horovod", "horovod"),
            ("ddp", "ddp"),
            ("horovod_cycle5", "horovod, HOROVOD_CYCLE_TIME=5"),
        ):
            if f"{variant}_2" in sc:
                row(
                    f"{name}: 2 workers vs 1 (samples/s, 1 thread each)",
                    size,
                    sc[f"{variant}_2"],
                    sc[f"{variant}_1"],
                    sc[f"{variant}_speedup"],
                    ">= 1.7x",
                )
        for trainer in ("horovod", "ddp"):
            if f"{trainer}_fp16_2" in sc:
                row(
                    f"{trainer}, 2 workers: fp16 gradient compression vs none (samples/s)",
                    size,
                    sc[f"{trainer}_fp16_2"],
                    sc[f"{trainer}_2"],
                    ratio(sc[f"{trainer}_fp16_2"], sc[f"{trainer}_2"]),
                    "",
                )
        row("local trainer, 1 thread (samples/s)", size, sc["local_1"], None, None, "")
        for when in ("", "_after"):
            if f"ceiling{when}" in sc:
                row(
                    f"hardware: 2 bare loops at once vs 1 ({'after' if when else 'before'} the above)",
                    size,
                    sc[f"bare_2{when}"],
                    sc[f"bare_1{when}"],
                    sc[f"ceiling{when}"],
                    "the ceiling for 2 workers",
                )
    for size, over in s.get("overhead", {}).items():
        row(
            "forced distributed path (dask, ray data), one trainer vs local: wall",
            size,
            over["ray_seconds"],
            over["local_seconds"],
            over["ray_vs_local"],
            "<= 1.5x",
            "s",
        )
        row(
            "the same with 2 Horovod workers vs local: wall",
            size,
            over["horovod_seconds"],
            over["local_seconds"],
            over["horovod_vs_local"],
            "<= 2x",
            "s",
        )
        if "arrow_seconds" in over:
            row(
                "the same one trainer with processor=arrow vs local: wall",
                size,
                over["arrow_seconds"],
                over["local_seconds"],
                over["arrow_vs_local"],
                "<= 1.5x",
                "s",
            )
        if "horovod_arrow_seconds" in over:
            row(
                "2 Horovod workers with processor=arrow vs local: wall",
                size,
                over["horovod_arrow_seconds"],
                over["local_seconds"],
                over["horovod_arrow_vs_local"],
                "<= 2x",
                "s",
            )
        late = (
            over["ray_first_step_seconds"] - over["local_first_step_seconds"]
            if over["ray_first_step_seconds"] and over["local_first_step_seconds"]
            else None
        )
        row(
            "first training step, forced distributed path minus local (Ray's start: reference)",
            size,
            late,
            over["ray_start_seconds"],
            None,
            "<= Ray's start + 3 s",
            "s",
        )
        row(
            "training samples/s after epoch 1, Ray Data loader vs local loader (one worker)",
            size,
            over["ray_samples_per_second"],
            over["local_samples_per_second"],
            ratio(over["ray_samples_per_second"], over["local_samples_per_second"]),
            ">= 0.95x",
        )
    for size in s.get("preprocessing pandas", {}):
        pandas = s["preprocessing pandas"][size]
        for engine in PROCESSORS[1:]:
            pre = s.get(f"preprocessing {engine}", {}).get(size)
            if pre:
                row(
                    f"preprocessing rows/s, {engine} on Ray (without Ray's start) vs pandas",
                    size,
                    pre["rows_per_second"],
                    pandas["rows_per_second"],
                    ratio(pre["rows_per_second"], pandas["rows_per_second"]),
                    ">= 0.5x at 1M, >= 1x at 10M",
                )
    ooc = s.get("out of core", {})
    for size, fig in ooc.items():
        row(
            "out-of-core peak memory vs decoded table",
            size,
            fig["peak_memory_mb"],
            fig["decoded_table_mb"],
            ratio(fig["peak_memory_mb"], fig["decoded_table_mb"]),
            f"bounded (object store {fig['object_store_mb']} MB)",
            " MB",
        )
    if len(ooc) >= 2:
        (small, a), (large, b) = list(ooc.items())[0], list(ooc.items())[-1]
        row(
            f"out-of-core peak memory growth, {small} -> {large} rows",
            f"{large}/{small}",
            b["peak_memory_mb"],
            a["peak_memory_mb"],
            ratio(b["peak_memory_mb"], a["peak_memory_mb"]),
            f"data grew {b['decoded_table_mb'] / a['decoded_table_mb']:.0f}x",
            " MB",
        )
    for name, sweep in s.get("sweeps", {}).items():
        row(
            f"sweep of {sweep['trials']} trials: ray launcher vs basic launcher (wall)",
            name,
            sweep["ray_seconds"],
            sweep["basic_seconds"],
            ratio(sweep["ray_seconds"], sweep["basic_seconds"]),
            "",
            "s",
        )
    for name, tune in s.get("tune", {}).items():
        row(
            f"tune sweep of {tune['trials']} trials: ASHA vs no scheduler (wall)",
            name,
            tune["asha"]["seconds"],
            tune["none"]["seconds"],
            tune["wall_ratio"],
            f"best {tune['asha']['best_objective']:.4f} vs {tune['none']['best_objective']:.4f}; "
            f"{tune['asha']['pruned']} pruned, epochs {tune['asha']['epochs_trained']} vs "
            f"{tune['none']['epochs_trained']}",
            "s",
        )
    for name, serving in s.get("serving", {}).items():
        row(
            f"serve: single-row latency p50 ({name})",
            "1 row",
            serving["single_row_p50_ms"],
            None,
            None,
            "",
            " ms",
        )
        row(
            f"serve: single-row latency p99 ({name})",
            "1 row",
            serving["single_row_p99_ms"],
            None,
            None,
            "< 20 ms",
            " ms",
        )
        row(
            f"serve: rows/s in batches of 1,000 ({name}, 4 clients)",
            "1k rows",
            serving["batch_rows_per_second"],
            None,
            None,
            "",
        )
        row(
            f"serve: `command=serve` to healthy ({name})",
            "-",
            serving["seconds_to_healthy"],
            None,
            None,
            "",
            "s",
        )
    prediction = s.get("prediction", {})
    sizes = sorted({key.rsplit(", ", 1)[1] for key in prediction}, key=parse_size)
    for size in sizes:
        local, on_ray = (
            prediction.get(f"local, {size}"),
            prediction.get(f"ray, dask, 2 actors, {size}"),
        )
        if local and on_ray:
            row(
                "predict rows/s: Ray (dask, 2 actors) vs local",
                size,
                on_ray["rows_per_second"],
                local["rows_per_second"],
                ratio(on_ray["rows_per_second"], local["rows_per_second"]),
                "",
            )
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        for path in ("ray, dask, 2 actors", "local"):
            a, b = prediction.get(f"{path}, {small}"), prediction.get(f"{path}, {large}")
            if a and b:
                row(
                    f"predict driver peak memory, {small} -> {large} rows ({path.split(',')[0]})",
                    f"{large}/{small}",
                    b["driver_peak_memory_mb"],
                    a["driver_peak_memory_mb"],
                    ratio(b["driver_peak_memory_mb"], a["driver_peak_memory_mb"]),
                    "<= 1.2x on Ray" if path != "local" else "grows with the data",
                    " MB",
                )
    one, two = s.get("serving", {}).get("1 replica(s)"), s.get("serving", {}).get("2 replica(s)")
    if one and two:
        row(
            "serve: batch rows/s, 2 replicas vs 1",
            "1k rows",
            two["batch_rows_per_second"],
            one["batch_rows_per_second"],
            ratio(two["batch_rows_per_second"], one["batch_rows_per_second"]),
            "",
        )
    return "\n".join(lines) + "\n"


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
        help="comma-separated sections to skip: processors,ray,scaling,overhead,ooc,sweeps,tune,"
        "serving,prediction",
    )
    parser.add_argument(
        "--only",
        default="",
        help="run just these sections (e.g. scaling), keeping the other figures "
        "of the existing figures.json",
    )
    args = parser.parse_args(argv)
    sizes = [2000] if args.smoke else [parse_size(s) for s in args.sizes.split(",")]
    skip = set(filter(None, args.skip.split(",")))
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-"))
    (work / "data").mkdir(parents=True, exist_ok=True)
    suite = Suite(work, Path(args.out), smoke=args.smoke)
    if args.only:
        only = set(args.only.split(","))
        previous = Path(args.out) / "figures.json"
        if previous.exists():
            suite.figures["sections"] = json.loads(previous.read_text())["sections"]
        for rows in sizes:
            data = work / "data" / f"synthetic-{rows}.csv"
            if not data.exists():
                write_csv(rows, data)
            if "scaling" in only:
                suite.figures["sections"].pop("scaling", None)
                suite.scaling(data, rows)
            if "preprocessing" in only:  # pandas: cold build and cache hit, measured together
                suite.preprocessing(data, rows, "pandas")
            if "processors" in only:  # every engine, side by side
                for processor in PROCESSORS:
                    suite.preprocessing(data, rows, processor)
        if "overhead" in only:
            overhead_section(suite, work, args.smoke)
        if "ooc" in only:
            ooc_section(suite, work, args.smoke)
        if "sweeps" in only:
            from bench.sweeps import sweep_figures

            suite.record("sweeps", "3 trials", sweep_figures(work, smoke=args.smoke))
        if "tune" in only:
            tune_section(suite, work, args.smoke)
        if "serving" in only:
            serve_section(suite, work, args.smoke)
        if "prediction" in only:
            prediction_section(suite, work, args.smoke)
        suite.write()
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    suite.startup()
    for rows in sizes:
        data = write_csv(rows, work / "data" / f"synthetic-{rows}.csv")
        epochs = 3
        # Floor and local experiment twice each, interleaved; the best of each counts (shared, noisy machines).
        suite.floor(data, rows, epochs)
        suite.preprocessing(data, rows, "pandas")
        if "processors" not in skip and rows <= 10_000_000:
            for processor in PROCESSORS[1:]:
                suite.preprocessing(data, rows, processor)
        if rows <= 1_000_000 or args.smoke:
            local = suite.experiment(data, rows, "local", epochs)
            suite.loader_rate(local["cache_entry"], rows)
            if not args.smoke:
                suite.floor(data, rows, epochs)
                suite.experiment(data, rows, "local", epochs)
        if "ray" not in skip and (rows == 100_000 or args.smoke):
            suite.experiment(data, rows, "ray", epochs)
        if "scaling" not in skip and (rows == 100_000 or args.smoke):
            suite.scaling(data, rows)
    if "overhead" not in skip:
        overhead_section(suite, work, args.smoke)
    if "ooc" not in skip:
        ooc_section(suite, work, args.smoke)
    if "sweeps" not in skip:
        from bench.sweeps import sweep_figures

        suite.record("sweeps", "3 trials", sweep_figures(work, smoke=args.smoke))
    if "tune" not in skip:
        tune_section(suite, work, args.smoke)
    if "serving" not in skip:
        serve_section(suite, work, args.smoke)
    if "prediction" not in skip:
        prediction_section(suite, work, args.smoke)
    suite.write()


def prediction_section(suite, work: Path, smoke: bool) -> None:
    from bench.prediction import prediction_figures

    sizes = [2000, 20000] if smoke else [1_000_000, 10_000_000]
    data = {}
    for rows in sizes:
        path = work / "data" / f"synthetic-{rows}.csv"
        data[label(rows)] = path if path.exists() else write_csv(rows, path)
    suite.figures["sections"].pop("prediction", None)
    for name, figures in prediction_figures(work, data, measure).items():
        suite.record("prediction", name, figures)


def overhead_section(suite, work: Path, smoke: bool) -> None:
    rows = 2000 if smoke else 100_000
    path = work / "data" / f"synthetic-{rows}.csv"
    suite.figures["sections"].pop("overhead", None)
    suite.overhead(path if path.exists() else write_csv(rows, path), rows, 1 if smoke else 2)


def ooc_section(suite, work: Path, smoke: bool) -> None:
    """Two sizes: bounded memory means the peak does not grow with the data."""
    suite.figures["sections"].pop("out of core", None)
    for rows in [4000] if smoke else [1_000_000, 10_000_000]:
        path = work / "data" / f"synthetic-{rows}.csv"
        suite.out_of_core(path if path.exists() else write_csv(rows, path), rows, 128)


def tune_section(suite, work: Path, smoke: bool) -> None:
    from bench.tune_sweeps import tune_figures

    suite.figures["sections"].pop("tune", None)
    figures = tune_figures(work, smoke=smoke)
    suite.record("tune", f"{figures['trials']} trials", figures)


def serve_section(suite, work: Path, smoke: bool) -> None:
    from bench.serving import serving_figures

    suite.figures["sections"].pop("serving", None)
    for name, figures in serving_figures(work, smoke=smoke).items():
        suite.record("serving", name, figures)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
