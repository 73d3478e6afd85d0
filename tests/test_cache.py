"""The preprocessing cache: hit, miss, rebuild, atomic publish, one build under concurrency."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, compose_config, error_lines, run_experiment

from runner.assembly import assemble
from runner.processing.pandas_processor import PandasProcessor


def entries(cache_dir):
    return (
        sorted(p for p in cache_dir.iterdir() if (p / "meta.json").exists())
        if cache_dir.exists()
        else []
    )


def preprocess(tmp_path, cache_dir, *overrides):
    # model=synthetic: the feature lists written out, so that overrides can edit them.
    run_experiment(tmp_path / "run", cache_dir, "command=preprocess", "model=synthetic", *overrides)


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "data.csv"
    from runner.processing.synthetic import make_synthetic

    make_synthetic(500).to_csv(path, index=False)
    return path


def test_hit_skips_and_says_so(tmp_path, cache_dir, caplog):
    caplog.set_level("INFO")
    preprocess(tmp_path, cache_dir)
    assert "cache miss" in caplog.text
    first = entries(cache_dir)
    stamp = (first[0] / "meta.json").stat().st_mtime_ns
    caplog.clear()
    preprocess(tmp_path, cache_dir)
    assert "preprocessing skipped: cache hit" in caplog.text
    assert entries(cache_dir) == first
    assert (first[0] / "meta.json").stat().st_mtime_ns == stamp


def test_training_options_reuse_the_entry(tmp_path, cache_dir):
    preprocess(tmp_path, cache_dir)
    for change in (
        ["trainer.learning_rate=0.1", "trainer.epochs=2"],
        ["model.hidden_size=8"],
        ["model.input_features.4.embedding_size=3"],
        ["loader.shuffle=false"],
        ["seed=9"],
    ):
        preprocess(tmp_path, cache_dir, *change)
        assert len(entries(cache_dir)) == 1, change


def test_preprocessing_options_rebuild(tmp_path, cache_dir):
    preprocess(tmp_path, cache_dir)
    changes = [
        ["+model.input_features.0.preprocessing.normalization=minmax"],
        ["dataset.split.seed=1"],
        ["dataset.split.ratios=[0.8,0.1,0.1]"],
        ["dataset.synthetic_rows=2000"],
        ["model.input_features=[{name:x1,type:number}]"],
    ]
    for i, change in enumerate(changes, start=2):
        preprocess(tmp_path, cache_dir, *change)
        assert len(entries(cache_dir)) == i, change


def test_data_change_rebuilds(tmp_path, cache_dir, csv):
    preprocess(tmp_path, cache_dir, f"dataset.path={csv}")
    preprocess(tmp_path, cache_dir, f"dataset.path={csv}")
    assert len(entries(cache_dir)) == 1
    frame = pd.read_csv(csv)
    frame.loc[0, "x1"] = 123.0  # same size is possible; the content hash still changes
    frame.to_csv(csv, index=False)
    preprocess(tmp_path, cache_dir, f"dataset.path={csv}")
    assert len(entries(cache_dir)) == 2


def test_content_hash_is_memoized_by_stat_and_redone_on_change(tmp_path, csv, monkeypatch):
    import runner.processing.source as source_module
    from runner.config import DatasetConfig
    from runner.processing.source import DataSource

    monkeypatch.setattr(source_module, "HASH_MEMO", str(tmp_path / "memo"))
    calls = []
    real = source_module._content_hash
    monkeypatch.setattr(
        source_module, "_content_hash", lambda fs, path: calls.append(path) or real(fs, path)
    )
    source = DataSource.from_config(DatasetConfig(path=str(csv)))
    first = source.fingerprint()
    assert source.fingerprint() == first and len(calls) == 1  # the second look is a stat
    content = csv.read_text()
    csv.write_text(content.replace(",", ";", 1).replace(";", ",", 1) + "")  # rewritten: new mtime
    import os

    os.utime(csv, ns=(os.stat(csv).st_atime_ns, os.stat(csv).st_mtime_ns + 1_000_000))
    assert source.fingerprint()["files"][0]["blake2b"] == first["files"][0]["blake2b"]  # same bytes
    assert len(calls) == 2  # but the hash was computed again


def test_entry_contents(tmp_path, cache_dir):
    preprocess(tmp_path, cache_dir)
    (entry,) = entries(cache_dir)
    meta = json.loads((entry / "meta.json").read_text())
    total = 0
    for split in ("train", "validation", "test"):
        table = pq.read_table(entry / meta["data"] / split)
        assert table.num_rows == meta["rows"][split]
        total += table.num_rows
    assert total == 10000
    assert meta["features"]["color"]["stats"]["vocab"][0] in {
        "red",
        "green",
        "blue",
        "yellow",
        "purple",
    }
    # Statistics come from the training split only.
    train_rows = meta["rows"]["train"]
    assert 0.65 * 10000 < train_rows < 0.75 * 10000


class FailingProcessor(PandasProcessor):
    """Writes the first split, then fails: the crash the cache must survive."""

    def map_write(self, frame, fn, out):
        from runner.processing.partitions import write_splits

        write_splits({"train": fn(frame, 0)["train"]}, out, 0)  # one split written, then the crash
        raise OSError("disk full")


def test_failed_build_leaves_nothing_readable(tmp_path, cache_dir):
    cfg = compose_config([f"cache_dir={cache_dir}", "command=preprocess"])
    plan = assemble(cfg, tmp_path / "run")
    plan.processor = FailingProcessor()
    run = plan.resolve()
    from runner.commands import command_preprocess

    with pytest.raises(OSError):
        command_preprocess(run)
    assert entries(cache_dir) == []
    assert not list(cache_dir.glob("*/data-*")), "the failed build's files were left behind"
    preprocess(tmp_path, cache_dir)  # and the next run builds it normally
    assert len(entries(cache_dir)) == 1


@pytest.mark.slow
def test_killed_build_is_never_read(tmp_path, cache_dir):
    """SIGKILL a real preprocessing run mid-build: no complete-looking entry appears,
    and the next run rebuilds."""
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        "command=preprocess",
        f"cache_dir={cache_dir}",
        "dataset.synthetic_rows=1500000",
        f"hydra.run.dir={tmp_path / 'killed'}",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not list(cache_dir.glob("*/data-*/*")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list(cache_dir.glob("*/data-*")), "the build was not caught in the middle"
    assert entries(cache_dir) == []
    preprocess(tmp_path, cache_dir, "dataset.synthetic_rows=1500000")
    assert len(entries(cache_dir)) == 1


def test_concurrent_runs_build_once(tmp_path, cache_dir):
    """Two runs started together: one builds, the other waits and reuses it."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "run.py"),
                "command=preprocess",
                f"cache_dir={cache_dir}",
                "dataset.synthetic_rows=300000",
                f"hydra.run.dir={tmp_path / str(i)}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(3)
    ]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    assert sum("cache miss" in log for log in logs) == 1, logs
    assert sum("cache hit" in log for log in logs) == 2, logs
    assert len(entries(cache_dir)) == 1


def test_an_unwritable_cache_dir_is_one_line(tmp_path):
    from helpers import run_cli

    result = run_cli(
        "cache_dir=/proc/no-cache-here",  # no one, root included, may create a directory there
        "dataset.synthetic_rows=500",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 2
    errors = error_lines(result)
    assert errors == [
        "error: cannot write to /proc/no-cache-here (No such file or directory); set cache_dir "
        "to a writable directory with room for the processed splits"
    ]
    assert "Traceback" not in result.stderr


@pytest.mark.needs_root
@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root: mounts a tmpfs"
)
def test_a_full_disk_is_one_line_and_leaves_no_entry_a_later_run_trusts(tmp_path):
    """The cache on a 200 KiB tmpfs: the build runs out of space mid-write. One error line, no
    entry with a meta.json; the same cache_dir with room again builds and trains."""
    from helpers import run_cli

    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)], check=True)
    try:
        args = ["dataset.synthetic_rows=20000", "trainer.epochs=1", "trainer.progress_bar=false"]
        full = run_cli(*args, f"cache_dir={disk / 'cache'}", f"hydra.run.dir={tmp_path / 'a'}")
        assert full.returncode == 2, full.stderr[-3000:]
        errors = error_lines(full)
        assert errors == [
            f"error: cannot write to {disk / 'cache'} (the disk is full); set cache_dir to a "
            "writable directory with room for the processed splits"
        ]
        assert "Traceback" not in full.stderr
        assert not list((disk / "cache").glob("*/meta.json"))
        assert not list((disk / "cache").glob("*/data-*"))  # the partial build is gone
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = run_cli(*args, f"cache_dir={disk / 'cache'}", f"hydra.run.dir={tmp_path / 'b'}")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "cache miss" in again.stderr + again.stdout
        assert len(list((disk / "cache").glob("*/meta.json"))) == 1
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_rows_a_feature_drops_are_counted_per_split_and_said(tmp_path, cache_dir, caplog):
    """A missing target (a training row and a validation row) and a class only the test split
    has (two rows) are left out of their splits: the meta counts them per split and the log
    says so, as a warning, since validation's and test's metrics do not cover them; a cache
    hit says it again."""
    rows = 60
    frame = pd.DataFrame(
        {
            "x": [float(i % 7) for i in range(rows)],
            "y": ["a" if i % 2 else "b" for i in range(rows)],
            "s": ["train"] * 40 + ["validation"] * 10 + ["test"] * 10,
        }
    )
    frame.loc[3, "y"] = None
    frame.loc[45, "y"] = None
    frame.loc[[55, 57], "y"] = "only_in_test"
    path = tmp_path / "drops.csv"
    frame.to_csv(path, index=False)
    overrides = [
        "command=preprocess",
        f"dataset.path={path}",
        "dataset.target=y",
        "dataset.split.method=column",
        "dataset.split.column=s",
    ]
    caplog.set_level("INFO")
    run_experiment(tmp_path / "run", cache_dir, *overrides)
    (entry,) = entries(cache_dir)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["left_out"] == {"train": 1, "validation": 1, "test": 2}
    assert meta["rows"] == {"train": 39, "validation": 9, "test": 8}
    said = [r for r in caplog.records if "left out 4 rows" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert "(train 1, validation 1, test 2)" in said[0].getMessage()
    assert "a 'y' class the training split does not have" in said[0].getMessage()
    caplog.clear()
    run_experiment(tmp_path / "run2", cache_dir, *overrides)
    assert "cache hit" in caplog.text and "left out 4 rows" in caplog.text
