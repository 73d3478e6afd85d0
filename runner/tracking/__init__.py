"""Where a run is recorded besides metrics.json: the Tracker seam (base.py) and its
implementations, one module (or package) each, named by `_target_` in conf/logger/."""
