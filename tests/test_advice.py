"""What the summary tells a user whose model does not beat the baseline, read off the run's
training curve (runner/training/advice.py): the three shapes a curve takes."""

from runner.training.advice import Knobs, training_advice


def curve(losses: list[float], rate: float = 0.003) -> list[dict]:
    return [
        {"epoch": i + 1, "train": {"loss": loss}, "learning_rate": rate}
        for i, loss in enumerate(losses)
    ]


def test_a_loss_that_stalled_until_early_stopping_asks_for_more_patience_or_rate():
    """The text table at a third of the default rate: the majority-class plateau from epoch 2,
    five epochs without a better validation loss, stopped at epoch 7."""
    history = curve([0.6706, 0.6527, 0.6524, 0.6524, 0.6520, 0.6515, 0.6511], rate=0.001)
    advice = training_advice(history, best_epoch=2, stopped_early=True, patience=5)
    assert advice == (
        "its training loss stalled after epoch 2 (0.6527 -> 0.6511 by epoch 7) and early "
        "stopping ended it there: raise trainer.early_stopping.patience (now 5) or "
        "trainer.learning_rate (now 0.001)"
    )


def test_a_loss_that_never_moved_asks_for_a_higher_rate():
    advice = training_advice(curve([1.02, 1.02, 1.0199], rate=1e-8), 3, False, 5)
    assert advice == (
        "its training loss barely moved (1.0200 -> 1.0199 by epoch 3): raise "
        "trainer.learning_rate (now 1e-08)"
    )


def test_a_loss_that_fell_without_validation_asks_to_check_the_inputs_or_lower_the_rate():
    """Falling after the best epoch too: over-fitting, not a plateau, even when stopped early."""
    advice = training_advice(
        curve([1.0, 0.8, 0.6, 0.4]), best_epoch=1, stopped_early=True, patience=3
    )
    assert advice.startswith("its training loss fell (1.0000 -> 0.4000) without validation")
    assert advice.endswith(
        "check the features and their types, or lower trainer.learning_rate (now 0.003)"
    )


def test_no_curve_still_gives_a_hint():
    assert "learning rate" in training_advice([], -1, False, 5)


def test_trees_are_told_their_own_settings_by_round():
    """The trees' curve has no rate in its records and counts boosting rounds."""
    history = [{"epoch": r, "train": {"loss": 0.6931}} for r in (1, 20, 40)]
    knobs = Knobs("model.gbm.learning_rate", "model.gbm.early_stopping_rounds", "round", 1e-5)
    assert training_advice(history, 40, False, 50, knobs) == (
        "its training loss barely moved (0.6931 -> 0.6931 by round 40): raise "
        "model.gbm.learning_rate (now 1e-05)"
    )
