"""The benchmark table: figures.json's sections rendered as figures.md, one row per figure
with its ratio to the floor (or to its pair) and the budget it answers to. Kept apart from
suite.py, which measures; scripts/readme_figures.py pastes the result into docs/benchmarks.md.

The table is data: TABLE lists, in the table's order, `Each(section, rows)` blocks, whose Row
specs render one row per entry of that section (per size or per name), and a few functions
for the figures that need computing (a growth between two sizes, sizes parsed from keys, the
soak's rows). Adding a figure is adding a Row; render_markdown only walks TABLE."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

PROCESSORS = ("pandas", "arrow", "dask", "modin")  # pandas first: the others' reference


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def ratio(a, b):
    return a / b if a is not None and b else None


class Cells(NamedTuple):
    """One rendered row, as the functions in TABLE yield it."""

    label: str
    size: str
    value: object
    reference: object = None
    ratio: float | None = None
    target: str = ""
    unit: str = ""


# A Row's value or reference: "key", a key of the entry the block is at, or ("section", "key"),
# that key of the other section's entry under the same size or name.
Field = str | tuple[str, str]


@dataclass(frozen=True)
class Row:
    """One figure, rendered for each entry of its block's section.

    label, size and target are str.format templates over the entry's keys, plus {key}: the
    entry's own key (its size or name). The ratio is value / reference unless `ratio` names
    the key where the suite stored it. A row that reads another section is left out where
    that section has nothing under the same key; `when` leaves it out unless the entry has
    that key. Keys a row reads must be there, except with `missing_ok` (then they read None).
    """

    label: str
    value: Field
    reference: Field | None = None
    ratio: str | None = None
    target: str = ""
    unit: str = ""
    size: str = "{key}"
    when: str | None = None
    missing_ok: bool = False

    def cells(self, key: str, entry: dict, sections: dict) -> Iterable[Cells]:
        if self.when is not None and self.when not in entry:
            return
        others = {
            field[0]: sections.get(field[0], {}).get(key)
            for field in (self.value, self.reference)
            if isinstance(field, tuple)
        }
        if not all(others.values()):
            return

        def read(field: Field | None):
            if field is None:
                return None
            source, name = (
                (entry, field) if isinstance(field, str) else (others[field[0]], field[1])
            )
            return source.get(name) if self.missing_ok else source[name]

        # In the order the cells read: a figures.json missing a key fails on the same one.
        names = {**entry, "key": key}
        label, size = self.label.format_map(names), self.size.format_map(names)
        value, reference = read(self.value), read(self.reference)
        r = ratio(value, reference) if self.ratio is None else read(self.ratio)
        yield Cells(label, size, value, reference, r, self.target.format_map(names), self.unit)


# A function in a block: (key, entry, sections) -> rows, for a figure a Row cannot express.
EntryRows = Callable[[str, dict, dict], Iterable[Cells]]


@dataclass(frozen=True)
class Each:
    """Its rows, in order, for each entry of `section` (absent: no rows)."""

    section: str
    rows: tuple[Row | EntryRows, ...]


def cache_hit(size: str, floor: dict, sections: dict) -> Iterable[Cells]:
    pandas = sections.get("preprocessing pandas", {}).get(size)
    if pandas and pandas["cache_hit_seconds"] is not None:
        hit = max(pandas["cache_hit_seconds"], 1e-4)  # the log's resolution
        yield Cells(
            "cache hit vs cold preprocessing (speed-up)",
            size,
            hit,
            pandas["seconds"],
            ratio(pandas["seconds"], hit),
            ">= 20x",
            "s",
        )


def loader_vs_training(size: str, floor: dict, sections: dict) -> Iterable[Cells]:
    exp = sections.get("experiment local", {}).get(size)
    loader = sections.get("loader local", {}).get(size)
    if exp and loader:
        consumed = exp["train_samples_per_second"] / 256  # the loader figure batches 256 rows
        yield Cells(
            "loader batches/s vs training consumption",
            size,
            loader["batches_per_second"],
            consumed,
            ratio(loader["batches_per_second"], consumed),
            ">= 5x",
        )


def first_step_difference(size: str, over: dict, sections: dict) -> Iterable[Cells]:
    late = (
        over["ray_first_step_seconds"] - over["local_first_step_seconds"]
        if over["ray_first_step_seconds"] and over["local_first_step_seconds"]
        else None  # either run logged no first step
    )
    yield Cells(
        "first training step, forced distributed path minus local (Ray's start: reference)",
        size,
        late,
        over["ray_start_seconds"],
        None,  # a difference, compared with Ray's start by the target, not as a ratio
        "<= Ray's start + 3 s",
        "s",
    )


def tune_row(name: str, tune: dict, sections: dict) -> Iterable[Cells]:
    yield Cells(
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


def out_of_core_growth(sections: dict) -> Iterable[Cells]:
    ooc = sections.get("out of core", {})
    if len(ooc) >= 2:
        (small, a), (large, b) = list(ooc.items())[0], list(ooc.items())[-1]
        yield Cells(
            f"out-of-core peak memory growth, {small} -> {large} rows",
            f"{large}/{small}",
            b["peak_memory_mb"],
            a["peak_memory_mb"],
            ratio(b["peak_memory_mb"], a["peak_memory_mb"]),
            f"data grew {b['decoded_table_mb'] / a['decoded_table_mb']:.0f}x",
            " MB",
        )


def prediction_rows(sections: dict) -> Iterable[Cells]:
    # Keys are "<path>, <size>": each size's Ray path against local, then the driver's memory
    # between the smallest and the largest size.
    prediction = sections.get("prediction", {})
    sizes = sorted({key.rsplit(", ", 1)[1] for key in prediction}, key=parse_size)
    for size in sizes:
        local, on_ray = (
            prediction.get(f"local, {size}"),
            prediction.get(f"ray, dask, 2 actors, {size}"),
        )
        if local and on_ray:
            yield Cells(
                "predict rows/s: Ray (dask, 2 actors) vs local",
                size,
                on_ray["rows_per_second"],
                local["rows_per_second"],
                ratio(on_ray["rows_per_second"], local["rows_per_second"]),
            )
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        for path in ("ray, dask, 2 actors", "local"):
            a, b = prediction.get(f"{path}, {small}"), prediction.get(f"{path}, {large}")
            if a and b:
                yield Cells(
                    f"predict driver peak memory, {small} -> {large} rows ({path.split(',')[0]})",
                    f"{large}/{small}",
                    b["driver_peak_memory_mb"],
                    a["driver_peak_memory_mb"],
                    ratio(b["driver_peak_memory_mb"], a["driver_peak_memory_mb"]),
                    "<= 1.2x on Ray" if path != "local" else "grows with the data",
                    " MB",
                )


def soak_rows(sections: dict) -> Iterable[Cells]:
    load = sections.get("soak", {}).get("two minutes of load")
    if load:
        for minute, m in load["per_minute"].items():
            yield Cells(
                f"serve under load ({load['clients']} clients): minute {minute} p99 vs p50 latency",
                f"{m['requests']} requests",
                m["p99_ms"],
                m["p50_ms"],
                ratio(m["p99_ms"], m["p50_ms"]),
                "",
                " ms",
            )
        yield Cells(
            "serve under load: 5xx answers, requests failed after retries",
            f"{load['requests']} requests",
            f"{load['answers_5xx']}, {load['failed_after_retries']}",
            target="0, 0",
        )
        for n in range(2):
            first = load.get(f"replica_{n}_rss_mb_first_10s")
            last = load.get(f"replica_{n}_rss_mb_last_10s")
            if first and last:
                yield Cells(
                    f"serve under load: replica {n} memory, last 10 s vs first",
                    f"{load['seconds']:.0f} s",
                    last,
                    first,
                    ratio(last, first),
                    "within 1.1x",
                    " MB",
                )
    lost = sections.get("soak", {}).get("a replica killed under load")
    if lost:
        yield Cells(
            "replica SIGKILLed under load: seconds until 2 running again; requests retried",
            f"{lost['requests']} requests",
            lost.get("recovered_after_s"),
            target=f"retried {lost['retried']}, failed twice {lost['failed_more_than_once']}, "
            f"lost {lost['failed_after_retries']}",
            unit=" s",
        )


def serving_replicas(sections: dict) -> Iterable[Cells]:
    one, two = (sections.get("serving", {}).get(f"{n} replica(s)") for n in (1, 2))
    if one and two:
        yield Cells(
            "serve: batch rows/s, 2 replicas vs 1",
            "1k rows",
            two["batch_rows_per_second"],
            one["batch_rows_per_second"],
            ratio(two["batch_rows_per_second"], one["batch_rows_per_second"]),
        )


SCALE_FAMILIES = ("default", "gbm", "network")


def scale_rows(sections: dict) -> Iterable[Cells]:
    """The scale ladder (bench/suite.py scale_section): each run's wall and rows/s; per family
    and backend, the largest size's wall over the next smaller one's; on Ray, the trees'
    workers' peaks together against the one-process trees' peak, the driver's peak against
    the smallest size's."""

    def runs(family: str, backend: str, fmt: str) -> dict:
        return sections.get(f"scale {family} {backend} {fmt}", {})

    for fmt in ("csv", "parquet"):
        for family in SCALE_FAMILIES:
            for backend in ("local", "ray"):
                entries = runs(family, backend, fmt)
                sizes = sorted(entries, key=parse_size)
                for size in sizes:
                    e = entries[size]
                    yield Cells(
                        f"scale: {family}, {backend}, {fmt}: wall (rows/s)",
                        size,
                        e["wall_seconds"],
                        e.get("rows_per_second"),
                        unit="",
                    )
                for small, large in zip(sizes, sizes[1:], strict=False):
                    yield Cells(
                        f"scale: {family}, {backend}, {fmt}: wall at {large} vs at {small}",
                        f"{large}/{small}",
                        entries[large]["wall_seconds"],
                        entries[small]["wall_seconds"],
                        ratio(entries[large]["wall_seconds"], entries[small]["wall_seconds"]),
                        target=f"<= {1.1 * parse_size(large) / parse_size(small):g}x",
                        unit="s",
                    )
                if backend == "ray" and len(sizes) > 1:
                    first, last = entries[sizes[0]], entries[sizes[-1]]
                    yield Cells(
                        f"scale: {family}, ray, {fmt}: the driver's peak PSS",
                        f"{sizes[-1]}/{sizes[0]}",
                        last["driver_peak_memory_mb"],
                        first["driver_peak_memory_mb"],
                        ratio(last["driver_peak_memory_mb"], first["driver_peak_memory_mb"]),
                        target="flat",
                        unit=" MB",
                    )
        local, ray = runs("gbm", "local", fmt), runs("gbm", "ray", fmt)
        for size in sorted(set(local) & set(ray), key=parse_size):
            workers = [p for p, name in ray[size]["worker_peaks_mb"] if "Worker" in name]
            together = sum(sorted(workers, reverse=True)[:2]) or None
            yield Cells(
                f"scale: gbm on Ray, 2 workers' peak PSS together vs one process ({fmt})",
                size,
                together,
                local[size]["peak_memory_mb"],
                ratio(together, local[size]["peak_memory_mb"]),
                target="<= 1.3x",
                unit=" MB",
            )
            yield Cells(
                f"scale: gbm test ROC AUC on Ray (2 workers) vs one process ({fmt})",
                size,
                ray[size]["test_roc_auc"],
                local[size]["test_roc_auc"],
                target="within 0.002",
            )


TABLE: tuple[Each | Callable[[dict], Iterable[Cells]], ...] = (
    Each(
        "floor",
        (
            *(
                Row(
                    f"preprocessing rows/s ({processor})",
                    (f"preprocessing {processor}", "rows_per_second"),
                    "prep_rows_per_second",
                    target=">= 0.5x" if processor == "pandas" else "",
                )
                for processor in PROCESSORS
            ),
            cache_hit,
            Row(
                "training samples/s (local trainer)",
                ("experiment local", "train_samples_per_second"),
                "train_samples_per_second",
                target=">= 0.8x",
            ),
            Row(
                "whole experiment wall (3 epochs)",
                ("experiment local", "wall_seconds"),
                "script_seconds",
                target="<= 2x",
                unit="s",
            ),
            Row(
                "test ROC AUC",
                ("experiment local", "test_roc_auc"),
                "test_roc_auc",
                target=">= floor",
            ),
            Row(
                "peak memory (experiment vs floor)",
                ("experiment local", "peak_memory_mb"),
                "peak_memory_mb",
                unit=" MB",
            ),
            Row(
                "time to first training step",
                ("experiment local", "first_step_seconds"),
                unit="s",
            ),
            loader_vs_training,
            Row(
                "backend=ray vs backend=local wall",
                ("experiment ray", "wall_seconds"),
                ("experiment local", "wall_seconds"),
                target="<= 1.5x at 100k",
                unit="s",
            ),
        ),
    ),
    Each("startup", (Row("`python run.py --help`", "help_seconds", unit="s", size="-"),)),
    Each(
        "start-up tricks",
        (
            Row(
                "start-up trick `{key}` ({what}): {figure}, with it vs without",
                "with_seconds",
                "without_seconds",
                target="saves > 0.3 s",
                unit="s",
                size="-",
            ),
        ),
    ),
    Each(
        "scaling",
        (
            *(
                Row(
                    f"{name}: 2 workers vs 1 (samples/s, 1 thread each)",
                    f"{variant}_2",
                    f"{variant}_1",
                    ratio=f"{variant}_speedup",
                    target=">= 1.7x",
                    when=f"{variant}_speedup",  # both worker counts measured
                )
                for variant, name in (
                    ("horovod", "horovod"),
                    ("ddp", "ddp"),
                    ("horovod_cycle5", "horovod, HOROVOD_CYCLE_TIME=5"),
                )
            ),
            *(
                Row(
                    f"{trainer}, 2 workers: fp16 gradient compression vs none (samples/s)",
                    f"{trainer}_fp16_2",
                    f"{trainer}_2",
                    when=f"{trainer}_fp16_2",
                )
                for trainer in ("horovod", "ddp")
            ),
            Row("local trainer, 1 thread (samples/s)", "local_1"),
            *(
                Row(
                    f"hardware: 2 bare loops at once vs 1 ({'after' if phase else 'before'} the above)",
                    f"bare_2{phase}",
                    f"bare_1{phase}",
                    ratio=f"ceiling{phase}",
                    target="the ceiling for 2 workers",
                    when=f"ceiling{phase}",
                )
                for phase in ("", "_after")
            ),
        ),
    ),
    Each(
        "overhead",
        (
            Row(
                "forced distributed path (dask, ray data), one trainer vs local: wall",
                "ray_seconds",
                "local_seconds",
                ratio="ray_vs_local",
                target="<= 1.5x",
                unit="s",
            ),
            Row(
                "the same with 2 Horovod workers vs local: wall",
                "horovod_seconds",
                "local_seconds",
                ratio="horovod_vs_local",
                target="<= 2x",
                unit="s",
            ),
            # The arrow runs came later: older figures.json files lack them.
            Row(
                "the same one trainer with processor=arrow vs local: wall",
                "arrow_seconds",
                "local_seconds",
                ratio="arrow_vs_local",
                target="<= 1.5x",
                unit="s",
                when="arrow_seconds",
            ),
            Row(
                "2 Horovod workers with processor=arrow vs local: wall",
                "horovod_arrow_seconds",
                "local_seconds",
                ratio="horovod_arrow_vs_local",
                target="<= 2x",
                unit="s",
                when="horovod_arrow_seconds",
            ),
            Row(
                "`backend=ray trainer.num_workers=2` (2 Horovod workers) vs local: wall",
                "two_workers_seconds",
                "local_seconds",
                ratio="two_workers_vs_local",
                target="<= 2x",
                unit="s",
                when="two_workers_seconds",
            ),
            Row(
                "the same attached to a warm `ray start` Ray (backend.address) vs local: wall",
                "two_workers_attached_seconds",
                "local_seconds",
                ratio="two_workers_attached_vs_local",
                target="<= 2x",
                unit="s",
                when="two_workers_attached_seconds",
            ),
            first_step_difference,
            Row(
                "training samples/s after epoch 1, Ray Data loader vs local loader (one worker)",
                "ray_samples_per_second",
                "local_samples_per_second",
                target=">= 0.95x",
            ),
        ),
    ),
    Each(
        "preprocessing pandas",
        tuple(
            Row(
                f"preprocessing rows/s, {engine} on Ray (without Ray's start) vs pandas",
                (f"preprocessing {engine}", "rows_per_second"),
                "rows_per_second",
                target=">= 0.5x at 1M, >= 1x at 10M",
            )
            for engine in PROCESSORS[1:]
        ),
    ),
    Each(
        "families",
        (
            Row(
                "model=gbm vs the network (wall, each trained as by default; same table)",
                "gbm_wall_seconds",
                "network_wall_seconds",
                target="<= 1x, AUC within 0.005",
                unit="s",
            ),
            Row(
                "model=gbm test ROC AUC vs the network's",
                "gbm_test_roc_auc",
                "network_test_roc_auc",
            ),
            Row(
                "model=ensemble vs the network (wall)",
                "ensemble_wall_seconds",
                "network_wall_seconds",
                target="<= 1.6x",
                unit="s",
            ),
            Row(
                "model=ensemble test ROC AUC vs the network's",
                "ensemble_test_roc_auc",
                "network_test_roc_auc",
            ),
        ),
    ),
    Each(
        "inference",
        (
            Row(
                "type inference's sample: 40 places across the file vs the file's head",
                "spread_seconds",
                "head_seconds",
                target="<= 2x, < 3 s at 10M",
                unit="s",
            ),
            Row(
                "its peak memory vs the head sample's ({file_mb:.0f} MB file)",
                "spread_peak_memory_mb",
                "head_peak_memory_mb",
                target="flat in the file's size",
                unit=" MB",
            ),
        ),
    ),
    Each(
        "out of core",
        (
            Row(
                "out-of-core peak memory vs decoded table",
                "peak_memory_mb",
                "decoded_table_mb",
                target="bounded (object store {object_store_mb} MB)",
                unit=" MB",
            ),
        ),
    ),
    out_of_core_growth,
    Each(
        "sweeps",
        (
            Row(
                "sweep of {trials} trials: ray launcher vs basic launcher (wall)",
                "ray_seconds",
                "basic_seconds",
                target="<= 1.3x",
                unit="s",
            ),
            Row(
                "the same attached to a warm `ray start` Ray vs basic launcher (wall)",
                "ray_attached_seconds",
                "basic_seconds",
                target="<= 1.3x",
                unit="s",
                when="ray_attached_seconds",
            ),
            Row(
                "the same, a fresh worker per trial (`max_calls=1`) vs basic launcher (wall)",
                "ray_attached_fresh_seconds",
                "basic_seconds",
                unit="s",
                when="ray_attached_fresh_seconds",
            ),
        ),
    ),
    Each("tune", (tune_row,)),
    Each(
        "serving",
        (
            Row(
                "serve: single-row latency p50 ({key})",
                "single_row_p50_ms",
                size="1 row",
                unit=" ms",
            ),
            Row(
                "serve: single-row latency p99 ({key})",
                "single_row_p99_ms",
                size="1 row",
                target="<= 10 ms",
                unit=" ms",
            ),
            Row(
                "serve: `GET /schema` p50, no model: the proxy hop ({key})",
                "hop_p50_ms",
                size="1 row",
                unit=" ms",
                when="hop_p50_ms",
            ),
            Row(
                "serve: the model's part in process p50, vs the hop ({key})",
                "predictor_p50_ms",
                "hop_p50_ms",
                size="1 row",
                unit=" ms",
                when="predictor_p50_ms",
            ),
            Row(
                "serve: served p99 vs the Predictor's in process ({key})",
                "single_row_p99_ms",
                "predictor_p99_ms",
                size="1 row",
                target="<= 2x",
                unit=" ms",
                when="predictor_p99_ms",
            ),
            Row(  # the floor under the row above: a route that never reaches the model
                "serve: `GET /schema` p99 (the hop, no model) vs the Predictor's p99 ({key})",
                "hop_p99_ms",
                "predictor_p99_ms",
                size="1 row",
                unit=" ms",
                when="hop_p99_ms",
            ),
            Row(
                "serve: the Predictor's p50 vs a bare forward on a ready tensor ({key})",
                "predictor_p50_ms",
                "forward_p50_ms",
                size="1 row",
                target="<= 3x",
                unit=" ms",
                when="forward_p50_ms",
            ),
            Row(
                "export: the ONNX graph in onnxruntime on a ready row vs the forward ({key})",
                "onnx_p50_ms",
                "forward_p50_ms",
                size="1 row",
                unit=" ms",
                when="onnx_p50_ms",
            ),
            Row(
                "serve: rows/s in batches of 1,000 ({key}, 4 clients)",
                "batch_rows_per_second",
                size="1k rows",
            ),
            Row(
                "serve: `command=serve` to healthy ({key})",
                "seconds_to_healthy",
                size="-",
                unit="s",
            ),
        ),
    ),
    prediction_rows,
    # command=explain beside command=predict on the same model and table (keys: "<family>, <rows>").
    Each(
        "explanation",
        (
            Row(
                "explain rows/s vs predict ({key})",
                "explain_rows_per_second",
                "predict_rows_per_second",
                size="-",
            ),
        ),
    ),
    # k_fold=5 against one experiment on the same table (key: its rows).
    Each(
        "k_fold",
        (
            Row(
                "k_fold=5 wall vs one experiment ({key} rows)",
                "k_fold_seconds",
                "one_run_seconds",
                size="{key}",
                unit="s",
            ),
        ),
    ),
    # Each layer against the one below it: what the default adds to a bare run (plots,
    # importance, report.html), what logger=mlflow adds to the default; median walls, and the
    # median of the rounds' paired ratios. A run that failed leaves its key out: "-".
    Each(
        "results",
        tuple(
            Row(
                f"results' cost: {{key}} with {layer} vs without",
                f"{variant}_wall_seconds",
                f"{below}_wall_seconds",
                ratio=f"{variant}_ratio",
                target="<= 1.05x",
                unit="s",
                size="{rows:,}",
                missing_ok=True,
            )
            for variant, below, layer in (
                ("default", "bare", "plots, importance, report.html"),
                ("mlflow", "default", "logger=mlflow"),
            )
        ),
    ),
    soak_rows,
    serving_replicas,
    scale_rows,
)


def line(cells: Cells) -> str:
    unit, r = cells.unit, cells.ratio

    def fmt(v):
        return "-" if v is None else f"{v:,.3g}{unit}" if isinstance(v, float) else f"{v}{unit}"

    return (
        f"| {cells.label} | {cells.size} | {fmt(cells.value)} | {fmt(cells.reference)} | "
        f"{'-' if r is None else f'{r:.2f}x'} | {cells.target} |"
    )


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
    for part in TABLE:
        if isinstance(part, Each):
            for key, entry in s.get(part.section, {}).items():
                for row in part.rows:
                    rows = row.cells(key, entry, s) if isinstance(row, Row) else row(key, entry, s)
                    lines.extend(map(line, rows))
        else:
            lines.extend(map(line, part(s)))
    return "\n".join(lines) + "\n"
