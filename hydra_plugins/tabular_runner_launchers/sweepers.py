"""Hydra discovers sweepers only inside the hydra_plugins namespace; the work is in runner.sweeps."""

from runner.sweeps.tune.sweeper import TuneSweeperBase


class TuneSweeper(TuneSweeperBase):
    """hydra/sweeper=tune"""
