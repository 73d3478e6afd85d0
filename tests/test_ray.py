"""The Ray backend on a real local Ray: Dask and Modin processors, Ray Data loader,
object-storage cache, auto-detection, and its errors."""

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from helpers import (
    FAST,
    MIXED_MODEL,
    assert_same_caches,
    compose_config,
    houses,
    mixed_table,
    run_cli,
    run_experiment,
    start_test_ray,
    write_table,
)
from hydra.utils import instantiate

from runner.backends.ray import RayBackend
from runner.commands import run_command
from runner.config import DatasetConfig, check_config
from runner.errors import UserError
from runner.processing.features.feature_set import FeatureSet
from runner.processing.pipeline import Preprocessed, preprocess
from runner.processing.source import DataSource
from runner.storage import Location

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.distributed]
SPLIT = {"method": "random", "ratios": [0.7, 0.15, 0.15], "seed": 42, "column": None}


def ray_run(run_dir, cache_dir, *overrides):
    return run_experiment(run_dir, cache_dir, "backend=ray", *overrides)


def make_processor(name, *overrides):
    """A processor as the config makes it (its defaults come from the schema)."""
    return instantiate(compose_config([f"processor={name}", *overrides]).processor)


def ray_backend(*overrides) -> RayBackend:
    return instantiate(compose_config(["backend=ray", *overrides]).backend)


@pytest.fixture(scope="module")
def mixed_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mixed")
    table = mixed_table(4000, seed=3)
    table.to_csv(d / "mixed.csv", index=False)
    table.to_parquet(d / "mixed.parquet")
    return d


def model_features():
    cfg = compose_config(MIXED_MODEL)
    return FeatureSet(list(cfg.model.input_features), list(cfg.model.output_features))


@pytest.mark.parametrize("name", ["mixed.csv", "mixed.parquet", None])
def test_every_processor_produces_the_same_cache(tmp_path, mixed_files, name):
    if name is None:
        source = DataSource.from_config(DatasetConfig(synthetic_rows=150000))
        features = FeatureSet(
            list(compose_config(["model=synthetic"]).model.input_features),
            list(compose_config(["model=synthetic"]).model.output_features),
        )
    else:
        source = DataSource.from_config(DatasetConfig(path=str(mixed_files / name)))
        features = model_features()
    engines = {
        "pandas": make_processor("pandas"),
        "dask": make_processor("dask", "processor.parallelism=5", "processor.blocksize=20KB"),
        "modin": make_processor("modin", "processor.parallelism=3"),
        "dask-streaming": make_processor(
            "dask", "processor.persist=false", "processor.blocksize=20KB"
        ),
        "arrow": make_processor("arrow", "processor.parallelism=5"),
        "arrow-streaming": make_processor(
            "arrow", "processor.persist=false", "processor.blocksize=20KB"
        ),
    }
    results = {
        k: preprocess(e, source, features, SPLIT, str(tmp_path / k)) for k, e in engines.items()
    }
    assert results["pandas"].meta["partitions"] == 1
    for engine in ("dask", "modin", "arrow", "arrow-streaming"):
        assert results[engine].meta["partitions"] > 1, engine
    if name is not None:  # the text's TF-IDF components are compared too (fitted on the sample)
        assert len(results["pandas"].meta["features"]["review"]["stats"]["components"]["mean"]) == 8
    assert_same_caches(results)


def preprocessed_by_every_processor(source, features, split: dict, tmp_path) -> dict:
    """The cache entry pandas, Dask (small blocks), Modin and Arrow (3 partitions) build."""
    engines = {
        "pandas": make_processor("pandas"),
        "dask": make_processor("dask", "processor.parallelism=3", "processor.blocksize=20KB"),
        "modin": make_processor("modin", "processor.parallelism=3"),
        "arrow": make_processor("arrow", "processor.parallelism=3"),
    }
    return {
        k: preprocess(e, source, features, split, str(tmp_path / k)) for k, e in engines.items()
    }


def test_every_processor_splits_by_group_alike(tmp_path):
    """dataset.split.method=group on pandas, Dask, Modin and Arrow partitions: the same cache
    entry (the split hashes each group's value, not a partition's row numbers), and every
    store's rows in one split."""
    from test_group_split import GROUP, stores

    table = stores()
    table.to_csv(tmp_path / "stores.csv", index=False)
    source = DataSource.from_config(DatasetConfig(path=str(tmp_path / "stores.csv")))
    features = FeatureSet([{"name": "x", "type": "number"}], [{"name": "y", "type": "number"}])
    results = preprocessed_by_every_processor(source, features, GROUP, tmp_path)
    assert_same_caches(results)
    placed = {}
    for split in ("train", "validation", "test"):
        rows = pq.read_table(results["pandas"].split_path(split).path).column("__row__")
        for store in table["store"].fillna(-1).to_numpy()[rows.to_numpy()]:
            placed.setdefault(store, set()).add(split)
    assert all(len(splits) == 1 for splits in placed.values())


def test_every_processor_splits_by_time_alike(tmp_path):
    """dataset.split.method=time on pandas, Dask, Modin and Arrow partitions: the same cache
    entry (one pass over the whole time column gives every partition the same cut points),
    and every test row later than every training row."""
    from test_time_split import TIME, days, drifting

    table = drifting()
    table.to_csv(tmp_path / "drifting.csv", index=False)
    source = DataSource.from_config(DatasetConfig(path=str(tmp_path / "drifting.csv")))
    features = FeatureSet([{"name": "x", "type": "number"}], [{"name": "y", "type": "number"}])
    results = preprocessed_by_every_processor(source, features, TIME, tmp_path)
    assert_same_caches(results)
    when = days(table)
    rows = {
        split: pq.read_table(results["pandas"].split_path(split).path).column("__row__")
        for split in ("train", "test")
    }
    assert np.nanmax(when[rows["train"].to_numpy()]) < np.min(when[rows["test"].to_numpy()])


@pytest.mark.parametrize("name", ["houses.tsv", "houses.jsonl.gz"])
def test_every_processor_infers_and_reads_other_formats_as_the_csv(tmp_path, name):
    """A delimited file and a whole-file format, with only dataset.target: every processor
    infers the same model.yaml and writes the cache pandas writes from the same table in CSV."""
    table = houses(3000, seed=2)
    write_table(table, tmp_path / "houses.csv")
    write_table(table, tmp_path / name)
    engines = {
        "pandas": ["processor=pandas"],
        "dask": ["processor=dask", "processor.parallelism=3"],
        "modin": ["processor=modin", "processor.parallelism=3"],
        "arrow": ["processor=arrow", "processor.parallelism=3"],
    }
    results, inferred = {}, {}
    for engine, overrides in {"csv": ["processor=pandas"], **engines}.items():
        path = tmp_path / ("houses.csv" if engine == "csv" else name)
        cfg = compose_config(
            [
                "backend=ray",
                f"cache_dir={tmp_path / engine}",
                f"dataset.path={path}",
                "dataset.target=price",
                "command=preprocess",
                *overrides,
            ]
        )
        run_command(cfg, tmp_path / f"run-{engine}")
        entry = next((tmp_path / engine).glob("*/meta.json")).parent
        meta = json.loads((entry / "meta.json").read_text())
        results[engine] = Preprocessed(Location(str(entry / meta["data"])), meta, False, 0)
        inferred[engine] = (tmp_path / f"run-{engine}" / "model.yaml").read_text()
    assert len({inferred[engine] for engine in engines}) == 1  # every processor: the same
    types = {
        e: {k: v for k, v in yaml.safe_load(t).items() if k != "defaults"}
        for e, t in inferred.items()
    }
    assert types["csv"] == types["pandas"]  # the CSV's reasons may say "written as text"
    assert results["dask"].meta["partitions"] > 1  # several partitions merged to one answer
    if name.endswith(".tsv"):  # a JSON file is one piece: no byte ranges to cut it at
        assert results["arrow"].meta["partitions"] > 1
    results = {"pandas": results.pop("csv"), **results}
    assert_same_caches(results)


def test_arrow_cuts_files_into_pieces_that_cover_every_row_once(tmp_path):
    """A directory of CSVs cut into many pieces, most of them mid-line, some holding no line
    start at all; a gzipped CSV (never cut); Parquet files of several row groups (runs of
    small groups, slices of a large one): processor=arrow builds pandas' cache from each."""
    table = mixed_table(3000, seed=5)
    csvs, parquets = tmp_path / "csvs", tmp_path / "parquets"
    csvs.mkdir(), parquets.mkdir()
    table.iloc[:1000].to_csv(csvs / "a.csv", index=False)
    table.iloc[1000:].to_csv(csvs / "b.csv", index=False)
    table.to_csv(tmp_path / "table.csv.gz", index=False)
    table.iloc[:1800].to_parquet(parquets / "a.parquet", row_group_size=100)
    table.iloc[1800:].to_parquet(parquets / "b.parquet", row_group_size=1200)
    features = model_features()
    cases = [  # data, arrow's settings, pieces at least
        (csvs, ["processor.parallelism=400"], 300),  # ~1 KB pieces: lines are ~150 bytes
        (csvs, ["processor.persist=false", "processor.parallelism=7"], 7),
        (tmp_path / "table.csv.gz", ["processor.parallelism=4"], 1),
        (parquets, ["processor.parallelism=6"], 6),
    ]
    for n, (data, arrow_settings, pieces) in enumerate(cases):
        source = DataSource.from_config(
            DatasetConfig(path=str(data), format="parquet" if data == parquets else "csv")
        )
        engines = {
            "pandas": make_processor("pandas"),
            "arrow": make_processor("arrow", *arrow_settings),
        }
        out = tmp_path / "caches" / str(n)
        results = {
            k: preprocess(e, source, features, SPLIT, str(out / k)) for k, e in engines.items()
        }
        assert results["arrow"].meta["partitions"] >= pieces, (data, arrow_settings)
        assert sum(results["arrow"].meta["rows"].values()) == 3000, (data, arrow_settings)
        assert_same_caches(results)


def test_experiment_on_ray_with_dask_and_ray_data(tmp_path, cache_dir, caplog):
    caplog.set_level("INFO")
    metrics = ray_run(
        tmp_path / "run", cache_dir, "trainer.epochs=12", "processor=dask", "loader=ray"
    )
    assert "ray backend: using the Ray session" in caplog.text
    assert "with dask" in caplog.text
    assert metrics["test"]["label/roc_auc"] > 0.85
    meta = json.loads(next(cache_dir.glob("*/meta.json")).read_text())
    assert meta["processor"] == "dask"
    # A small test split on Ray: scored in the driver by the pool's scorer, parts in predictions/
    assert len(pd.read_parquet(tmp_path / "run" / "predictions")) == meta["rows"]["test"]


@pytest.mark.parametrize("processor", ["modin", "pandas"])
def test_other_processors_on_ray(tmp_path, cache_dir, processor, mixed_files):
    metrics = ray_run(
        tmp_path / "run",
        cache_dir,
        f"processor={processor}",
        f"dataset.path={mixed_files / 'mixed.csv'}",
        *MIXED_MODEL,
        "trainer.epochs=8",
    )
    assert metrics["test"]["good/roc_auc"] > 0.8


def test_windowed_streaming_loader(tmp_path, cache_dir):
    metrics = ray_run(
        tmp_path / "run",
        cache_dir,
        "loader=ray",
        "loader.fully_executed=false",
        "loader.window_size_bytes=100000",
        "processor=dask",
        "processor.persist=false",
        "processor.parallelism=6",
        "dataset.synthetic_rows=30000",
        "trainer.epochs=6",
    )
    assert metrics["test"]["label/roc_auc"] > 0.85


@pytest.mark.parametrize("mode", ["in_heap", "object_store", "streaming"])
def test_ray_data_loader_shards_cover_the_split(tmp_path, cache_dir, mode, monkeypatch):
    """Every row exactly once across two workers' shards, however they are served: a fully
    executed split's contiguous blocks (tensors in the worker's heap, or, past
    HEAP_SHARD_BYTES, a split iterated from the object store) or a window at a time."""
    from runner.loading import ray_data
    from runner.model.layout import Layout

    ray_run(tmp_path / "pre", cache_dir, "command=preprocess", "processor.parallelism=4")
    meta_path = next(cache_dir.glob("*/meta.json"))
    meta = json.loads(meta_path.read_text())
    from runner.storage import Location

    split = Location(str(meta_path.parent / meta["data"] / "validation"))
    layout = Layout.from_meta(meta, check_config(compose_config([])).model)
    overrides = ["loader=ray", "loader.batch_size=64", "loader.eval_batch_size=100"]
    if mode == "streaming":
        overrides.append("loader.window_size_bytes=1000000")
    if mode == "object_store":
        monkeypatch.setattr(ray_data, "HEAP_SHARD_BYTES", 0)
    loader = instantiate(compose_config(overrides).loader)
    assert isinstance(loader, ray_data.RayDataLoader)
    shards = loader.shards(split, 2, equal=False)
    assert all((shard.spans is not None) == (mode != "object_store") for shard in shards)
    import threading

    seen = [None, None]

    def consume(i):  # streaming_split shards are consumed together, as by two workers
        rows = [
            chunk.row_ids.numpy() for chunk in loader.eval_batches(loader.open(shards[i], layout))
        ]
        seen[i] = np.concatenate(rows) if rows else np.zeros(0, np.int64)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert seen[0] is not None and seen[1] is not None
    # Every validation row exactly once across the two workers.
    assert sorted(np.concatenate(seen).tolist()) == sorted(
        pq.read_table(split.path)["__row__"].to_pylist()
    )
    if mode != "object_store":  # training batches: the shard's rows, reshuffled every epoch
        rows = [
            sum(
                len(next(iter(inputs.values())))
                for inputs, _ in loader.train_batches(shards[0], epoch, 0)
            )
            for epoch in (1, 2)
        ]
        expected = len(seen[0]) - (len(seen[0]) % 64 if loader.drop_last else 0)
        assert rows == [expected] * 2
        equal = loader.shards(split, 2, equal=True)
        assert equal[0].rows == equal[1].rows == len(np.concatenate(seen)) // 2


def test_s3_cache_with_inline_and_file_credentials(tmp_path, s3_server, caplog):
    caplog.set_level("INFO")
    cache = "s3://runner/cache"
    inline = "cache_credentials={" + ",".join(f"{k}:'{v}'" for k, v in s3_server.items()) + "}"
    cfg = compose_config(["backend=ray", f"cache_dir={cache}", inline, *FAST])
    metrics = run_command(cfg, tmp_path / "inline")
    assert metrics["test"]["label/roc_auc"] > 0.7
    assert "cache miss" in caplog.text
    creds_file = tmp_path / "creds.json"
    creds_file.write_text(json.dumps({"s3": s3_server}))
    caplog.clear()
    cfg = compose_config(
        [
            "backend=ray",
            "processor=pandas",
            "loader=local",
            f"cache_dir={cache}",
            f"cache_credentials={creds_file}",
            *FAST,
        ]
    )
    run_command(cfg, tmp_path / "file")
    assert "preprocessing skipped: cache hit s3://runner/cache/" in caplog.text
    import s3fs

    fs = s3fs.S3FileSystem(
        key=s3_server["aws_access_key_id"],
        secret=s3_server["aws_secret_access_key"],
        client_kwargs={"endpoint_url": s3_server["endpoint_url"]},
    )
    files = fs.find("runner/cache")
    assert any(f.endswith("meta.json") for f in files) and any("/train/part-" in f for f in files)
    for run in ("inline", "file"):
        for path in (tmp_path / run).rglob("*"):
            if path.is_file() and path.suffix in (".yaml", ".json", ".log"):
                assert "testing-secret-value" not in path.read_text(errors="ignore"), path
    assert "testing-secret-value" not in caplog.text


def test_credentials_never_reach_hydra_outputs(tmp_path, s3_server):
    inline = "cache_credentials={" + ",".join(f"{k}:'{v}'" for k, v in s3_server.items()) + "}"
    result = run_cli(
        "backend=local",
        "processor=pandas",
        "loader=local",
        "cache_dir=s3://runner/cli",
        inline,
        *FAST,
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 0, result.stderr
    assert "testing-secret-value" not in result.stdout + result.stderr
    written = [
        p
        for p in (tmp_path / "run").rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".json", ".log")
    ]
    assert any(p.name == "overrides.yaml" for p in written)
    for path in written:
        assert "testing-secret-value" not in path.read_text(), path


@pytest.mark.parametrize(
    "credentials,message",
    [
        (
            "/nonexistent/creds.json",
            "cache_credentials file /nonexistent/creds.json does not exist",
        ),
        ("BAD", "is not valid JSON"),
    ],
)
def test_bad_credentials_file(tmp_path, credentials, message):
    if credentials == "BAD":
        credentials = str(tmp_path / "bad.json")
        (tmp_path / "bad.json").write_text("{key: oops")
    with pytest.raises(UserError, match=message):
        run_command(
            compose_config(
                [
                    "backend=local",
                    "loader=local",
                    "processor=pandas",
                    "cache_dir=s3://runner/x",
                    f"cache_credentials={credentials}",
                    *FAST,
                ]
            ),
            tmp_path / "run",
        )


@pytest.mark.timeout(120)  # Ray's own wait for a GCS is longer than this
def test_unreachable_address_fails_fast():
    with pytest.raises(UserError, match="cannot reach a Ray cluster at 127.0.0.1:1 within 2s"):
        ray_backend(
            "backend.address=127.0.0.1:1", "backend.connect_timeout_s=2"
        ).runtime.target_address()


@pytest.mark.timeout(180)
def test_unreachable_address_from_the_cli(tmp_path):
    from helpers import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = run_cli(
        "backend=ray",
        f"backend.address={address}",
        "backend.connect_timeout_s=2",
        f"hydra.run.dir={tmp_path / 'run'}",
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 2
    assert f"error: cannot reach a Ray cluster at {address} within 2s" in result.stderr


def test_dask_and_modin_need_ray(tmp_path):
    import ray

    ray.shutdown()  # this test needs a process without Ray; the fixture's cluster is gone after it
    try:
        for processor in ("dask", "modin"):
            with pytest.raises(
                UserError, match=f"processor={processor} runs on Ray; add backend=ray"
            ):
                run_command(
                    compose_config(
                        ["backend=local", f"processor={processor}", f"cache_dir={tmp_path}", *FAST]
                    ),
                    tmp_path / "run",
                )
    finally:
        start_test_ray()


def test_modin_works_again_after_ray_restarts(tmp_path, mixed_files):
    """Modin caches object refs for the life of the process; a second Ray session in the same
    process (a run from Python after another, the next test module) must not meet dead ones."""
    import ray

    source = DataSource.from_config(DatasetConfig(path=str(mixed_files / "mixed.csv")))
    assert len(make_processor("modin").read(source)) == 4000  # Modin's refs: this session's
    ray.shutdown()
    start_test_ray()
    assert len(make_processor("modin").read(source)) == 4000


def test_auto_choices_follow_data_size_and_trainer(tmp_path, cache_dir, caplog):
    caplog.set_level("INFO")
    ray_run(tmp_path / "small", cache_dir, "command=preprocess")
    assert "processor=auto picked pandas" in caplog.text
    caplog.clear()
    ray_run(
        tmp_path / "large", cache_dir, "command=preprocess", "processor.distributed_min_bytes=1000"
    )
    assert "processor=auto picked arrow" in caplog.text
    caplog.clear()
    ray_run(
        tmp_path / "train",
        cache_dir,
        "trainer=horovod",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU:0.5}",
        *FAST,
    )
    assert "loader=auto picked ray: distributed training" in caplog.text


def test_auto_detection(monkeypatch):
    auto = instantiate(compose_config([]).backend, _convert_="all")
    assert auto.detect().name == "ray"  # this process is connected to Ray
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert auto.detect().name == "ray"


def test_empty_partitions_never_crash(tmp_path, cache_dir):
    """Tiny data in many partitions: some partitions hold no validation or test rows."""
    metrics = ray_run(
        tmp_path / "run",
        cache_dir,
        "processor=dask",
        "processor.parallelism=40",
        "dataset.synthetic_rows=300",
        "dataset.split.ratios=[0.8,0.1,0.1]",
        *FAST,
    )
    entry = next(cache_dir.glob("*/meta.json"))
    meta = json.loads(entry.read_text())
    assert meta["partitions"] == 40
    assert sum(meta["rows"].values()) == 300
    assert "test" in metrics


def test_bagged_tree_folds_are_ray_tasks_and_a_killed_one_is_retried(tmp_path, cache_dir):
    """preset=best on Ray: a tree member's folds run as Ray tasks with their threads as CPUs;
    SIGKILLing the worker of one fold while it boosts loses nothing: Ray retries that fold and
    the others go on."""
    import threading
    import time

    import psutil

    houses(1500).to_csv(tmp_path / "houses.csv", index=False)
    killed: list[int] = []

    def kill_the_first_fold() -> None:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for process in psutil.process_iter(["cmdline"]):
                if (process.info["cmdline"] or [""])[0].startswith("ray::bagged-catboost-fold-1"):
                    process.kill()
                    killed.append(process.pid)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_first_fold, daemon=True)
    killer.start()
    ray_run(
        tmp_path / "run",
        cache_dir,
        "preset=best",
        "model.bagging.members=[gbm,catboost]",
        "model.bagging.folds=3",
        f"dataset.path={tmp_path / 'houses.csv'}",
        "dataset.target=price",
        # Folds long enough to be caught boosting.
        "model.catboost.iterations=800",
        "model.catboost.early_stopping_rounds=0",
        "report.importance_rows=0",
    )
    killer.join()
    assert killed, "no fold task was seen running"
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for member in ("gbm", "catboost"):
        tasks = saved["training"]["bagging"]["members"][member]["ray_tasks"]
        assert tasks["tasks"] == 3 and tasks["cpus_each"] == 1 and tasks["at_once"] == 2
    assert saved["test"]["price/r2"] > 0.5
    folds = sorted(p.name for p in (tmp_path / "run" / "model" / "members").iterdir())
    assert folds == ["catboost-1", "catboost-2", "catboost-3", "gbm-1", "gbm-2", "gbm-3"]
