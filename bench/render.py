"""The benchmark table: figures.json's sections rendered as figures.md, one row per figure
with its ratio to the floor (or to its pair) and the budget it answers to. Kept apart from
suite.py, which measures; scripts/readme_figures.py pastes the result into docs/benchmarks.md."""

from __future__ import annotations

PROCESSORS = ("pandas", "arrow", "dask", "modin")  # pandas first: the others' reference


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


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
    for name, results in s.get("results", {}).items():
        # Each layer against the one below it: what the default adds to a bare run (plots,
        # importance, report.html), what logger=mlflow adds to the default.
        for variant, below, label_ in (
            ("default", "bare", "plots, importance, report.html"),
            ("mlflow", "default", "logger=mlflow"),
        ):
            value = results.get(f"{variant}_wall_seconds")
            under = results.get(f"{below}_wall_seconds")
            row(
                f"results' cost: {name} with {label_} vs without",
                f"{results['rows']:,}",
                value,
                under,
                ratio(value, under),
                "<= 1.05x",
                "s",
            )
    load = s.get("soak", {}).get("two minutes of load")
    if load:
        for minute, m in load["per_minute"].items():
            row(
                f"serve under load ({load['clients']} clients): minute {minute} p99 vs p50 latency",
                f"{m['requests']} requests",
                m["p99_ms"],
                m["p50_ms"],
                ratio(m["p99_ms"], m["p50_ms"]),
                "",
                " ms",
            )
        row(
            "serve under load: 5xx answers, requests failed after retries",
            f"{load['requests']} requests",
            f"{load['answers_5xx']}, {load['failed_after_retries']}",
            None,
            None,
            "0, 0",
        )
        for n in range(2):
            first = load.get(f"replica_{n}_rss_mb_first_10s")
            last = load.get(f"replica_{n}_rss_mb_last_10s")
            if first and last:
                row(
                    f"serve under load: replica {n} memory, last 10 s vs first",
                    f"{load['seconds']:.0f} s",
                    last,
                    first,
                    ratio(last, first),
                    "within 1.1x",
                    " MB",
                )
    lost = s.get("soak", {}).get("a replica killed under load")
    if lost:
        row(
            "replica SIGKILLed under load: seconds until 2 running again; requests retried",
            f"{lost['requests']} requests",
            lost.get("recovered_after_s"),
            None,
            None,
            f"retried {lost['retried']}, failed twice {lost['failed_more_than_once']}, "
            f"lost {lost['failed_after_retries']}",
            " s",
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
