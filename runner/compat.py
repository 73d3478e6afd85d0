"""Every internal of a dependency that the runner reaches into, in one list: what it is, where
the runner uses it, and what happens when an upgrade removes it. tests/test_compat.py checks
that each still exists in the installed versions, so an upgrade that moves one fails there,
by name, instead of silently losing a fix (every use site falls back when the name is gone).

The patches themselves stay beside the code they serve (each use site names its entry here);
this module only lists them.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Internal:
    module: str
    path: str  # attribute path inside the module; "Class.attr" for an instance attribute's class
    used_in: str
    without_it: str
    instance: bool = False  # set on instances in the class's __init__, not on the class

    def exists(self) -> bool:
        try:
            target: Any = importlib.import_module(self.module)  # a module, then a class
            *owners, name = self.path.split(".")
            for part in owners:
                target = getattr(target, part)
            if self.instance:
                return f"self.{name}" in inspect.getsource(target.__init__)
            return hasattr(target, name)
        except (ImportError, AttributeError, OSError, TypeError):
            return False


INTERNALS = (
    Internal(
        "ray._private.node",
        "Node.start_api_server",
        "runner/fast_start.py: lean_local_ray",
        "a local Ray without the dashboard waits 1.2-1.4 s for the dashboard head's URL again",
    ),
    Internal(
        "ray._private.node",
        "Node.start_raylet",
        "runner/fast_start.py: lean_local_ray",
        "a run's own Ray beside another Ray waits 3.4 s again for its dashboard agent's port",
    ),
    Internal(
        "ray._private.node",
        "Node._ray_params",
        "runner/fast_start.py: lean_local_ray",
        "as for start_raylet: the agent's port is not changed",
        instance=True,
    ),
    Internal(
        "ray._private.ray_constants",
        "DEFAULT_DASHBOARD_AGENT_LISTEN_PORT",
        "runner/fast_start.py: lean_local_ray",
        "as for start_raylet: the agent's port is not changed",
    ),
    Internal(
        "ray._private.worker",
        "_global_node",
        "runner/fast_start.py: shutdown; runner/serving/server.py: serve_logs",
        "ray.shutdown() of a Ray this run started waits ~1 s on the autoscaler monitor again",
    ),
    Internal(
        "ray._private.node",
        "Node.all_processes",
        "runner/fast_start.py: shutdown",
        "as for _global_node: the monitor process is not found and not stopped first",
        instance=True,
    ),
    Internal(
        "horovod.ray",
        "RayExecutor._initialize_adapter",
        "runner/training/horovod_trainer.py: PlacedExecutor",
        "Horovod's workers no longer go into our placement group (trainer.placement, custom "
        "resources): Horovod packs them and asks for CPU/GPU only",
    ),
    Internal(
        "horovod.ray.runner",
        "StaticAdapter._create_strategy",
        "runner/training/horovod_trainer.py: PlacedExecutor",
        "as above, for a fixed number of workers",
    ),
    Internal(
        "horovod.ray.elastic_v2",
        "ElasticAdapter._create_resources",
        "runner/training/horovod_trainer.py: PlacedExecutor",
        "elastic workers lose the custom resources of trainer.resources_per_worker",
    ),
    Internal(
        "ray.train.v2.api.data_parallel_trainer",
        "DataParallelTrainer._create_default_callbacks",
        "runner/training/ray_train.py: without_cleaner",
        "every DDP and Ray-trained trees fit() waits 12 s after training again, for Ray "
        "Train's placement-group cleaner (no dashboard: its State API calls time out)",
    ),
    Internal(
        "ray.train.v2._internal.callbacks.placement_group_callback",
        "PlacementGroupCleanerCallback",
        "runner/training/ray_train.py: without_cleaner",
        "as above: the callback is no longer found by its name, so it stays",
    ),
    Internal(
        "modin.core.execution.ray.common.engine_wrapper",
        "RayWrapper._func_cache",
        "runner/processing/modin_processor.py: after a new Ray session",
        "Modin reuses object refs of a Ray session that is gone (a second run in one process)",
    ),
    Internal(
        "hydra.core.utils",
        "JobReturn._return_value",
        "runner/sweeps/launcher.py: failed trials",
        "a failed sweep trial's error is no longer recorded on its JobReturn",
    ),
    Internal(
        "hydra._internal.utils",
        "run_and_report",
        "runner/overrides.py: say_override_errors_in_one_line",
        "a misspelt or mistyped override gets Hydra's own message (advising +key=value) again",
    ),
    Internal(
        "lightgbm.compat",
        "SKLEARN_INSTALLED",
        "runner/fast_start.py: import_lightgbm",
        "LightGBM may import scikit-learn again (most of a second of a small table's run)",
    ),
)


def missing() -> list[str]:
    """One line per listed internal that the installed versions lack."""
    return [
        f"{i.module}.{i.path} (used in {i.used_in}); without it: {i.without_it}"
        for i in INTERNALS
        if not i.exists()
    ]
