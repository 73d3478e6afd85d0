"""Hydra discovers launchers only inside the hydra_plugins namespace; the work is in runner.sweeps."""

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

from runner.sweeps.launcher import LocalTrialLauncherBase, RayTrialLauncherBase, SubmititTrials


class LocalTrialLauncher(LocalTrialLauncherBase):
    """hydra/launcher=local"""


class RayTrialLauncher(RayTrialLauncherBase):
    """hydra/launcher=ray"""


class SubmititLocalTrialLauncher(SubmititTrials, LocalLauncher):
    """hydra/launcher=submitit_local"""


class SubmititSlurmTrialLauncher(SubmititTrials, SlurmLauncher):
    """hydra/launcher=submitit_slurm"""
