"""A two-node Ray cluster on one machine (a head and a worker node, each with its
own CPU): preprocessing tasks and training workers land on both nodes; workers are
spread or packed as asked; custom resources decide where workers go; the design
card's one-override command runs against the cluster through RAY_ADDRESS."""

import json

import pytest
from helpers import compose_config, run_cli, run_experiment

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
            "model.gbm.ray_from_rows=0",  # the ensemble's trees on Ray Train too
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
    # The ensemble's trees: data-parallel on Ray Train on the same cluster, a share of rows each.
    trees = json.loads((tmp_path / "run" / "metrics.json").read_text())["training"]["gbm_workers"]
    assert len(trees) == 2 and all(0 < w["train_rows"] < 16000 for w in trees), trees


def worker_nodes(run_dir) -> list[str]:
    return [
        json.loads(p.read_text())["node"] for p in sorted((run_dir / "workers").glob("rank-*.json"))
    ]


def node_of(resource: str) -> str:
    import ray

    return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"])


def wait_until_idle(timeout: float = 60.0):
    """Wait for the actors of the test before (scorers, workers) to give their CPUs back:
    SPREAD is best effort, and Ray packs a group onto one node while the other is busy."""
    import time

    import ray

    deadline = time.monotonic() + timeout
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        assert time.monotonic() < deadline, f"cluster still busy: {ray.available_resources()}"
        time.sleep(0.2)


def two_workers(tmp_path, trainer: str, resources: str, *overrides: str):
    """A small run with two workers of these resources on an idle cluster; returns its run dir."""
    wait_until_idle()
    run_dir = tmp_path / "run"
    run_experiment(
        run_dir,
        tmp_path / "cache",
        "backend=ray",
        f"trainer={trainer}",
        "trainer.num_workers=2",
        f"trainer.resources_per_worker={resources}",
        "dataset.synthetic_rows=3000",
        "trainer.epochs=1",
        "loader=local",
        "model.family=network",  # where the workers go, not what the family adds
        *overrides,
    )
    return run_dir


@pytest.mark.parametrize("trainer", ["horovod", "ddp"])
@pytest.mark.parametrize("placement", ["spread", "pack"])
def test_spread_and_pack_placement(two_nodes, tmp_path, trainer, placement):
    """Two workers of half a CPU fit on one node: spread puts one on each, pack both on one."""
    run_dir = two_workers(tmp_path, trainer, "{CPU:0.5}", f"trainer.placement={placement}")
    nodes = worker_nodes(run_dir)
    assert len(nodes) == 2
    assert len(set(nodes)) == (2 if placement == "spread" else 1), nodes


@pytest.mark.parametrize("trainer", ["horovod", "ddp"])
def test_custom_resources_decide_where_workers_go(two_nodes, tmp_path, trainer):
    """Only the second node has the resource `second`: both workers must go there."""
    run_dir = two_workers(tmp_path, trainer, "{CPU:0.5,second:0.5}")
    assert worker_nodes(run_dir) == [node_of("second")] * 2


def test_design_card_command_against_the_cluster(two_nodes, tmp_path):
    """RAY_ADDRESS=<cluster> python run.py trainer.num_workers=2: Horovod on Ray, one worker per node."""
    cluster, _ = two_nodes
    run_dir = tmp_path / "run"
    result = run_cli(
        "trainer.num_workers=2",
        "trainer.epochs=2",
        "trainer.progress_bar=false",
        f"hydra.run.dir={run_dir}",
        env={"RAY_ADDRESS": cluster.address, "TABULAR_RUNNER_CACHE": str(tmp_path / "cache")},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "trainer=auto picked horovod: trainer.num_workers=2 on Ray" in result.stdout + result.stderr
    )
    report = json.loads((run_dir / "metrics.json").read_text())
    assert report["training"]["world_size"] == 2
    assert len(set(worker_nodes(run_dir))) == 2  # spread is the default on CPU
    # The default ensemble's trees on a table this small train in the driver's process.
    assert "gbm_workers" not in report["training"]
    assert "below model.gbm.ray_from_rows=1000000" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["horovod", "ddp"])
def test_a_lost_node_costs_an_attempt_not_the_run(two_nodes, tmp_path, caplog, trainer):
    """The worker node, holding one of two training workers, is removed (its raylet and
    processes stopped) once the first epoch's checkpoint is written: the run retries on what
    remains (both workers of half a CPU fit on the head), resumes from that checkpoint and
    finishes every epoch with metrics. Runs last here: the node is added back afterwards."""
    import threading
    import time

    cluster, _ = two_nodes
    worker = next(iter(cluster.worker_nodes))  # the one added back by an earlier case, perhaps
    wait_until_idle()
    run_dir = tmp_path / "run"
    removed = []

    def remove_the_worker_node():
        deadline = time.time() + 240
        while time.time() < deadline:
            if (run_dir / "checkpoints" / "last.pt").exists() and len(
                set(worker_nodes(run_dir))
            ) == 2:
                cluster.remove_node(worker, allow_graceful=False)
                removed.append(time.time())
                return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_the_worker_node)
    remover.start()
    try:
        with caplog.at_level("INFO"):
            metrics = run_experiment(
                run_dir,
                tmp_path / "cache",
                "backend=ray",
                f"trainer={trainer}",
                "trainer.num_workers=2",
                "trainer.resources_per_worker={CPU:0.5}",
                "dataset.synthetic_rows=20000",
                "trainer.epochs=12",
                "trainer.early_stopping.patience=0",
                "loader=local",
                "model.family=network",  # the workers' recovery, not the family's fit
            )
        remover.join()
        assert removed, "the worker node was never removed"
        assert "a training worker failed" in caplog.text and "retry 1/3 from" in caplog.text
        report = json.loads((run_dir / "metrics.json").read_text())
        assert report["training"]["epochs_run"] == 12
        assert report["training"]["resumed_at_epoch"] >= 1  # from the checkpoint, not the start
        assert metrics["test"]["label/roc_auc"] > 0.75
    finally:
        remover.join()
        cluster.add_node(num_cpus=1, resources={"second": 1}, object_store_memory=150 * 2**20)
        cluster.wait_for_nodes()
