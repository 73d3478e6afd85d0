"""The deploy files: cluster.yaml against Ray's own cluster-config schema, the KubeRay
RayJob's structure, and the Dockerfile linted by hadolint."""

import subprocess
import sys
from pathlib import Path

import yaml
from helpers import ROOT

DEPLOY = ROOT / "deploy"


def test_cluster_yaml_passes_rays_schema():
    import pytest
    import ray
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((DEPLOY / "cluster.yaml").read_text())
    # As `ray up` does: the provider's defaults filled in, then the schema (any key or type it
    # does not allow raises).
    validate_config(prepare_config(config))
    with pytest.raises(Exception, match="bogus"):
        validate_config({**prepare_config(config), "bogus": 1})  # the check does reject
    assert any("./setup.sh" in c for c in config["setup_commands"])
    assert all(".venv/bin/ray start" in c for c in config["head_start_ray_commands"][1:])
    assert ray.__version__ == "2.60.0"


def test_rayjob_manifest():
    import ray

    job = yaml.safe_load((DEPLOY / "rayjob.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    assert (
        "run.py" in job["spec"]["entrypoint"]
        and "trainer.num_workers=" in job["spec"]["entrypoint"]
    )
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == ray.__version__
    images = [c["image"] for c in cluster["headGroupSpec"]["template"]["spec"]["containers"]]
    for group in cluster["workerGroupSpecs"]:
        images += [c["image"] for c in group["template"]["spec"]["containers"]]
    assert images and all(i.startswith("tabular-runner") for i in images)


def test_dockerfile_lints_clean_and_installs_with_setup_sh():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), str(DEPLOY / "Dockerfile")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = (DEPLOY / "Dockerfile").read_text()
    assert "RUN ./setup.sh" in text and "ARG BASE_IMAGE" in text
