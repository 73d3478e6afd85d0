"""What to change when a model does not beat the mean/majority baseline, read off its own
training curve. A training loss that stalled says the run never got going (too small a rate,
or early stopping on a plateau before the model left it: raise them); one that fell says the
model fitted the training rows without that carrying to unseen ones (inputs that do not
explain the target, or over-fitting: look at the features, or lower the rate). Advising
"lower the rate" for both, as a fixed hint would, is wrong for the first: a text table trained
at a third of the default rate sat on its majority-class plateau for five epochs and early
stopping ended it there (docs/accuracy.md)."""

from __future__ import annotations

from dataclasses import dataclass

# A fall of the training loss smaller than this share counts as a stall.
STALL = 0.01


@dataclass(frozen=True)
class Knobs:
    """The settings the advice names: the network's (the default) or the trees'."""

    rate_key: str = "trainer.learning_rate"
    patience_key: str = "trainer.early_stopping.patience"
    step: str = "epoch"  # what a record of the curve counts
    rate: float | None = None  # when the records do not carry it (the network's do)


def training_advice(
    history: list[dict], best_epoch: int, stopped_early: bool, patience: int, knobs=Knobs()
) -> str:
    """One clause for the summary's warning, from the epoch records (runner/training/loop.py)
    or the trees' rounds (runner/training/tree_fit.py)."""
    records = [h for h in history if "loss" in h.get("train", {})]
    if not records:
        return "check the features and their types, and the learning rate"
    rate = f"{records[-1].get('learning_rate', knobs.rate):g}"
    step, rate_key = knobs.step, knobs.rate_key
    # Stopped early: did anything happen after the best epoch? Else: over the whole run.
    # Found by epoch number, as commands._best_metrics finds it, not by position in the list.
    first = records[0]
    if stopped_early:
        first = next((h for h in records if h["epoch"] == best_epoch), first)
    start, last = first["train"]["loss"], records[-1]["train"]["loss"]
    start_epoch, epochs = first["epoch"], records[-1]["epoch"]
    fall = (start - last) / abs(start) if start else 0.0
    if fall < STALL and stopped_early:
        return (
            f"its training loss stalled after {step} {start_epoch} ({start:.4f} -> {last:.4f} by "
            f"{step} {epochs}) and early stopping ended it there: raise "
            f"{knobs.patience_key} (now {patience}) or {rate_key} (now {rate})"
        )
    if fall < STALL:
        return (
            f"its training loss barely moved ({start:.4f} -> {last:.4f} by {step} {epochs}): "
            f"raise {rate_key} (now {rate})"
        )
    return (
        f"its training loss fell ({start:.4f} -> {last:.4f}) without validation following: "
        f"check the features and their types, or lower {rate_key} (now {rate})"
    )
