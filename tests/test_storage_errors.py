"""Object-storage failures for dataset.path and cache_dir, against real S3-compatible servers
(moto's, on loopback): missing credentials, a missing bucket, access denied, an unreachable
endpoint. Each is one `error:` line naming the URL and the key to fix, exit 2, nothing written."""

import os
import subprocess
import sys
import time

import pytest
from helpers import FAST, error_lines, free_port, run_cli

pytestmark = [pytest.mark.slow]

# No credentials from this machine's files or environment reach the runs below.
NO_AMBIENT_CREDENTIALS = {
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="module")
def strict_s3():
    """A second S3 server that checks credentials (after the two set-up requests)."""
    import boto3

    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "2"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="a",
        aws_secret_access_key="b",
        region_name="us-east-1",
    )
    deadline = time.time() + 30
    while True:
        try:
            client.create_bucket(Bucket="locked")
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.3)
    client.put_object(Bucket="locked", Key="t.csv", Body=b"x1,label\n1,yes\n")
    yield endpoint
    server.kill()
    server.wait()


def options(
    endpoint: str, key: str | None = "testing-key", secret: str | None = "testing-secret-value"
) -> str:
    items = [f"client_kwargs:{{endpoint_url:'{endpoint}'}}"]
    if key:
        items += [f"key:{key}", f"secret:{secret}"]
    return "{" + ",".join(items) + "}"


def cases(s3: dict, strict: str) -> dict:
    good, unreachable = s3["endpoint_url"], f"http://127.0.0.1:{free_port()}"
    dataset = "dataset.path=s3://{bucket}/t.csv"
    return {
        "dataset-no-credentials": (
            [dataset.format(bucket="runner"), f"dataset.storage_options={options(good, None)}"],
            ["no credentials for s3://runner/t.csv", "dataset.storage_options"],
        ),
        "dataset-no-bucket": (
            [dataset.format(bucket="nobucket"), f"dataset.storage_options={options(good)}"],
            ["bucket 'nobucket'", "does not exist", "dataset.path"],
        ),
        "dataset-denied": (
            [
                dataset.format(bucket="locked"),
                f"dataset.storage_options={options(strict, 'nope', 'nope')}",
            ],
            ["access denied to s3://locked/t.csv", "dataset.storage_options"],
        ),
        "dataset-unreachable": (
            [dataset.format(bucket="runner"), f"dataset.storage_options={options(unreachable)}"],
            ["cannot reach the storage endpoint of s3://runner/t.csv", "dataset.storage_options"],
        ),
        "cache-no-credentials": (
            ["cache_dir=s3://runner/cache", f"cache_credentials={options(good, None)}"],
            ["no credentials for s3://runner/cache", "cache_credentials"],
        ),
        "cache-no-bucket": (
            ["cache_dir=s3://nobucket/cache", f"cache_credentials={options(good)}"],
            ["bucket 'nobucket'", "does not exist", "cache_dir"],
        ),
        "cache-denied": (
            ["cache_dir=s3://locked/cache", f"cache_credentials={options(strict, 'nope', 'nope')}"],
            ["access denied to s3://locked/cache", "cache_credentials"],
        ),
        "cache-unreachable": (
            ["cache_dir=s3://runner/cache", f"cache_credentials={options(unreachable)}"],
            ["cannot reach the storage endpoint of s3://runner/cache", "cache_credentials"],
        ),
    }


CASES = [
    "dataset-no-credentials",
    "dataset-no-bucket",
    "dataset-denied",
    "dataset-unreachable",
    "cache-no-credentials",
    "cache-no-bucket",
    "cache-denied",
    "cache-unreachable",
]


@pytest.mark.parametrize("case", CASES)
def test_object_storage_failure_is_one_clear_line(tmp_path, s3_server, strict_s3, case):
    overrides, expected = cases(s3_server, strict_s3)[case]
    if case.startswith("dataset"):
        overrides = ["dataset=file", *overrides, f"cache_dir={tmp_path / 'cache'}"]
    run_dir = tmp_path / "run"
    result = run_cli(*overrides, *FAST, f"hydra.run.dir={run_dir}", env=NO_AMBIENT_CREDENTIALS)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = error_lines(result)
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    for part in expected:
        assert part in errors[0], errors[0]
    assert "testing-secret-value" not in result.stderr
    # Nothing half-written: no model, metrics or local cache entry.
    assert not (run_dir / "model").exists() and not (run_dir / "metrics.json").exists()
    assert not list((tmp_path / "cache").glob("*/meta.json"))
