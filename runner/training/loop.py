"""The one training loop, shared by every trainer: the strategy (local, Horovod, DDP)
is all it knows of how it is distributed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from runner.errors import UserError
from runner.model.layout import Layout
from runner.model.network import build_model
from runner.scoring.decoding import Decoders, compute_metrics, constant_logits, metric_names
from runner.scoring.forward import score, stack_outputs
from runner.training import checkpoints, thread_share, workers
from runner.training.averaging import make_average
from runner.training.early_stopping import EarlyStopping
from runner.training.job import TrainingJob, TrainingResult
from runner.training.optimization import make_optimizer, scaled_learning_rate
from runner.training.reporting import report_epoch
from runner.training.step import Step, training_precision

if TYPE_CHECKING:
    from runner.training.base import Strategy

log = logging.getLogger(__name__)


def _resume_point(job: TrainingJob, run_dir: Path) -> Path | None:
    if job.settings.resume_from:
        return checkpoints.resolve_resume(job.settings.resume_from)
    own = run_dir / "checkpoints" / checkpoints.LAST
    # A retried attempt continues from the checkpoint its predecessor left, and only from
    # that: a checkpoint of another run in a reused run dir carries another run id.
    if job.resume_if_present and own.exists():
        if checkpoints.load(own).get("run_id") == job.run_id:
            return own
    return None


def run_training(job: TrainingJob, strategy) -> TrainingResult:
    settings = job.settings
    workers.set_threads(settings.num_threads, strategy)
    seed = settings.seed
    run_dir = Path(job.run_dir)
    workers.record(run_dir, strategy)
    layout = Layout.from_meta(job.meta, job.model)
    decoders = Decoders(job.meta)
    train_data = job.loader.open(job.train_shards[strategy.rank], layout, equal=True)
    val_data = job.loader.open(job.validation_shards[strategy.rank], layout)
    has_validation = int(job.meta["rows"]["validation"]) > 0
    if not has_validation and strategy.is_main:
        log.warning(
            "the validation split is empty; early stopping and model selection use training metrics"
        )

    device = strategy.device
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    model = build_model(layout, job.model).to(device)
    optimizer = make_optimizer(settings, model.parameters())
    monitor = EarlyStopping(settings.early_stopping.metric, settings.early_stopping.patience)
    known = metric_names(layout)
    if monitor.metric not in known:
        raise UserError(
            f"trainer.early_stopping.metric={monitor.metric} is unknown; choose one of: {', '.join(known)}"
        )

    result = TrainingResult(monitor=monitor.metric)
    start_epoch = 0
    best_state = None
    resume = _resume_point(job, run_dir)
    if resume is not None:
        state = checkpoints.load(resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        monitor.load(state["early_stopping"])
        result.history = state["history"]
        start_epoch = state["epoch"]
        checkpoints.restore_rng(state["rng"])
        best_state = state.get("best_model")
        result.resumed_at_epoch = start_epoch
        log.info("resumed from %s after epoch %d", resume, start_epoch)
        if best_state is not None and strategy.is_main:
            checkpoints.save(best_state, run_dir / "checkpoints" / checkpoints.BEST)
    # Rank 0's state (fresh or resumed) reaches every worker here.
    model, optimizer = strategy.prepare(model, optimizer)
    average = make_average(
        _unwrapped(model), settings.ema_epochs, _steps_per_epoch(job, strategy.world_size)
    )
    if average is not None and resume is not None and state.get("average") is not None:
        average.load(state["average"])

    precision, why = training_precision(str(settings.precision), device)
    result.precision = precision
    if settings.precision == "auto" and strategy.is_main:
        log.info("trainer.precision=auto picked %s: %s", precision, why)
    ctx = _Epochs(
        job=job,
        strategy=strategy,
        layout=layout,
        decoders=decoders,
        model=model,
        optimizer=optimizer,
        step=Step(model, optimizer, layout, device, precision, average),
        monitor=monitor,
        result=result,
        epoch=start_epoch,
        best_state=best_state,
        train_data=train_data,
        val_data=val_data,
        has_validation=has_validation,
    )
    started = time.perf_counter()
    strategy.run_epochs(ctx)  # elastic strategies re-enter it after a change of workers
    best_state = ctx.best_state
    result.train_seconds = time.perf_counter() - started
    result.world_size = strategy.world_size
    result.stopped_early = monitor.should_stop
    result.best_epoch, result.best_value = monitor.best_epoch, monitor.best_value
    if strategy.is_main and has_validation and monitor.best_epoch > 0:
        stopped = (
            f"early stopping after epoch {ctx.epoch}: validation {monitor.metric} has not "
            f"improved for {monitor.patience} epochs (trainer.early_stopping.patience); "
            if monitor.should_stop
            else ""
        )
        log.info(
            "%sthe model of epoch %d is kept (validation %s %.4f)",
            stopped,
            monitor.best_epoch,
            monitor.metric,
            monitor.best_value,
        )
    ctx.close()
    final = (average.module if average is not None else _unwrapped(model)).cpu()
    if best_state is not None:
        final.load_state_dict(best_state["model"])
    result.model = final
    return result


@dataclass
class _Epochs:
    """The epoch loop and what it carries from epoch to epoch; re-entrant, so that an
    elastic strategy can run it again from its last commit with other workers."""

    job: TrainingJob
    strategy: Strategy
    layout: Layout
    decoders: Decoders
    model: nn.Module
    optimizer: torch.optim.Optimizer
    step: Step
    monitor: EarlyStopping
    result: TrainingResult
    epoch: int  # the next epoch to run (0-based)
    best_state: dict | None
    train_data: object
    val_data: object
    has_validation: bool
    # Called after every epoch (elastic: records the state to return to).
    commit: Callable[[], None] | None = None

    def reopen_shards(self) -> None:
        """This worker's shards for the current rank and world size (after an elastic reset)."""
        job, strategy = self.job, self.strategy
        assert job.splits is not None  # TrainingJob.create keeps them
        self.train_data = job.loader.open(
            job.loader.shards(job.splits.join("train"), strategy.world_size, equal=True)[
                strategy.rank
            ],
            self.layout,
            equal=True,
        )
        self.val_data = job.loader.open(
            job.loader.shards(job.splits.join("validation"), strategy.world_size, equal=False)[
                strategy.rank
            ],
            self.layout,
        )

    def run(self) -> None:
        settings, strategy, run_dir = self.job.settings, self.strategy, Path(self.job.run_dir)
        epochs = settings.epochs
        every = settings.checkpoint_every
        monitor_split = "validation" if self.has_validation else "train"
        seed = settings.seed
        for epoch in range(self.epoch, epochs):
            result = self.result
            if (
                self.monitor.should_stop
                or result.stopped_by_scheduler
                or result.stopped_at_time_limit
            ):
                break
            offered = thread_share.take()  # cores an ensemble's finished trees gave back
            if offered and offered != torch.get_num_threads():
                log.info("epoch %d: training on %d threads from now on", epoch + 1, offered)
                torch.set_num_threads(offered)
            epoch_started = time.perf_counter()
            for group in self.optimizer.param_groups:
                group["lr"] = scaled_learning_rate(settings, strategy.world_size, epoch)
            train_metrics, seen, step_seconds = _train_epoch(
                self.step,
                self.decoders,
                self.job.loader,
                self.train_data,
                epoch,
                seed,
                strategy,
                show=settings.progress_bar and strategy.is_main,
                label=f"epoch {epoch + 1}/{epochs}",
            )
            samples = seen * strategy.world_size  # equal training shards
            self.result.samples_seen += samples
            self.result.step_seconds += step_seconds
            val_metrics: dict[str, float] = {}
            if self.has_validation:
                val_metrics, baseline = _evaluate(
                    self.step,
                    self.decoders,
                    self.job.loader,
                    self.val_data,
                    strategy,
                    with_baseline=not self.result.validation_baseline,
                )
                self.result.validation_baseline = self.result.validation_baseline or baseline
            record = {
                "epoch": epoch + 1,
                "train": train_metrics,
                "validation": val_metrics,
                "learning_rate": self.optimizer.param_groups[0]["lr"],
                "world_size": strategy.world_size,
                "samples": samples,
                "step_seconds": step_seconds,
                "seconds": time.perf_counter() - epoch_started,
            }
            self.result.history.append(record)
            scored = val_metrics if self.has_validation else train_metrics
            value = scored.get(self.monitor.metric, float("nan"))
            improved = self.monitor.update(value, epoch + 1)
            self.epoch = epoch + 1
            if strategy.is_main:
                log.info(
                    "epoch %d/%d  train loss %.4f  %s %s %.4f%s",
                    epoch + 1,
                    epochs,
                    train_metrics["loss"],
                    monitor_split,
                    self.monitor.metric,
                    value,
                    "  *" if improved else "",
                )
                for epoch_log in self.job.epoch_logs:
                    epoch_log.log_epoch(record)
                if improved:
                    self.best_state = {
                        "epoch": epoch + 1,
                        "model": self._predicting_weights(),
                        "metrics": scored,
                    }
                    checkpoints.save(self.best_state, run_dir / "checkpoints" / checkpoints.BEST)
                if (epoch + 1) % every == 0 or epoch + 1 == epochs or self.monitor.should_stop:
                    checkpoints.save(
                        {
                            "run_id": self.job.run_id,
                            "epoch": epoch + 1,
                            "model": _cpu_state(self.model),
                            "optimizer": self.optimizer.state_dict(),
                            "early_stopping": self.monitor.state(),
                            "history": self.result.history,
                            "rng": checkpoints.rng_state(),
                            "best_model": self.best_state,
                            "average": self.average_state(),
                        },
                        run_dir / "checkpoints" / checkpoints.LAST,
                    )
            elif improved:
                self.best_state = {
                    "epoch": epoch + 1,
                    "model": self._predicting_weights(),
                    "metrics": scored,
                }
            if not self._scheduler_says_go_on(record, epoch + 1 == epochs):
                log.info("epoch %d/%d: the sweep's scheduler stopped this trial", epoch + 1, epochs)
                self.result.stopped_by_scheduler = True
            if epoch + 1 < epochs and self._past_deadline():
                log.info(
                    "epoch %d/%d: time_limit reached; the best epoch so far is kept",
                    epoch + 1,
                    epochs,
                )
                self.result.stopped_at_time_limit = True
            if self.commit is not None:
                self.commit()

    def _scheduler_says_go_on(self, record: dict, last_epoch: bool) -> bool:
        """Rank 0 asks the sweep's scheduler (if any); every rank learns the same answer, so
        all of them leave the loop after the same epoch."""
        strategy, forward = self.strategy, self.job.epoch_reporter
        final = last_epoch or self.monitor.should_stop
        go_on = report_epoch(record, final, forward) if strategy.is_main else True
        if forward is not None and strategy.world_size > 1:
            go_on = bool(strategy.gather({"go_on": np.array([go_on])})["go_on"].all())
        return go_on

    def _past_deadline(self) -> bool:
        """The job's time_limit deadline has passed, as rank 0's clock says: every rank learns
        the same answer."""
        deadline, strategy = self.job.deadline, self.strategy
        if deadline is None:
            return False
        past = time.time() >= deadline if strategy.is_main else False
        if strategy.world_size > 1:
            past = bool(strategy.gather({"past": np.array([past])})["past"].any())
        return past

    def _predicting_weights(self) -> dict:
        """The weights validation scored: the average's when weights are averaged."""
        average = self.step.average
        return _cpu_state(self.model if average is None else average.module)

    def average_state(self) -> dict | None:
        return None if self.step.average is None else self.step.average.state()

    def load_average(self, state: dict | None) -> None:
        if self.step.average is not None and state is not None:
            self.step.average.load(state)

    def close(self) -> None:
        for epoch_log in self.job.epoch_logs:
            epoch_log.close()


def _steps_per_epoch(job: TrainingJob, world_size: int) -> int:
    rows = int(job.meta["rows"]["train"]) // max(1, world_size)
    return max(1, rows // job.loader.batch_size)


def _cpu_state(model: nn.Module) -> dict:
    return {k: v.detach().cpu() for k, v in _unwrapped(model).state_dict().items()}


def _unwrapped(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


TRAIN_METRIC_ROWS = 1_000_000  # an epoch's training metrics come from at most this many rows


class EpochSample:
    """The logits and targets an epoch's training metrics come from, in bounded memory:
    every batch while they hold under `cap` rows; then every 2nd batch (those held are
    thinned alike), every 4th... an even sample of the epoch. Profiled on the 10M-row
    streaming bench, holding all 7M rows' (27k small arrays, stacked and sorted at the
    epoch's end) made the training process's peak grow with the data."""

    def __init__(self, layout: Layout, cap: int = TRAIN_METRIC_ROWS):
        self.layout, self.cap = layout, cap
        self.logits: dict[str, list] = {spec.name: [] for spec in layout.outputs}
        self.targets: dict[str, list] = {spec.name: [] for spec in layout.outputs}
        self.sizes: list[int] = []  # rows of each batch held
        self.stride, self.batches, self.rows = 1, 0, 0

    def add(self, logits: dict, targets: dict, rows: int) -> None:
        self.batches += 1
        if (self.batches - 1) % self.stride:
            return
        for name, z in logits.items():
            self.logits[name].append(z.numpy())
            self.targets[name].append(targets[name].numpy())
        self.sizes.append(rows)
        self.rows += rows
        if self.rows > self.cap and len(self.sizes) > 1:
            self.stride *= 2
            self.sizes = self.sizes[::2]
            self.rows = sum(self.sizes)
            for parts in (*self.logits.values(), *self.targets.values()):
                parts[:] = parts[::2]

    def stacked(self) -> tuple[dict, dict]:
        return stack_outputs(self.layout, self.logits, "logits"), stack_outputs(
            self.layout, self.targets, "targets"
        )


def _train_epoch(step: Step, decoders, loader, data, epoch, seed, strategy, show, label):
    step.model.train()
    sample = EpochSample(step.layout)
    seen = 0
    bar = tqdm(
        total=len(data) or None,
        desc=label,
        unit="rows",
        leave=False,
        disable=None if show else True,  # None: off where stderr is no terminal (a log file)
        mininterval=0.5,
    )
    started = time.perf_counter()
    for inputs, targets in loader.train_batches(data, epoch, seed):
        logits = step.train(inputs, targets)
        if not seen and epoch == 0 and strategy.is_main:
            log.info(
                "first training step done %.2fs after the process started", _since_process_start()
            )
        n = len(next(iter(targets.values())))
        sample.add(logits, targets, n)
        seen += n
        bar.update(n)
    bar.close()
    step_seconds = time.perf_counter() - started
    logits_np, targets_np = sample.stacked()
    metrics = compute_metrics(
        step.layout, decoders, strategy.gather(logits_np), strategy.gather(targets_np)
    )
    return metrics, seen, step_seconds


def _since_process_start() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


def _evaluate(
    step: Step, decoders, loader, data, strategy, with_baseline: bool = False
) -> tuple[dict[str, float], dict[str, float]]:
    """The split's metrics, and (when asked) the mean/majority baseline's on the same rows."""
    scored = score(step.model, loader.eval_batches(data), step.layout, step.evaluation())
    targets = strategy.gather(scored.targets)
    metrics = compute_metrics(step.layout, decoders, strategy.gather(scored.logits), targets)
    if not with_baseline:
        return metrics, {}
    rows = len(next(iter(targets.values()))) if targets else 0
    constants = constant_logits(step.layout, decoders, rows)
    return metrics, compute_metrics(step.layout, decoders, constants, targets)
