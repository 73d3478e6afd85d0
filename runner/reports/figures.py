"""A run's figures (learning curves, evaluation plots, the importance chart), drawn by a
background process (runner/background.py) while the run scores and writes its outputs:
matplotlib's import and the drawing cost the default experiment about a second that it no
longer waits for. Without that process (a library call, a non-main rank) they are drawn here.
"""

from __future__ import annotations

import importlib
import logging
import time

from runner.background import Background

log = logging.getLogger(__name__)


class FigureQueue:
    def __init__(self, child: Background | None = None):
        self.child = child
        if child is not None:  # matplotlib's import (half a second), before the first figure
            child.call("runner.reports.evaluation:pyplot", reply=False)

    def draw(self, target: str, *args) -> None:
        """target ("module:function") writes a figure; queued, or drawn now without a child."""
        if self.child is not None:
            self.child.call(target, *args, reply=False)
            return
        module, _, name = target.partition(":")
        getattr(importlib.import_module(module), name)(*args)

    def wait(self) -> None:
        """Every figure queued is on disk (or said not drawn, with why)."""
        if self.child is not None:
            started = time.perf_counter()
            for problem in self.child.sync("runner.reports."):
                log.warning("a figure was not drawn: %s", problem)
            log.info("figures: drawn; the run waited %.2fs for them", time.perf_counter() - started)
