"""RUNNER_TRICKS_OFF, the switch of runner/fast_start.py's tricks (what each saves is the
bench's; tests/test_cluster_jobs.py starts a Ray with and without them)."""

import pytest
from helpers import error_lines, run_cli

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
