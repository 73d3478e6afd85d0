"""The driver's view of rank 0's log (runner/training/follow.py), line by line."""

import logging

from runner.training.follow import following_rank_zero, relay_new_lines


def test_whole_runner_lines_are_relayed_once_at_their_level(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    path = tmp_path / "rank-0.log"
    path.write_text(
        "[t][runner.training.loop][INFO] - epoch 1/3  train loss 0.5\n"
        "[t][horovod.runner][INFO] - not ours\n"
        "[t][runner.training.loop][WARNING] - a warning\n"
        "[t][runner.training.loop][INFO] - epoch 2/3  half writ"
    )
    position = relay_new_lines(path, 0)
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        ("runner.training.loop", "INFO", "epoch 1/3  train loss 0.5"),
        ("runner.training.loop", "WARNING", "a warning"),
    ]
    caplog.clear()
    with path.open("a") as handle:
        handle.write("ten\n")
    assert relay_new_lines(path, position) == path.stat().st_size
    assert [r.getMessage() for r in caplog.records] == ["epoch 2/3  half written"]
    assert relay_new_lines(tmp_path / "elsewhere.log", 7) == 7  # not on this machine


def test_a_retry_does_not_repeat_the_earlier_attempts_lines(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    path = tmp_path / "rank-0.log"
    path.write_text("[t][runner.training.loop][INFO] - epoch 1/3 of the lost attempt\n")
    with following_rank_zero(tmp_path):
        with path.open("a") as handle:
            handle.write("[t][runner.training.loop][INFO] - resumed after epoch 1\n")
    messages = [r.getMessage() for r in caplog.records]
    assert "resumed after epoch 1" in messages
    assert "epoch 1/3 of the lost attempt" not in messages


def test_it_reads_what_the_workers_log_format_writes(tmp_path, caplog):
    from runner.training.follow import WORKER_LOG_FORMAT

    caplog.set_level(logging.INFO)
    record = logging.LogRecord("runner.training.loop", logging.INFO, "", 0, "epoch 1/2", (), None)
    path = tmp_path / "rank-0.log"
    path.write_text(logging.Formatter(WORKER_LOG_FORMAT).format(record) + "\n")
    relay_new_lines(path, 0)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("runner.training.loop", "epoch 1/2")
    ]
