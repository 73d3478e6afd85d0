"""The tests' environment and fixtures; their helpers are in helpers.py."""

import os
import sys
from pathlib import Path

import pytest
from helpers import ROOT, free_port, mixed_table, start_test_ray

from runner.config import register_configs


def pytest_configure(config):
    # Test clusters are throw-away: no token authentication.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # botocore never asks a cloud metadata service for credentials from these tests.
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(ROOT))  # bench/ (its load generator, its probe) is the tests' too
    register_configs()  # the config schemas Hydra composes against


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def mixed_csv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "mixed.csv"
    mixed_table(3000).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray per test module (starting Ray costs seconds)."""
    ray = start_test_ray()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def s3_server():
    """A real S3-compatible HTTP server on loopback (moto's), with one bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    credentials = {
        "aws_access_key_id": "testing-key",
        "aws_secret_access_key": "testing-secret-value",
        "endpoint_url": endpoint,
        "region": "us-east-1",
    }
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing-key",
        aws_secret_access_key="testing-secret-value",
        region_name="us-east-1",
    ).create_bucket(Bucket="runner")
    yield credentials
    server.stop()
