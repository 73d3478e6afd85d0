"""A dataset in object storage end to end, against a real S3-compatible server (moto's, on
loopback): CSV, gzip-compressed CSV, a Parquet folder and JSON lines at s3://, read by every
processor (pandas and Arrow here, Dask and Modin on the module's Ray) to the same cache and the
same inferred model.yaml; trained, evaluated and predicted on; credentials from
dataset.storage_options and from the standard AWS environment variables; train(df) with an s3://
cache_dir."""

import gzip
import io
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import assert_same_caches, compose_config, run_cli, run_experiment

from runner.assembly import assemble
from runner.processing import sampling

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.distributed, pytest.mark.slow]
PROCESSORS = {
    "pandas": ["backend=local", "processor=pandas"],
    "arrow": ["backend=ray", "processor=arrow", "processor.parallelism=2"],
    "dask": ["backend=ray", "processor=dask", "processor.parallelism=2"],
    "modin": ["backend=ray", "processor=modin"],
}
FORMATS = ("table.csv", "table.csv.gz", "folder", "table.jsonl", "classes.csv")


def sorted_table(rows: int = 3000) -> pd.DataFrame:
    """Sorted by date: the first 60 % of the rows are in January; the month explains y."""
    rng = np.random.default_rng(7)
    month = np.concatenate([np.ones(int(rows * 0.6), int), np.sort(rng.integers(2, 13, rows))])
    month = month[:rows]
    x = rng.normal(size=rows).round(4)
    kind = rng.choice(["a", "b", "c"], rows)
    y = (x + (month - 6.5) ** 2 / 8 + (kind == "b") + rng.normal(0, 0.1, rows)).round(5)
    return pd.DataFrame({"x": x, "kind": kind, "month": month, "y": y})


@pytest.fixture(scope="module")
def bucket(s3_server):
    """The table in the four layouts, uploaded; returns the storage options that read them."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_server["endpoint_url"],
        aws_access_key_id=s3_server["aws_access_key_id"],
        aws_secret_access_key=s3_server["aws_secret_access_key"],
        region_name="us-east-1",
    )
    table = sorted_table()
    text = table.to_csv(index=False).encode()
    client.put_object(Bucket="runner", Key="data/table.csv", Body=text)
    client.put_object(Bucket="runner", Key="data/table.csv.gz", Body=gzip.compress(text))
    lines = table.to_json(orient="records", lines=True).encode()
    client.put_object(Bucket="runner", Key="data/table.jsonl", Body=lines)
    classes = table.assign(y=np.where(np.arange(len(table)) < 2400, "no", "yes"))  # sorted
    client.put_object(
        Bucket="runner", Key="data/classes.csv", Body=classes.to_csv(index=False).encode()
    )
    for i, part in enumerate([table.iloc[:1000], table.iloc[1000:2000], table.iloc[2000:]]):
        buffer = io.BytesIO()
        part.to_parquet(buffer, index=False)
        client.put_object(
            Bucket="runner", Key=f"data/folder/part-{i}.parquet", Body=buffer.getvalue()
        )
    return {
        "key": s3_server["aws_access_key_id"],
        "secret": s3_server["aws_secret_access_key"],
        "client_kwargs": {"endpoint_url": s3_server["endpoint_url"]},
    }


def keys_override(options: dict) -> str:
    return (
        f"dataset.storage_options={{key:{options['key']},secret:{options['secret']},"
        f"client_kwargs:{{endpoint_url:'{options['client_kwargs']['endpoint_url']}'}}}}"
    )


def preprocessed(tmp_path, name: str, options: dict, processor: list[str]):
    from runner.commands import _preprocess

    run_dir = tmp_path / "run"
    cfg = compose_config(
        [
            f"cache_dir={tmp_path / 'cache'}",
            f"dataset.path=s3://runner/data/{name}",
            "dataset.target=y",
            "dataset.inference_rows=300",
            keys_override(options),
            *processor,
        ]
    )
    plan = assemble(cfg, run_dir)
    with plan.backend:
        pre = _preprocess(plan.resolve())
    return pre, (run_dir / "model.yaml").read_text()


@pytest.mark.parametrize("name", FORMATS)
def test_every_processor_reads_each_layout_to_one_cache_and_model_yaml(
    tmp_path, bucket, name, monkeypatch
):
    # The inference sample by byte ranges / row offsets through s3fs, even of a small file.
    monkeypatch.setattr(sampling, "WHOLE_READ_LIMIT", 0)
    results, yamls = {}, {}
    for processor, overrides in PROCESSORS.items():
        results[processor], yamls[processor] = preprocessed(
            tmp_path / processor, name, bucket, overrides
        )
    assert_same_caches(results)
    assert len(set(yamls.values())) == 1
    features = yaml.safe_load(yamls["pandas"])["input_features"]
    assert {f["name"]: f["type"] for f in features} == {
        "x": "number",
        "kind": "category",
        "month": "number",  # constant in the first 60 % of the rows
    }
    assert sum(results["pandas"].meta["rows"].values()) == 3000
    if name == "classes.csv":  # sorted by the class: both classes, in every processor
        target = results["pandas"].meta["features"]["y"]
        assert yaml.safe_load(yamls["pandas"])["output_features"][0]["type"] == "binary"
        assert sorted(target["stats"]["labels"]) == ["no", "yes"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, bucket):
    """A model trained from the S3 CSV (keys in dataset.storage_options)."""
    root = tmp_path_factory.mktemp("s3run")
    metrics = run_experiment(
        root / "train",
        root / "cache",
        "backend=local",
        "dataset.path=s3://runner/data/table.csv",
        "dataset.target=y",
        keys_override(bucket),
        "trainer.epochs=4",
    )
    return root, metrics


@pytest.mark.parametrize(
    "name,processor",
    [
        ("table.csv.gz", "pandas"),
        ("folder", "dask"),
        ("table.jsonl", "modin"),
        ("table.csv", "arrow"),
    ],
)
def test_predict_and_evaluate_from_s3_with_each_processor(trained, bucket, name, processor):
    root, metrics = trained
    assert metrics["test"]["y/r2"] > 0.8
    table = sorted_table()
    for command in ("predict", "evaluate"):
        out = root / f"{command}-{processor}"
        result = run_experiment(
            out,
            root / "cache",
            f"command={command}",
            f"model_dir={root / 'train' / 'model'}",
            f"dataset.path=s3://runner/data/{name}",
            keys_override(bucket),
            *PROCESSORS[processor],
            "trainer.num_workers=1",
        )
        if command == "evaluate":
            assert result["evaluation"]["y/r2"] > 0.8
            continue
        path = out / "predictions.parquet"
        predictions = pd.read_parquet(path if path.exists() else out / "predictions")
        assert sorted(predictions["row"]) == list(range(len(table)))
        assert np.corrcoef(predictions.sort_values("row")["y_prediction"], table["y"])[0, 1] > 0.9


def test_the_standard_aws_variables_credit_a_run_and_its_dask_workers(tmp_path, s3_server, bucket):
    env = {
        "AWS_ACCESS_KEY_ID": s3_server["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_server["aws_secret_access_key"],
        "AWS_ENDPOINT_URL": s3_server["endpoint_url"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    result = run_cli(
        "dataset.path=s3://runner/data/folder",
        "dataset.target=y",
        "processor=dask",
        "trainer.epochs=2",
        "trainer.progress_bar=false",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test"]["y/r2"] > 0.5
    assert "preprocessing s3://runner/data/folder with dask" in result.stdout + result.stderr


def test_train_a_dataframe_with_an_s3_cache(tmp_path, s3_server, monkeypatch):
    import s3fs

    from runner import train

    monkeypatch.chdir(tmp_path)
    credentials = "cache_credentials={" + ",".join(f"{k}:'{v}'" for k, v in s3_server.items()) + "}"
    result = train(
        sorted_table(600),
        target="y",
        overrides=["cache_dir=s3://runner/dfcache", credentials, "trainer.epochs=2"],
        run_dir=tmp_path / "run",
    )
    assert result.metrics["test"]["y/r2"] > 0.3
    fs = s3fs.S3FileSystem(
        key=s3_server["aws_access_key_id"],
        secret=s3_server["aws_secret_access_key"],
        client_kwargs={"endpoint_url": s3_server["endpoint_url"]},
    )
    frames = fs.find("runner/dfcache/frames")
    assert len(frames) == 1 and frames[0].endswith(".parquet")
    assert any(f.endswith("meta.json") for f in fs.find("runner/dfcache"))
    assert not (tmp_path / "s3:").exists()
