"""A two-node Ray cluster on one machine (a head and a worker node, each with its
own CPU): preprocessing tasks and training workers land on both nodes."""

import json

import pytest
from conftest import compose_config

from runner.commands import run_command

pytestmark = [pytest.mark.distributed]


@pytest.fixture(scope="module")
def two_nodes():
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"head": 1},
            "object_store_memory": 150 * 1024 * 1024,
        },
    )
    worker = cluster.add_node(
        num_cpus=1, resources={"second": 1}, object_store_memory=150 * 1024 * 1024
    )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    yield cluster, worker
    ray.shutdown()
    cluster.shutdown()


def test_cluster_has_two_nodes(two_nodes):
    import ray

    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 2
    assert ray.cluster_resources()["CPU"] == 2


def test_preprocessing_and_training_use_both_nodes(two_nodes, tmp_path):
    import ray

    cache = tmp_path / "cache"
    cfg = compose_config(
        [
            "backend=ray",
            f"cache_dir={cache}",
            "processor=dask",
            "processor.parallelism=8",
            "trainer=horovod",
            "trainer.num_workers=2",
            "trainer.resources_per_worker={CPU:1}",
            "trainer.epochs=3",
            "trainer.progress_bar=false",
            "dataset.synthetic_rows=20000",
        ]
    )
    metrics = run_command(cfg, tmp_path / "run")
    assert metrics["test"]["label/roc_auc"] > 0.75
    node_ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    meta = json.loads(next(cache.glob("*/meta.json")).read_text())
    assert set(meta["nodes"]) == node_ids, "preprocessing partitions were written on both nodes"
    workers = [
        json.loads(p.read_text())
        for p in sorted((tmp_path / "run" / "workers").glob("rank-*.json"))
    ]
    assert len(workers) == 2
    assert {w["node"] for w in workers} == node_ids, "one training worker (and its shard) per node"
