"""RUNNER_TRICKS_OFF, the switch of runner/fast_start.py's tricks (what each saves is the
bench's; tests/test_cluster_jobs.py starts a Ray with and without them)."""

import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT, error_lines, run_cli

from runner.errors import UserError
from runner.fast_start import TRICKS, enabled, tricks_off


def test_tricks_off_reads_names_and_spaces(monkeypatch):
    monkeypatch.setenv("RUNNER_TRICKS_OFF", " monitor_first, no_teardown ,")
    assert tricks_off() == {"monitor_first", "no_teardown"}
    assert not enabled("no_teardown") and enabled("api_server")
    monkeypatch.delenv("RUNNER_TRICKS_OFF")
    assert all(enabled(name) for name in TRICKS)


def test_a_misspelt_trick_is_one_line_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_TRICKS_OFF", "no-teardown")
    with pytest.raises(UserError):
        tricks_off()
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}")
    assert result.returncode == 2
    assert error_lines(result) == [
        "error: RUNNER_TRICKS_OFF names no trick ['no-teardown']; choose from " + ", ".join(TRICKS)
    ]
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("off", ["", "lightgbm_without_sklearn"])
def test_lightgbm_is_imported_without_scikit_learn_which_stays_importable(off):
    """In a fresh process (tests/warm_cli.py has both imported): LightGBM's scikit-learn
    estimators go, its boosters train, and scikit-learn still imports for whoever needs it."""
    probe = (
        "import json, sys\n"
        "import numpy as np\n"
        "from runner.fast_start import import_lightgbm\n"
        "lgb = import_lightgbm()\n"
        "before = 'sklearn' in sys.modules\n"
        "x = np.random.default_rng(0).normal(size=(200, 3))\n"
        "b = lgb.train({'objective': 'regression', 'verbosity': -1}, lgb.Dataset(x, x[:, 0]), 5)\n"
        "import sklearn\n"
        "print(json.dumps([before, lgb.compat.SKLEARN_INSTALLED, b.num_trees()]))\n"
    )
    env = {**os.environ, "RUNNER_TRICKS_OFF": off}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ([True, True, 5] if off else [False, False, 5])
