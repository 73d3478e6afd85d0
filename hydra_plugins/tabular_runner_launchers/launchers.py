"""Hydra discovers launchers only inside the hydra_plugins namespace; the work is in runner.sweeps."""

from runner.sweeps.launcher import LocalTrialLauncherBase, RayTrialLauncherBase


class LocalTrialLauncher(LocalTrialLauncherBase):
    """hydra/launcher=local"""


class RayTrialLauncher(RayTrialLauncherBase):
    """hydra/launcher=ray"""
