"""bench/render.py: the benchmark table rendered from figures.json's sections by its row specs
(pure Python, no run: the figures are made up)."""

import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT))  # bench/ is a directory of scripts, importable as a package
from bench.render import PROCESSORS, TABLE, Each, Row, parse_size, ratio, render_markdown  # noqa: E402

MACHINE = {"date": "2026-01-01", "cpus": 16, "memory_gb": 64, "python": "3.11.7"}
HEADER_LINES = 4  # the "Measured ..." line, a blank line, the column names, the rule


def figures() -> dict:
    """Every section render_markdown reads, two sizes where it renders per size."""
    sizes = ("100k", "1M")
    overhead = {
        "local_seconds": 30.0,
        "ray_seconds": 40.0,
        "horovod_seconds": 55.0,
        "ray_vs_local": 1.5,  # not 40 / 30: the suite's own ratio is what is shown
        "horovod_vs_local": 55 / 30,
        "local_first_step_seconds": 1.5,
        "ray_first_step_seconds": 4.25,
        "ray_start_seconds": 2.5,
        "local_samples_per_second": 9000.0,
        "ray_samples_per_second": 8700.0,
    }
    sections = {
        "floor": {
            size: {
                "prep_rows_per_second": 1.5e6,
                "train_samples_per_second": 9.1e4,
                "script_seconds": 12.5,
                "test_roc_auc": 0.8123,
                "peak_memory_mb": 812.0,
            }
            for size in sizes
        },
        **{
            f"preprocessing {processor}": {
                size: {
                    "rows_per_second": 1.1e6 * (i + 1),
                    "seconds": 3.3,
                    "cache_hit_seconds": 0.01,
                }
                for size in sizes
            }
            for i, processor in enumerate(PROCESSORS)
        },
        "experiment local": {
            "100k": {
                "train_samples_per_second": 8.7e4,
                "wall_seconds": 20.0,
                "test_roc_auc": 0.8111,
                "peak_memory_mb": 1024.0,
                "first_step_seconds": 1.25,
            }
        },
        "loader local": {"100k": {"batches_per_second": 4000.0}},
        "experiment ray": {"100k": {"wall_seconds": 25.0}},
        "startup": {"run.py": {"help_seconds": 1.234}},
        "scaling": {
            "100k": {
                "local_1": 5000.0,
                "horovod_1": 5000.0,
                "horovod_2": 9100.0,
                "horovod_speedup": 1.82,
                "bare_1": 100.0,
                "bare_2": 195.0,
                "ceiling": 1.95,
            }
        },
        "overhead": {
            "100k": {
                **overhead,
                "arrow_seconds": 35.0,
                "arrow_vs_local": 35 / 30,
                "horovod_arrow_seconds": 50.0,
                "horovod_arrow_vs_local": 50 / 30,
                "two_workers_seconds": 72.0,
                "two_workers_vs_local": 72 / 30,
                "two_workers_attached_seconds": 48.0,
                "two_workers_attached_vs_local": 48 / 30,
            },
            "1M": {**overhead, "ray_first_step_seconds": None},  # written before the arrow runs
        },
        "out of core": {
            "1M": {"peak_memory_mb": 900.0, "decoded_table_mb": 300.0, "object_store_mb": 2000},
            "10M": {"peak_memory_mb": 950.0, "decoded_table_mb": 3000.0, "object_store_mb": 2000},
        },
        "sweeps": {
            "100k": {
                "trials": 4,
                "ray_seconds": 80.0,
                "basic_seconds": 120.0,
                "ray_attached_seconds": 60.0,
            }
        },
        "tune": {
            "100k": {
                "trials": 8,
                "wall_ratio": 0.55,
                "asha": {
                    "seconds": 100.0,
                    "best_objective": 0.8123,
                    "pruned": 5,
                    "epochs_trained": 12,
                },
                "none": {
                    "seconds": 180.0,
                    "best_objective": 0.8119,
                    "pruned": 0,
                    "epochs_trained": 24,
                },
            }
        },
        "serving": {
            f"{n} replica(s)": {
                "single_row_p50_ms": 4.5,
                "single_row_p99_ms": 12.0,
                "hop_p50_ms": 3.0,
                "hop_p99_ms": 9.0,
                "predictor_p50_ms": 0.75,
                "predictor_p99_ms": 1.0,
                "batch_rows_per_second": 12000.0 * n,
                "seconds_to_healthy": 8.0,
            }
            for n in (1, 2)
        },
        "prediction": {
            f"{path}, {size}": {
                "rows_per_second": 5e4 * (i + 1),
                "driver_peak_memory_mb": 300.0 + i,
            }
            for path in ("local", "ray, dask, 2 actors")
            for i, size in enumerate(("1M", "10k"))  # not in size order: the table sorts them
        },
        "results": {
            "default experiment": {
                "rows": 100000,
                "bare_wall_seconds": 20.0,
                "default_wall_seconds": 20.5,  # no mlflow figure: that run failed
                "default_ratio": 1.03,  # the rounds' paired ratios' median, shown as stored
            }
        },
        "soak": {
            "two minutes of load": {
                "seconds": 120.3,
                "clients": 4,
                "requests": 9000,
                "answers_5xx": 0,
                "failed_after_retries": 0,
                "per_minute": {
                    "0": {"requests": 4500, "p50_ms": 10.0, "p99_ms": 40.0},
                    "1": {"requests": 4500, "p50_ms": 11.0, "p99_ms": 42.5},
                },
                "replica_0_rss_mb_first_10s": 400.0,
                "replica_0_rss_mb_last_10s": 410.0,
            },
            "a replica killed under load": {
                "requests": 500,
                "retried": 3,
                "failed_more_than_once": 0,
                "failed_after_retries": 0,
                "recovered_after_s": None,
            },
        },
    }
    return {"machine": MACHINE, "sections": sections}


def rows(fig: dict) -> list[str]:
    return render_markdown(fig).splitlines()[HEADER_LINES:]


def rows_labelled(fig: dict, label: str) -> list[str]:
    return [line for line in rows(fig) if line.startswith(f"| {label} |")]


def test_header_and_no_rows_without_sections():
    assert render_markdown({"machine": MACHINE, "sections": {}}) == (
        "Measured 2026-01-01 on 16 CPUs / 64 GiB, Python 3.11.7; every ratio compares two "
        "figures of the same run.\n"
        "\n"
        "| figure | size | runner | floor / reference | ratio | target |\n"
        "|---|---|---|---|---|---|\n"
    )


def test_a_row_spec_renders_value_reference_ratio_and_target():
    fig = figures()
    assert rows_labelled(fig, "training samples/s (local trainer)") == [
        "| training samples/s (local trainer) | 100k | 8.7e+04 | 9.1e+04 | 0.96x | >= 0.8x |"
    ]
    assert rows_labelled(fig, "whole experiment wall (3 epochs)") == [
        "| whole experiment wall (3 epochs) | 100k | 20s | 12.5s | 1.60x | <= 2x |"
    ]
    # A row reading another section is left out at a size that section lacks (1M here).
    assert [line.split(" | ")[1] for line in rows_labelled(fig, "test ROC AUC")] == ["100k"]


def test_no_reference_or_no_value_prints_a_dash():
    fig = figures()
    assert rows_labelled(fig, "time to first training step") == [
        "| time to first training step | 100k | 1.25s | - | - |  |"
    ]
    assert rows_labelled(fig, "`python run.py --help`") == [
        "| `python run.py --help` | - | 1.23s | - | - |  |"
    ]
    # results' cost reads missing figures as None: the mlflow run has none.
    assert rows_labelled(
        fig, "results' cost: default experiment with logger=mlflow vs without"
    ) == [
        "| results' cost: default experiment with logger=mlflow vs without | 100,000 | - | "
        "20.5s | - | <= 1.05x |"
    ]
    assert rows_labelled(
        fig, "results' cost: default experiment with plots, importance, report.html vs without"
    ) == [
        "| results' cost: default experiment with plots, importance, report.html vs without | "
        "100,000 | 20.5s | 20s | 1.03x | <= 1.05x |"
    ]


def test_a_precomputed_ratio_is_shown_as_stored():
    fig = figures()
    assert rows_labelled(
        fig, "forced distributed path (dask, ray data), one trainer vs local: wall"
    ) == [
        "| forced distributed path (dask, ray data), one trainer vs local: wall | 100k | 40s | "
        "30s | 1.50x | <= 1.5x |",
        "| forced distributed path (dask, ray data), one trainer vs local: wall | 1M | 40s | "
        "30s | 1.50x | <= 1.5x |",
    ]


def test_optional_keys_gate_their_rows():
    fig = figures()
    # The arrow keys are only in 100k's overhead entry; ddp and the after-ceiling nowhere.
    arrow = "the same one trainer with processor=arrow vs local: wall"
    assert [line.split(" | ")[1] for line in rows_labelled(fig, arrow)] == ["100k"]
    assert not [line for line in rows(fig) if line.startswith("| ddp")]
    assert rows_labelled(fig, "hardware: 2 bare loops at once vs 1 (before the above)") == [
        "| hardware: 2 bare loops at once vs 1 (before the above) | 100k | 195 | 100 | 1.95x | "
        "the ceiling for 2 workers |"
    ]
    assert not rows_labelled(fig, "hardware: 2 bare loops at once vs 1 (after the above)")
    attached = "the same attached to a warm `ray start` Ray (backend.address) vs local: wall"
    assert rows_labelled(fig, attached) == [f"| {attached} | 100k | 48s | 30s | 1.60x | <= 2x |"]


def test_a_missing_or_empty_section_adds_no_row():
    full = rows(figures())
    for name in figures()["sections"]:
        for empty in (None, {}):
            fig = figures()
            if empty is None:
                del fig["sections"][name]
            else:
                fig["sections"][name] = empty
            left = rows(fig)
            assert len(left) < len(full), name
            # Only rows go; the others keep their order.
            assert [line for line in full if line in left] == left, name


def test_label_size_and_target_templates():
    fig = figures()
    assert rows_labelled(fig, "sweep of 4 trials: ray launcher vs basic launcher (wall)") == [
        "| sweep of 4 trials: ray launcher vs basic launcher (wall) | 100k | 80s | 120s | 0.67x "
        "| <= 1.3x |"
    ]
    attached = "the same attached to a warm `ray start` Ray vs basic launcher (wall)"
    assert rows_labelled(fig, attached) == [f"| {attached} | 100k | 60s | 120s | 0.50x | <= 1.3x |"]
    assert rows_labelled(fig, "out-of-core peak memory vs decoded table")[0] == (
        "| out-of-core peak memory vs decoded table | 1M | 900 MB | 300 MB | 3.00x | "
        "bounded (object store 2000 MB) |"
    )
    assert rows_labelled(fig, "serve: single-row latency p99 (2 replica(s))") == [
        "| serve: single-row latency p99 (2 replica(s)) | 1 row | 12 ms | - | - | <= 10 ms |"
    ]
    assert rows_labelled(
        fig, "serve: the model's part in process p50, vs the hop (1 replica(s))"
    ) == [
        "| serve: the model's part in process p50, vs the hop (1 replica(s)) | 1 row | 0.75 ms "
        "| 3 ms | 0.25x |  |"
    ]


def test_computed_rows():
    fig = figures()
    assert rows_labelled(fig, "out-of-core peak memory growth, 1M -> 10M rows") == [
        "| out-of-core peak memory growth, 1M -> 10M rows | 10M/1M | 950 MB | 900 MB | 1.06x | "
        "data grew 10x |"
    ]
    # Prediction sizes come from the keys, smallest first.
    assert [
        line.split(" | ")[1]
        for line in rows_labelled(fig, "predict rows/s: Ray (dask, 2 actors) vs local")
    ] == ["10k", "1M"]
    assert rows_labelled(fig, "predict driver peak memory, 10k -> 1M rows (local)") == [
        "| predict driver peak memory, 10k -> 1M rows (local) | 1M/10k | 300 MB | 301 MB | "
        "1.00x | grows with the data |"
    ]
    first_step = "first training step, forced distributed path minus local (Ray's start: reference)"
    assert rows_labelled(fig, first_step) == [
        f"| {first_step} | 100k | 2.75s | 2.5s | - | <= Ray's start + 3 s |",
        f"| {first_step} | 1M | - | 2.5s | - | <= Ray's start + 3 s |",
    ]
    assert rows_labelled(fig, "tune sweep of 8 trials: ASHA vs no scheduler (wall)") == [
        "| tune sweep of 8 trials: ASHA vs no scheduler (wall) | 100k | 100s | 180s | 0.55x | "
        "best 0.8123 vs 0.8119; 5 pruned, epochs 12 vs 24 |"
    ]
    soak = [line for line in rows(fig) if "under load" in line]
    assert soak == [
        "| serve under load (4 clients): minute 0 p99 vs p50 latency | 4500 requests | 40 ms | "
        "10 ms | 4.00x |  |",
        "| serve under load (4 clients): minute 1 p99 vs p50 latency | 4500 requests | 42.5 ms | "
        "11 ms | 3.86x |  |",
        "| serve under load: 5xx answers, requests failed after retries | 9000 requests | 0, 0 | "
        "- | - | 0, 0 |",
        "| serve under load: replica 0 memory, last 10 s vs first | 120 s | 410 MB | 400 MB | "
        "1.02x | within 1.1x |",
        "| replica SIGKILLed under load: seconds until 2 running again; requests retried | "
        "500 requests | - | - | - | retried 3, failed twice 0, lost 0 |",
    ]
    assert rows(fig)[-1] == (
        "| serve: batch rows/s, 2 replicas vs 1 | 1k rows | 2.4e+04 | 1.2e+04 | 2.00x |  |"
    )


def test_adding_a_row_spec_adds_its_row(monkeypatch):
    fig = figures()
    fig["sections"]["sweeps"]["100k"]["tune_seconds"] = 60.0
    spec = Row("sweep: tune vs basic (wall)", "tune_seconds", "basic_seconds", unit="s")
    table = [
        Each(p.section, (*p.rows, spec)) if isinstance(p, Each) and p.section == "sweeps" else p
        for p in TABLE
    ]
    monkeypatch.setattr("bench.render.TABLE", tuple(table))
    assert rows_labelled(fig, "sweep: tune vs basic (wall)") == [
        "| sweep: tune vs basic (wall) | 100k | 60s | 120s | 0.50x |  |"
    ]


def test_the_input_is_not_changed():
    fig = figures()
    render_markdown(fig)
    assert fig == figures()


def test_parse_size_and_ratio():
    assert [parse_size(text) for text in ("2000", "100k", "1M", " 2.5m ", "10K")] == [
        2000,
        100_000,
        1_000_000,
        2_500_000,
        10_000,
    ]
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(None, 2.0) is None
    assert ratio(3.0, None) is None
    assert ratio(3.0, 0) is None
