"""The dependency internals the runner reaches into (runner/compat.py) exist in the installed
versions: an upgrade that moves one fails here by name."""

from runner.compat import INTERNALS, Internal, missing


def test_every_internal_the_runner_uses_exists():
    assert missing() == []
    assert len(INTERNALS) >= 8


def test_a_missing_internal_is_named():
    gone = Internal("ray._private.node", "Node.no_such_thing", "nowhere", "nothing")
    assert not gone.exists()
    assert not Internal("no_such_module", "x", "nowhere", "nothing").exists()
