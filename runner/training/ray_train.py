"""Ray Train's trainers as the runner builds them (DDP's TorchTrainer, the trees'
LightGBMTrainer): without Ray Train's placement-group cleaner.

That cleaner is a detached actor that asks the State API, every second, whether the run's
controller is still alive, so that it can remove the workers' placement group if the
controller dies alone. The State API is served by the dashboard, which the runner's own
Ray and the `ray start` it documents leave off: each question then waits its 10 s timeout,
and stopping the cleaner after training made every fit() wait 12 s for nothing
("Failed to stop PlacementGroupCleaner gracefully"). Without it nothing leaks: the
controller runs on the driver's node, and a placement group that is not detached is
removed with the job that made it.
"""

from __future__ import annotations

from functools import cache

CLEANER = "PlacementGroupCleanerCallback"  # runner/compat.py lists it


@cache
def without_cleaner(trainer_class: type) -> type:
    """trainer_class, whose fit() starts no placement-group cleaner (where Ray Train V2
    builds its callbacks; as it is on a Ray Train that does not)."""
    if not hasattr(trainer_class, "_create_default_callbacks"):
        return trainer_class

    class Trainer(trainer_class):
        def _create_default_callbacks(self):
            found = super()._create_default_callbacks()
            return [c for c in found if type(c).__name__ != CLEANER]

    Trainer.__name__ = Trainer.__qualname__ = trainer_class.__name__
    return Trainer
