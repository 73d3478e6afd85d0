"""The one training loop, shared by the local, Horovod and DDP trainers."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from runner.errors import UserError
from runner.model.layout import Layout
from runner.model.network import TabularModel
from runner.storage import Location
from runner.training import checkpoints
from runner.training.evaluation import Decoders, compute_metrics, metric_names
from runner.training.metrics import higher_is_better

log = logging.getLogger(__name__)

OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}


@dataclass
class TrainingJob:
    """Everything a worker needs to train; plain data, so it pickles to remote workers."""

    meta: dict
    model_cfg: dict
    trainer_cfg: dict
    loader: object
    run_dir: str
    train_shards: list  # one loader handle per worker
    validation_shards: list
    splits: Location | None = None  # for re-sharding when an elastic run changes size

    @classmethod
    def create(
        cls,
        splits: Location,
        meta: dict,
        model_cfg: dict,
        trainer_cfg: dict,
        loader,
        run_dir: str,
        world_size: int = 1,
    ) -> TrainingJob:
        # Training shards hold equal row counts (every worker takes the same number of
        # steps); validation shards cover every row once.
        return cls(
            meta,
            model_cfg,
            trainer_cfg,
            loader,
            run_dir,
            loader.shards(splits.join("train"), world_size, equal=True),
            loader.shards(splits.join("validation"), world_size, equal=False),
            splits,
        )


@dataclass
class TrainingResult:
    history: list[dict] = field(default_factory=list)
    best_epoch: int = -1
    best_value: float = float("nan")
    monitor: str = "loss"
    stopped_early: bool = False
    resumed_at_epoch: int | None = None
    train_seconds: float = 0.0  # the epoch loop, validation and checkpoints included
    step_seconds: float = 0.0  # training steps alone (what a bare loop would spend)
    samples_seen: int = 0  # by all workers
    world_size: int = 1
    model: nn.Module | None = None  # best weights, unwrapped


def build_model(layout: Layout, model_cfg: dict) -> TabularModel:
    if model_cfg.get("combiner", "concat") != "concat":
        raise UserError(f"model.combiner={model_cfg['combiner']} is not supported; use concat")
    return TabularModel(
        layout,
        int(model_cfg.get("hidden_size", 64)),
        int(model_cfg.get("num_layers", 2)),
        float(model_cfg.get("dropout", 0.0)),
    )


def make_optimizer(
    name: str, params, learning_rate: float, weight_decay: float
) -> torch.optim.Optimizer:
    if name not in OPTIMIZERS:
        raise UserError(f"trainer.optimizer={name} is unknown; use one of: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, lr=learning_rate, weight_decay=weight_decay)


def output_loss(
    layout: Layout, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]
) -> torch.Tensor:
    total = torch.zeros((), device=next(iter(logits.values())).device)
    for spec in layout.outputs:
        z, y = logits[spec.name], targets[spec.name]
        if spec.type == "binary":
            total = total + nn.functional.binary_cross_entropy_with_logits(z.squeeze(1), y)
        elif spec.type == "category":
            total = total + nn.functional.cross_entropy(z, y)
        else:
            total = total + nn.functional.mse_loss(z.squeeze(1), y)
    return total


@dataclass
class Scored:
    """Model outputs over a split, with the targets and raw row numbers they belong to."""

    logits: dict[str, np.ndarray]
    targets: dict[str, np.ndarray]
    row_ids: np.ndarray


def score(model: nn.Module, chunks, layout: Layout, step: _Step | None = None) -> Scored:
    """Runs the model over evaluation chunks (TensorTables) in inference mode."""
    step = step or _Step(model, None, layout, torch.device("cpu"), None, None)
    logits: dict[str, list] = {spec.name: [] for spec in layout.outputs}
    targets: dict[str, list] = {spec.name: [] for spec in layout.outputs}
    rows = []
    for chunk, outputs in step.chunks(chunks):
        for name, z in outputs.items():
            logits[name].append(z.numpy())
        for name, y in chunk.targets.items():
            targets[name].append(y.numpy())
        rows.append(chunk.row_ids.numpy())
    # Unlabelled data (predict) has no targets; an empty shard still reports empty ones.
    with_targets = any(targets.values()) or not rows
    return Scored(
        _stack(layout, logits, "logits"),
        _stack(layout, targets, "targets") if with_targets else {},
        np.concatenate(rows) if rows else np.zeros(0, np.int64),
    )


def _stack(layout: Layout, parts: dict[str, list], kind: str) -> dict[str, np.ndarray]:
    """Concatenated per-output arrays; a worker with no rows still returns every output (empty)."""
    out = {}
    for spec in layout.outputs:
        if parts[spec.name]:
            out[spec.name] = np.concatenate(parts[spec.name])
        elif kind == "logits":
            out[spec.name] = np.zeros((0, spec.size), np.float32)
        else:
            out[spec.name] = np.zeros(0, np.int64 if spec.type == "category" else np.float32)
    return out


class EarlyStopping:
    def __init__(self, metric: str, patience: int):
        self.metric = metric
        self.patience = patience
        self.maximize = higher_is_better(metric)
        self.best_value = float("nan")
        self.best_epoch = -1
        self.bad_epochs = 0

    def update(self, value: float, epoch: int) -> bool:
        """True when this epoch is the best so far."""
        better = self.best_epoch < 0 or (
            value > self.best_value if self.maximize else value < self.best_value
        )
        if better and not np.isnan(value):
            self.best_value, self.best_epoch, self.bad_epochs = value, epoch, 0
            return True
        self.bad_epochs += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.bad_epochs >= self.patience

    def state(self) -> dict:
        return {
            "best_value": self.best_value,
            "best_epoch": self.best_epoch,
            "bad_epochs": self.bad_epochs,
        }

    def load(self, state: dict) -> None:
        self.best_value, self.best_epoch, self.bad_epochs = (
            state["best_value"],
            state["best_epoch"],
            state["bad_epochs"],
        )


def _tensorboard(run_dir: Path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(run_dir / "tensorboard"))


PRECISIONS = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def scaled_learning_rate(cfg: dict, world_size: int, epoch: int) -> float:
    """Base rate scaled for the global batch (linear, sqrt or none), reached by a
    linear warm-up over trainer.warmup_epochs."""
    base = float(cfg["learning_rate"])
    rule = cfg.get("learning_rate_scaling", "linear")
    factor = {"linear": world_size, "sqrt": world_size**0.5, "none": 1.0}.get(rule)
    if factor is None:
        raise UserError(
            f"trainer.learning_rate_scaling={rule} is unknown; use linear, sqrt or none"
        )
    target = base * factor
    warmup = int(cfg.get("warmup_epochs", 0) or 0)
    if world_size == 1 or warmup <= 0 or epoch >= warmup:
        return target
    return base + (target - base) * (epoch + 1) / (warmup + 1)


def _resume_point(cfg: dict, run_dir: Path) -> Path | None:
    if cfg.get("resume_from"):
        return checkpoints.resolve_resume(cfg["resume_from"])
    own = run_dir / "checkpoints" / checkpoints.LAST
    # A retried attempt continues from the checkpoint its predecessor left, and only from
    # that: a checkpoint of another run in a reused run dir carries another run id.
    if cfg.get("resume_if_present") and own.exists():
        if checkpoints.load(own).get("run_id") == cfg.get("run_id"):
            return own
    return None


def _set_threads(cfg: dict, strategy) -> None:
    threads = cfg.get("num_threads")
    if not threads and strategy.world_size > 1:
        # Workers on one machine share its cores: workers x threads must not exceed them.
        threads = max(1, (os.cpu_count() or 1) // max(strategy.local_size, 1))
    if threads:
        torch.set_num_threads(int(threads))


def _record_worker(run_dir: Path, strategy) -> None:
    """workers/rank-N.json: where each worker ran (process, host, Ray node)."""
    import json
    import socket

    from runner.processing.engines import current_node

    (run_dir / "workers").mkdir(parents=True, exist_ok=True)
    info = {
        "rank": strategy.rank,
        "world_size": strategy.world_size,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "node": current_node(),
        "device": str(strategy.device),
    }
    (run_dir / "workers" / f"rank-{strategy.rank}.json").write_text(json.dumps(info))


def run_training(job: TrainingJob, strategy) -> TrainingResult:
    cfg = job.trainer_cfg
    _set_threads(cfg, strategy)
    seed = int(cfg["seed"])
    run_dir = Path(job.run_dir)
    _record_worker(run_dir, strategy)
    layout = Layout.from_meta(job.meta, job.model_cfg)
    decoders = Decoders(job.meta)
    train_data = job.loader.open(job.train_shards[strategy.rank], layout, equal=True)
    val_data = job.loader.open(job.validation_shards[strategy.rank], layout)
    has_validation = int(job.meta["rows"]["validation"]) > 0
    if not has_validation and strategy.is_main:
        log.warning(
            "the validation split is empty; early stopping and model selection use training metrics"
        )

    precision = str(cfg.get("precision", "32"))
    if precision not in PRECISIONS:
        raise UserError(f"trainer.precision={precision} is unknown; use 32, bf16 or fp16")
    device = strategy.device
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    model = build_model(layout, job.model_cfg).to(device)
    optimizer = make_optimizer(
        cfg["optimizer"],
        model.parameters(),
        float(cfg["learning_rate"]),
        float(cfg.get("weight_decay", 0.0)),
    )
    early = cfg.get("early_stopping") or {}
    monitor = EarlyStopping(early.get("metric", "loss"), int(early.get("patience", 0)))
    known = metric_names(layout)
    if monitor.metric not in known:
        raise UserError(
            f"trainer.early_stopping.metric={monitor.metric} is unknown; choose one of: {', '.join(known)}"
        )

    result = TrainingResult(monitor=monitor.metric)
    start_epoch = 0
    best_state = None
    resume = _resume_point(cfg, run_dir)
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

    ctx = _Epochs(
        job=job,
        strategy=strategy,
        layout=layout,
        decoders=decoders,
        model=model,
        optimizer=optimizer,
        step=_Step(
            model,
            optimizer,
            layout,
            device,
            PRECISIONS[precision],
            torch.amp.GradScaler(
                device.type, enabled=precision == "fp16" and device.type == "cuda"
            ),
        ),
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
    ctx.close()
    final = _unwrapped(model).cpu()
    if best_state is not None:
        final.load_state_dict(best_state["model"])
    result.model = final
    return result


@dataclass
class _Epochs:
    """The epoch loop and what it carries from epoch to epoch; re-entrant, so that an
    elastic strategy can run it again from its last commit with other workers."""

    job: TrainingJob
    strategy: object
    layout: Layout
    decoders: Decoders
    model: nn.Module
    optimizer: torch.optim.Optimizer
    step: _Step
    monitor: EarlyStopping
    result: TrainingResult
    epoch: int  # the next epoch to run (0-based)
    best_state: dict | None
    train_data: object
    val_data: object
    has_validation: bool
    writer: object = None
    commit: object = None  # called after every epoch (elastic: records the state to return to)

    def reopen_shards(self) -> None:
        """This worker's shards for the current rank and world size (after an elastic reset)."""
        job, strategy = self.job, self.strategy
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
        cfg, strategy, run_dir = self.job.trainer_cfg, self.strategy, Path(self.job.run_dir)
        epochs = int(cfg["epochs"])
        every = max(int(cfg.get("checkpoint_every", 1)), 1)
        monitor_split = "validation" if self.has_validation else "train"
        seed = int(cfg["seed"])
        for epoch in range(self.epoch, epochs):
            if self.monitor.should_stop:
                break
            epoch_started = time.perf_counter()
            for group in self.optimizer.param_groups:
                group["lr"] = scaled_learning_rate(cfg, strategy.world_size, epoch)
            train_metrics, seen, step_seconds = _train_epoch(
                self.step,
                self.decoders,
                self.job.loader,
                self.train_data,
                epoch,
                seed,
                strategy,
                show=bool(cfg.get("progress_bar", True)) and strategy.is_main,
                label=f"epoch {epoch + 1}/{epochs}",
            )
            samples = seen * strategy.world_size  # equal training shards
            self.result.samples_seen += samples
            self.result.step_seconds += step_seconds
            val_metrics = (
                _evaluate(self.step, self.decoders, self.job.loader, self.val_data, strategy)
                if self.has_validation
                else {}
            )
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
                if self.writer is None:
                    self.writer = _tensorboard(run_dir)
                _log_epoch(self.writer, record)
                if improved:
                    self.best_state = {
                        "epoch": epoch + 1,
                        "model": _cpu_state(self.model),
                        "metrics": scored,
                    }
                    checkpoints.save(self.best_state, run_dir / "checkpoints" / checkpoints.BEST)
                if (epoch + 1) % every == 0 or epoch + 1 == epochs or self.monitor.should_stop:
                    checkpoints.save(
                        {
                            "run_id": cfg.get("run_id"),
                            "epoch": epoch + 1,
                            "model": _cpu_state(self.model),
                            "optimizer": self.optimizer.state_dict(),
                            "early_stopping": self.monitor.state(),
                            "history": self.result.history,
                            "rng": checkpoints.rng_state(),
                            "best_model": self.best_state,
                        },
                        run_dir / "checkpoints" / checkpoints.LAST,
                    )
            elif improved:
                self.best_state = {
                    "epoch": epoch + 1,
                    "model": _cpu_state(self.model),
                    "metrics": scored,
                }
            if self.commit is not None:
                self.commit()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _cpu_state(model: nn.Module) -> dict:
    return {k: v.detach().cpu() for k, v in _unwrapped(model).state_dict().items()}


def _unwrapped(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


class _Step:
    """One optimisation step and one inference pass, on the strategy's device and precision."""

    def __init__(self, model, optimizer, layout, device, autocast_dtype, scaler):
        self.model, self.optimizer, self.layout, self.device = model, optimizer, layout, device
        self.autocast_dtype, self.scaler = autocast_dtype, scaler

    def _to_device(self, tensors: dict) -> dict:
        if self.device.type == "cpu":
            return tensors
        return {k: v.to(self.device, non_blocking=True) for k, v in tensors.items()}

    def _autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        )

    def train(self, inputs: dict, targets: dict) -> dict[str, torch.Tensor]:
        inputs, targets = self._to_device(inputs), self._to_device(targets)
        self.optimizer.zero_grad()
        with self._autocast():
            logits = self.model(inputs)
        loss = output_loss(self.layout, {k: v.float() for k, v in logits.items()}, targets)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return {k: v.detach().float().cpu() for k, v in logits.items()}

    def chunks(self, chunks):
        """Evaluation chunks moved to the device, outputs back on the CPU in float32."""
        self.model.eval()
        for chunk in chunks:
            with torch.inference_mode(), self._autocast():
                outputs = self.model(self._to_device(chunk.inputs))
            yield chunk, {k: v.float().cpu() for k, v in outputs.items()}


def _train_epoch(step: _Step, decoders, loader, data, epoch, seed, strategy, show, label):
    step.model.train()
    logits_parts: dict[str, list] = {spec.name: [] for spec in step.layout.outputs}
    target_parts: dict[str, list] = {spec.name: [] for spec in step.layout.outputs}
    seen = 0
    bar = tqdm(
        total=len(data) or None,
        desc=label,
        unit="rows",
        leave=False,
        disable=not show,
        mininterval=0.5,
    )
    started = time.perf_counter()
    for inputs, targets in loader.train_batches(data, epoch, seed):
        logits = step.train(inputs, targets)
        if not seen and epoch == 0 and strategy.is_main:
            log.info(
                "first training step done %.2fs after the process started", _since_process_start()
            )
        for name, z in logits.items():
            logits_parts[name].append(z.numpy())
            target_parts[name].append(targets[name].numpy())
        n = len(next(iter(targets.values())))
        seen += n
        bar.update(n)
    bar.close()
    step_seconds = time.perf_counter() - started
    logits_np, targets_np = (
        _stack(step.layout, logits_parts, "logits"),
        _stack(step.layout, target_parts, "targets"),
    )
    metrics = compute_metrics(
        step.layout, decoders, strategy.gather(logits_np), strategy.gather(targets_np)
    )
    return metrics, seen, step_seconds


def _since_process_start() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


def _evaluate(step: _Step, decoders, loader, data, strategy) -> dict[str, float]:
    scored = score(step.model, loader.eval_batches(data), step.layout, step)
    return compute_metrics(
        step.layout, decoders, strategy.gather(scored.logits), strategy.gather(scored.targets)
    )


def _log_epoch(writer, record: dict) -> None:
    if writer is None:
        return
    step = record["epoch"]
    for split in ("train", "validation"):
        for name, value in record[split].items():
            writer.add_scalar(f"{split}/{name}", value, step)
    writer.add_scalar("learning_rate", record["learning_rate"], step)
    writer.flush()
