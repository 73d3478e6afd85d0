"""The one training loop, shared by the local, Horovod and DDP trainers."""

from __future__ import annotations

import logging
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

    @classmethod
    def create(cls, splits: Location, meta: dict, model_cfg: dict, trainer_cfg: dict, loader, run_dir: str,
               world_size: int = 1) -> TrainingJob:
        # Training shards hold equal row counts (every worker takes the same number of
        # steps); validation shards cover every row once.
        return cls(meta, model_cfg, trainer_cfg, loader, run_dir,
                   loader.shards(splits.join("train"), world_size, equal=True),
                   loader.shards(splits.join("validation"), world_size, equal=False))


@dataclass
class TrainingResult:
    history: list[dict] = field(default_factory=list)
    best_epoch: int = -1
    best_value: float = float("nan")
    monitor: str = "loss"
    stopped_early: bool = False
    resumed_at_epoch: int | None = None
    train_seconds: float = 0.0
    samples_seen: int = 0
    model: nn.Module | None = None  # best weights, unwrapped


def build_model(layout: Layout, model_cfg: dict) -> TabularModel:
    if model_cfg.get("combiner", "concat") != "concat":
        raise UserError(f"model.combiner={model_cfg['combiner']} is not supported; use concat")
    return TabularModel(layout, int(model_cfg.get("hidden_size", 64)), int(model_cfg.get("num_layers", 2)),
                        float(model_cfg.get("dropout", 0.0)))


def make_optimizer(name: str, params, learning_rate: float, weight_decay: float) -> torch.optim.Optimizer:
    if name not in OPTIMIZERS:
        raise UserError(f"trainer.optimizer={name} is unknown; use one of: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](params, lr=learning_rate, weight_decay=weight_decay)


def output_loss(layout: Layout, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> torch.Tensor:
    total = torch.zeros(())
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


def score(model: nn.Module, chunks, layout: Layout) -> Scored:
    """Runs the model over evaluation chunks (TensorTables) in inference mode."""
    model.eval()
    logits: dict[str, list] = {spec.name: [] for spec in layout.outputs}
    targets: dict[str, list] = {}
    rows = []
    with torch.inference_mode():
        for chunk in chunks:
            for name, z in model(chunk.inputs).items():
                logits[name].append(z.numpy())
            for name, y in chunk.targets.items():
                targets.setdefault(name, []).append(y.numpy())
            rows.append(chunk.row_ids.numpy())
    sizes = {spec.name: spec.size for spec in layout.outputs}
    return Scored(
        {k: np.concatenate(v) if v else np.zeros((0, sizes[k]), np.float32) for k, v in logits.items()},
        {k: np.concatenate(v) for k, v in targets.items()},
        np.concatenate(rows) if rows else np.zeros(0, np.int64),
    )


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
        better = self.best_epoch < 0 or (value > self.best_value if self.maximize else value < self.best_value)
        if better and not np.isnan(value):
            self.best_value, self.best_epoch, self.bad_epochs = value, epoch, 0
            return True
        self.bad_epochs += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.bad_epochs >= self.patience

    def state(self) -> dict:
        return {"best_value": self.best_value, "best_epoch": self.best_epoch, "bad_epochs": self.bad_epochs}

    def load(self, state: dict) -> None:
        self.best_value, self.best_epoch, self.bad_epochs = state["best_value"], state["best_epoch"], state["bad_epochs"]


def _tensorboard(run_dir: Path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(run_dir / "tensorboard"))


def run_training(job: TrainingJob, strategy) -> TrainingResult:
    cfg = job.trainer_cfg
    if cfg.get("num_threads"):
        torch.set_num_threads(int(cfg["num_threads"]))
    seed = int(cfg["seed"])
    run_dir = Path(job.run_dir)
    layout = Layout.from_meta(job.meta, job.model_cfg)
    decoders = Decoders(job.meta)
    train_data = job.loader.open(job.train_shards[strategy.rank], layout, equal=True)
    val_data = job.loader.open(job.validation_shards[strategy.rank], layout)
    has_validation = int(job.meta["rows"]["validation"]) > 0
    monitor_split = "validation" if has_validation else "train"
    if not has_validation:
        log.warning("the validation split is empty; early stopping and model selection use training metrics")

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    model = build_model(layout, job.model_cfg)
    optimizer = make_optimizer(cfg["optimizer"], model.parameters(), float(cfg["learning_rate"]),
                               float(cfg.get("weight_decay", 0.0)))
    model, optimizer = strategy.prepare(model, optimizer)

    early = cfg.get("early_stopping") or {}
    monitor = EarlyStopping(early.get("metric", "loss"), int(early.get("patience", 0)))
    known = metric_names(layout)
    if monitor.metric not in known:
        raise UserError(f"trainer.early_stopping.metric={monitor.metric} is unknown; choose one of: {', '.join(known)}")

    result = TrainingResult(monitor=monitor.metric)
    start_epoch = 0
    if cfg.get("resume_from"):
        path = checkpoints.resolve_resume(cfg["resume_from"])
        state = checkpoints.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        monitor.load(state["early_stopping"])
        result.history = state["history"]
        start_epoch = state["epoch"]
        checkpoints.restore_rng(state["rng"])
        result.resumed_at_epoch = start_epoch
        log.info("resumed from %s after epoch %d", path, start_epoch)
        if state.get("best_model") is not None and strategy.is_main:
            checkpoints.save(state["best_model"], run_dir / "checkpoints" / checkpoints.BEST)

    writer = _tensorboard(run_dir) if strategy.is_main else None
    epochs = int(cfg["epochs"])
    every = max(int(cfg.get("checkpoint_every", 1)), 1)
    best_state = None
    started = time.perf_counter()
    for epoch in range(start_epoch, epochs):
        if monitor.should_stop:
            break
        epoch_started = time.perf_counter()
        train_metrics, seen = _train_epoch(model, optimizer, layout, decoders, job.loader, train_data, epoch, seed,
                                           strategy, show=bool(cfg.get("progress_bar", True)) and strategy.is_main,
                                           label=f"epoch {epoch + 1}/{epochs}")
        result.samples_seen += seen
        val_metrics = _evaluate(model, layout, decoders, job.loader, val_data, strategy) if has_validation else {}
        record = {"epoch": epoch + 1, "train": train_metrics, "validation": val_metrics,
                  "learning_rate": optimizer.param_groups[0]["lr"], "seconds": time.perf_counter() - epoch_started}
        result.history.append(record)
        scored = val_metrics if has_validation else train_metrics
        improved = monitor.update(scored.get(monitor.metric, float("nan")), epoch + 1)
        log.info("epoch %d/%d  train loss %.4f  %s %s %.4f%s", epoch + 1, epochs, train_metrics["loss"],
                 monitor_split, monitor.metric, scored.get(monitor.metric, float("nan")), "  *" if improved else "")
        if writer is not None:
            _log_epoch(writer, record)
        if strategy.is_main:
            if improved:
                best_state = {"epoch": epoch + 1, "model": _unwrapped(model).state_dict(), "metrics": scored}
                checkpoints.save(best_state, run_dir / "checkpoints" / checkpoints.BEST)
            last = epoch + 1 == epochs or monitor.should_stop
            if (epoch + 1) % every == 0 or last:
                checkpoints.save({
                    "epoch": epoch + 1, "model": _unwrapped(model).state_dict(), "optimizer": optimizer.state_dict(),
                    "early_stopping": monitor.state(), "history": result.history, "rng": checkpoints.rng_state(),
                    "best_model": best_state,
                }, run_dir / "checkpoints" / checkpoints.LAST)
    result.train_seconds = time.perf_counter() - started
    result.stopped_early = monitor.should_stop
    result.best_epoch, result.best_value = monitor.best_epoch, monitor.best_value
    if writer is not None:
        writer.close()
    best_path = run_dir / "checkpoints" / checkpoints.BEST
    if strategy.is_main and best_path.exists():
        _unwrapped(model).load_state_dict(checkpoints.load(best_path)["model"])
    result.model = _unwrapped(model)
    return result


def _unwrapped(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


def _train_epoch(model, optimizer, layout, decoders, loader, data, epoch, seed, strategy, show, label):
    model.train()
    logits_parts: dict[str, list[torch.Tensor]] = {}
    target_parts: dict[str, list[torch.Tensor]] = {}
    seen = 0
    bar = tqdm(total=len(data) or None, desc=label, unit="rows", leave=False, disable=not show, mininterval=0.5)
    for inputs, targets in loader.train_batches(data, epoch, seed):
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = output_loss(layout, logits, targets)
        loss.backward()
        optimizer.step()
        for name, z in logits.items():
            logits_parts.setdefault(name, []).append(z.detach())
            target_parts.setdefault(name, []).append(targets[name])
        n = len(next(iter(targets.values())))
        seen += n
        bar.update(n)
    bar.close()
    logits_np = {k: torch.cat(v).numpy() for k, v in logits_parts.items()}
    targets_np = {k: torch.cat(v).numpy() for k, v in target_parts.items()}
    return compute_metrics(layout, decoders, strategy.gather(logits_np), strategy.gather(targets_np)), seen


def _evaluate(model, layout, decoders, loader, data, strategy) -> dict[str, float]:
    scored = score(model, loader.eval_batches(data), layout)
    return compute_metrics(layout, decoders, strategy.gather(scored.logits), strategy.gather(scored.targets))


def _log_epoch(writer, record: dict) -> None:
    step = record["epoch"]
    for split in ("train", "validation"):
        for name, value in record[split].items():
            writer.add_scalar(f"{split}/{name}", value, step)
    writer.add_scalar("learning_rate", record["learning_rate"], step)
    writer.flush()
