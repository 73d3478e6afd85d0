"""Structured-config schemas, registered in Hydra's ConfigStore: the one source of defaults.

Every option file in conf/<group>/ starts from one of these schemas (via its
defaults list) and sets only what differs, so a misspelt key or a wrong type
fails at composition time with a message naming the key. `check_config` closes
the rest: keys added with `+` that no schema knows, and values out of range,
each reported as one line that names the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from runner.command_table import COMMANDS, help_template
from runner.errors import UserError
from runner.overrides import closest_choice, unknown_key_line

T = TypeVar("T")

if TYPE_CHECKING:
    from omegaconf import DictConfig

# OmegaConf's markers, spelt out: a training worker unpickles these dataclasses without
# importing OmegaConf or Hydra (0.25 s of a fresh Ray actor's start); tests/test_config.py
# checks that they equal omegaconf.MISSING and omegaconf.II.
MISSING = "???"


def II(interpolation: str) -> Any:
    """A field default that interpolates another key (omegaconf.II)."""
    return "${" + interpolation + "}"


# auto: the model family's own (a network's TorchScript, the trees' LightGBM text model, an
# ensemble's members each in theirs)
EXPORT_FORMATS = ("auto", "torchscript", "onnx", "lightgbm")
PLACEMENTS = ("spread", "pack")
OPTIMIZERS = ("adamw", "adam", "sgd")
PRECISIONS = ("auto", "32", "bf16", "fp16")
SCHEDULES = ("constant", "cosine")
LR_SCALING = ("linear", "sqrt", "none")
COMPRESSIONS = ("none", "fp16")


def _require(ok: bool, key: str, rule: str, value) -> None:
    if not ok:
        raise UserError(f"{key}={value} is out of range: it must be {rule}")


def _one_of(value, allowed: tuple, key: str) -> None:
    if value not in allowed:
        names = [str(a) for a in allowed]
        hint = closest_choice(key, str(value), names)
        raise UserError(f"{key}={value} is unknown; {hint}use one of: {', '.join(names)}")


def rare(shares: list[float]) -> bool:
    """A class under RARE_CLASS_RATIO / classes of the training rows."""
    return min(shares) < RARE_CLASS_RATIO / len(shares)


def _family_module(name: str) -> bool:
    """model.family names a module of one's own (with a FAMILY, runner.model.registry), not a
    built-in family: one that Python finds."""
    import importlib.util

    if name in ("auto", *MODEL_FAMILIES) or not name.replace(".", "").replace("_", "").isalnum():
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _resources(given, key: str) -> dict[str, float]:
    """A Ray resource mapping ({CPU: 1, GPU: 1, custom: 2}); null means {CPU: 1}."""
    given = given or {"CPU": 1.0}
    if not isinstance(given, dict) or not all(isinstance(v, int | float) for v in given.values()):
        raise UserError(
            f"{key}={given} must map resource names to amounts, e.g. {{CPU: 1, GPU: 1}}"
        )
    resources = {str(k): float(v) for k, v in given.items()}
    for resource, amount in resources.items():
        _require(amount >= 0, f"{key}.{resource}", "0 or more", amount)
    return resources


@dataclass
class FeatureConfig:
    name: str = MISSING
    type: str = MISSING
    # Options that change the processed data (missing values, normalization,
    # vocabulary, tokenizer). Only these enter the cache key; processing/features/ checks them.
    preprocessing: dict[str, Any] = field(default_factory=dict)
    # Model-side options (embedding size of a category or text feature).
    embedding_size: int | None = None


@dataclass
class SplitConfig:
    method: str = "random"  # random | column
    ratios: list[float] = field(default_factory=lambda: [0.7, 0.15, 0.15])
    seed: int = 42
    column: str | None = None  # with method=column: values train/validation/test or 0/1/2
    # Set by k_fold=N for each of its runs (not typed by hand): the training and validation
    # rows cut into `folds` parts by the same hash; part `fold` validates, the rest train.
    folds: int = 0
    fold: int = 0


@dataclass
class DatasetConfig:
    # Local path or fsspec URL; null means the built-in synthetic dataset.
    path: str | None = None
    # csv | tsv | json | feather | orc | excel | parquet; from the file's name when null
    format: str | None = None
    # The column(s) to predict. With model.input_features null (model=auto), every other
    # column becomes an input of an inferred type (runner/processing/type_inference.py).
    target: Any = None
    exclude: list[str] = field(default_factory=list)  # columns inference leaves out
    # Leading rows of the training split that inference looks at.
    inference_rows: int = 10000
    # CSV field delimiter; null: sniffed from the first lines ("\t" for .tsv files).
    delimiter: str | None = None
    # A CSV's decimal mark, '.' or ','; null: sniffed from the first lines (',' only where
    # numbers are written as 3,5 and the delimiter is not a comma).
    decimal: str | None = None
    synthetic_rows: int = 10000
    synthetic_seed: int = 0
    # Passed to fsspec: key, secret, client_kwargs: {endpoint_url: ...}, ... (never logged).
    # Any, not a typed dict, so that `dataset.storage_options={...}` sets it whole.
    storage_options: Any = None
    split: SplitConfig = field(default_factory=SplitConfig)

    def __post_init__(self):
        _require(
            self.synthetic_rows >= 1, "dataset.synthetic_rows", "at least 1", self.synthetic_rows
        )
        _require(
            self.inference_rows >= 20, "dataset.inference_rows", "at least 20", self.inference_rows
        )
        if isinstance(self.target, str):
            self.target = [self.target]
        elif self.target is not None:
            self.target = [str(t) for t in self.target]
        self.exclude = [str(c) for c in self.exclude]
        if self.delimiter in ("\\t", "tab"):  # what a shell hands over for a tab
            self.delimiter = "\t"
        if self.decimal not in (None, ".", ","):
            raise UserError(
                f"dataset.decimal={self.decimal!r} is not a decimal mark; use '.' or ',' "
                "(or null to sniff it)"
            )
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise UserError(
                f"dataset.delimiter={self.delimiter!r} must be one character, e.g. ';' or '\\t'"
            )

    @property
    def targets(self) -> list[str]:
        return list(self.target or [])


# model.ensemble_size=null's members on a table small enough (docs/accuracy.md: 8 members gained
# on 10 of 11 suite tables and cost up to 4.2x the wall time; 4 keep that within 3x).
ENSEMBLE_AUTO = 4


@dataclass
class GBMConfig:
    """model.family=gbm (and the ensemble's trees): LightGBM on the preprocessing cache."""

    # Boosting rounds at most; early stopping on the validation split picks how many count.
    num_boost_round: int = 2000
    early_stopping_rounds: int = 50
    learning_rate: float = 0.05
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    feature_fraction: float = 0.9
    bagging_fraction: float = 1.0
    lambda_l2: float = 0.0
    # Threads LightGBM trains and predicts with; null: the cores the process may use.
    num_threads: int | None = None
    # On a backend with Ray and a distributed trainer, the trees train data-parallel on Ray
    # Train's workers from this many training rows; below, in the run's process, where a
    # worker group's start and LightGBM's sockets cost more than they save (200k rows on
    # 2 cores: 21 s of boosting on 2 workers, 12 s in one process, before the group's start).
    # 0: always on Ray Train.
    ray_from_rows: int = 1_000_000

    def __post_init__(self):
        _require(
            self.num_boost_round >= 1,
            "model.gbm.num_boost_round",
            "at least 1",
            self.num_boost_round,
        )
        _require(
            self.early_stopping_rounds >= 0,
            "model.gbm.early_stopping_rounds",
            "0 or more (0: off)",
            self.early_stopping_rounds,
        )
        _require(self.learning_rate > 0, "model.gbm.learning_rate", "above 0", self.learning_rate)
        _require(self.num_leaves >= 2, "model.gbm.num_leaves", "at least 2", self.num_leaves)
        _require(
            self.ray_from_rows >= 0, "model.gbm.ray_from_rows", "0 or more", self.ray_from_rows
        )
        for name in ("feature_fraction", "bagging_fraction"):
            value = getattr(self, name)
            _require(0 < value <= 1, f"model.gbm.{name}", "in (0, 1]", value)


MODEL_FAMILIES = ("network", "gbm", "ensemble")
CLASS_WEIGHTS = ("none", "balanced", "auto")  # or {label: weight}
# A class is rare below this share of the training rows divided by the classes (a binary
# output's positive class: below 20%): model.class_weights=auto balances the classes, and
# model.decision_threshold=auto picks the threshold on validation.
RARE_CLASS_RATIO = 0.4
# The output types whose model side says trees can fit them (ModelSide.trees): the config sits
# below the features' layer, so it keeps the names; tests/test_families.py checks they agree.
TREE_OUTPUT_TYPES = ("binary", "category", "number")


@dataclass
class ModelConfig:
    # null (model=auto): inferred from the table, with dataset.target as the output.
    input_features: list[FeatureConfig] | None = None
    output_features: list[FeatureConfig] | None = None
    # network (the neural network below) | gbm (gradient-boosted trees: model.gbm) |
    # ensemble (both on the same splits, weighted on the validation split) | auto (the
    # ensemble where trees fit the output, at every size, else the network: pick_family)
    family: str = "auto"
    gbm: GBMConfig = field(default_factory=GBMConfig)
    combiner: str = "concat"  # concat (MLP) | residual (residual MLP) | transformer
    hidden_size: int = 256  # picked by the defaults sweep (docs/accuracy.md)
    num_layers: int = 2
    dropout: float = 0.0
    embedding_size: int = 16
    # Category inputs' embedding width; null: model.embedding_size (texts and sets keep that).
    category_embedding_size: int | None = None
    token_size: int = 32  # transformer: the width of every feature's token
    num_heads: int = 4  # transformer: attention heads (token_size must divide by it)
    # auto (piecewise, except with the transformer, which makes its own token of each number) |
    # none (values as they are) | piecewise (PLE: quantile bins of the training split) |
    # periodic (PLR embeddings)
    number_encoder: str = "auto"
    # piecewise: each column's bins through its own linear layer and a ReLU to this many
    # features (PLE-Q-LR, Gorishniy et al., 2022); 0: the bins go to the MLP as they are.
    bin_features: int = 0
    # Share of a text's tokens that training replaces by the unknown token (vocabulary texts).
    token_dropout: float = 0.5
    # Vocabulary texts: a token seen c times in training is also dropped with probability
    # alpha / (alpha + c) (alpha = this; 0: off), so rare words lean less on their few rows.
    rare_token_dropout: float = 20.0
    # Members of a parameter-efficient ensemble (TabM-mini: one MLP shared by k members, each
    # with its own sign adapter on the MLP's input and its own head; predictions averaged).
    # null (auto): ENSEMBLE_AUTO members when the training split has at most
    # ensemble_max_rows rows, else 1 (off): the members multiply the MLP's work per row, a few
    # seconds on a small table, the run's whole cost at a million rows (docs/accuracy.md).
    # In the ensemble family, auto is 1: the trees bring what the members would.
    ensemble_size: int | None = None
    # The largest training split whose network auto gives members (ensemble_size): they
    # multiply the MLP's work per row.
    ensemble_max_rows: int = 50_000
    # The ensemble trains its network and its trees at once (each on a share of the cores,
    # runner/training/ensemble_fit.py) from this many training rows; below, one after the other:
    # there the trees take a second or two and the network's lost core costs more than the
    # overlap saves (docs/accuracy.md). 0: always; null: never.
    ensemble_side_by_side_rows: int | None = 50_000
    # A binary or category output's class weights in the loss (the network's and the trees'):
    # `none`; `balanced` (each class weighs rows / (classes x its rows), from the training
    # split); `auto` (balanced where a class is rare: under RARE_CLASS_RATIO / classes of the
    # training rows, else none); or {label: weight} (a label left out weighs 1).
    class_weights: Any = "none"
    # A binary output's decision: `auto` (where the positive class is rare, the probability
    # threshold of the best F1 on the validation split, else 0.5) or a probability in (0, 1).
    # predict, serve, the test metrics and export.json apply it (runner/scoring/decisions.py).
    decision_threshold: Any = "auto"

    def __post_init__(self):
        if not _family_module(self.family):
            _one_of(self.family, ("auto", *MODEL_FAMILIES), "model.family")
        weights = self.class_weights
        if isinstance(weights, Mapping):
            for label, weight in weights.items():
                _require(
                    isinstance(weight, int | float) and weight > 0,
                    f"model.class_weights.{label}",
                    "a number above 0",
                    weight,
                )
        else:
            _one_of(weights, CLASS_WEIGHTS, "model.class_weights")
        threshold = self.decision_threshold
        if threshold != "auto":
            _require(
                isinstance(threshold, int | float) and 0 < threshold < 1,
                "model.decision_threshold",
                "auto or a probability in (0, 1)",
                threshold,
            )
        outputs = self.output_features
        if self.family in ("gbm", "ensemble") and outputs is not None:
            kinds = [f"{f.name} ({f.type})" for f in outputs]
            if not self.trees_fit(outputs):
                raise UserError(
                    f"model.family={self.family} trains trees for one binary, category or number "
                    f"output; this model has {', '.join(kinds)}: use model.family=network or "
                    "one such output"
                )
        _one_of(self.combiner, ("concat", "residual", "transformer"), "model.combiner")
        _one_of(
            self.number_encoder, ("auto", "none", "piecewise", "periodic"), "model.number_encoder"
        )
        if self.number_encoder not in ("auto", "none") and self.combiner == "transformer":
            raise UserError(
                f"model.number_encoder={self.number_encoder} feeds the concat or residual "
                "combiner; the transformer makes its own token of each number (drop one of the two)"
            )
        _require(self.num_heads >= 1, "model.num_heads", "at least 1", self.num_heads)
        _require(
            self.token_size >= 1 and self.token_size % self.num_heads == 0,
            "model.token_size",
            f"a positive multiple of model.num_heads={self.num_heads}",
            self.token_size,
        )
        _require(
            self.bin_features >= 0, "model.bin_features", "0 or more (0: off)", self.bin_features
        )
        _require(self.hidden_size >= 1, "model.hidden_size", "at least 1", self.hidden_size)
        _require(self.num_layers >= 0, "model.num_layers", "0 or more", self.num_layers)
        _require(0.0 <= self.dropout < 1.0, "model.dropout", "in [0, 1)", self.dropout)
        _require(
            0.0 <= self.token_dropout < 1.0, "model.token_dropout", "in [0, 1)", self.token_dropout
        )
        _require(
            self.rare_token_dropout >= 0,
            "model.rare_token_dropout",
            "0 or more (0: off)",
            self.rare_token_dropout,
        )
        _require(
            self.embedding_size >= 1, "model.embedding_size", "at least 1", self.embedding_size
        )
        _require(
            self.category_embedding_size is None or self.category_embedding_size >= 1,
            "model.category_embedding_size",
            "at least 1, or null (model.embedding_size)",
            self.category_embedding_size,
        )
        _require(
            self.ensemble_size is None or self.ensemble_size >= 1,
            "model.ensemble_size",
            "at least 1, or null (auto)",
            self.ensemble_size,
        )
        _require(
            self.ensemble_side_by_side_rows is None or self.ensemble_side_by_side_rows >= 0,
            "model.ensemble_side_by_side_rows",
            "0 or more (0: always), or null (never)",
            self.ensemble_side_by_side_rows,
        )
        if (self.ensemble_size or 1) > 1 and self.combiner == "transformer":
            raise UserError(
                "model.ensemble_size>1 shares the concat or residual combiner's MLP among its "
                "members; set model.combiner=concat or model.ensemble_size=1"
            )

    @staticmethod
    def trees_fit(outputs) -> bool:
        """Trees (model.family gbm, ensemble) predict one binary, category or number output."""
        return len(outputs) == 1 and outputs[0].type in TREE_OUTPUT_TYPES

    def pick_family(self) -> tuple[str, str]:
        """model.family, or its auto pick for these outputs, and why (docs/accuracy.md): the
        ensemble at every size where trees fit, its members weighted on validation."""
        if self.family != "auto":
            return self.family, "model.family"
        outputs = self.output_features or []
        if not self.trees_fit(outputs):
            kinds = ", ".join(f"{f.name} ({f.type})" for f in outputs)
            return "network", f"trees predict one binary, category or number output, not {kinds}"
        return "ensemble", (
            "the network and the trees on the same splits, weighted on validation, so the "
            "model is at least the better of the two there (the weights below)"
        )

    def class_weights_of(self, labels: list, shares: list[float] | None) -> list[float] | None:
        """Each class's weight in the loss (labels' order), from the training split's class
        shares; None: every class weighs the same."""
        weights = self.class_weights
        if isinstance(weights, Mapping):
            known = {str(label): float(w) for label, w in weights.items()}
            return [known.get(str(label), 1.0) for label in labels]
        if weights == "none" or not shares:
            return None
        if weights == "auto" and not rare(shares):
            return None
        return [1.0 / (len(shares) * max(share, 1e-12)) for share in shares]

    def threshold_of(self, positive_share: float) -> float | str:
        """A binary output's decision threshold, or "validation" where the auto rule picks it
        there (the positive class is rare)."""
        if self.decision_threshold != "auto":
            return float(self.decision_threshold)
        return "validation" if positive_share < RARE_CLASS_RATIO / 2 else 0.5

    def network_members(self, train_rows: int | None) -> tuple[int, str, bool] | None:
        """The network's members, why, and whether the saved config should say the number
        (model.ensemble_size), where the family has a network; None where it has none.
        The ensemble family's network is one: the trees bring the diversity, and members
        would double its cost."""
        if self.ensemble_size is not None or self.family not in ("network", "ensemble"):
            return None
        if self.family == "ensemble":
            return 1, "in the ensemble family, the trees stand in for the network's members", True
        return (*self.ensemble_members(train_rows), False)

    def ensemble_members(self, train_rows: int | None) -> tuple[int, str]:
        """The ensemble's members and why: model.ensemble_size, or its auto pick for a training
        split of `train_rows` rows."""
        if self.ensemble_size is not None:
            return self.ensemble_size, "model.ensemble_size"
        if self.combiner == "transformer":
            return 1, "the transformer combiner has no shared MLP to ensemble"
        if train_rows is not None and train_rows <= self.ensemble_max_rows:
            return ENSEMBLE_AUTO, (
                f"{train_rows:,} training rows, at most model.ensemble_max_rows="
                f"{self.ensemble_max_rows:,}"
            )
        return 1, (
            f"{train_rows:,} training rows, more than model.ensemble_max_rows="
            f"{self.ensemble_max_rows:,}: the members' cost would grow with the rows"
            if train_rows is not None
            else "the training split's size is unknown"
        )

    @property
    def number_encoding(self) -> str:
        """The number encoder in use: `auto` made concrete."""
        if self.number_encoder == "auto":
            return "none" if self.combiner == "transformer" else "piecewise"
        return self.number_encoder

    def embedding_of(self, name: str, category: bool = False) -> int:
        """The embedding width of input `name`: its own embedding_size, else the model's."""
        for feature in self.input_features or ():
            if feature.name == name and feature.embedding_size:
                return int(feature.embedding_size)
        if category and self.category_embedding_size is not None:
            return self.category_embedding_size
        return self.embedding_size


# ---------------------------------------------------------------- backend


@dataclass
class LocalBackendConfig:
    _target_: str = "runner.backends.local.LocalBackend"


@dataclass
class RaySettings:
    # null: RAY_ADDRESS if set, else start a local Ray; "auto": the cluster `ray start`
    # made on this machine; "host:port" or "ray://host:10001": that cluster.
    address: str | None = None
    num_cpus: float | None = None  # for a local Ray this run starts
    num_gpus: float | None = None
    object_store_memory: int | None = None  # bytes
    connect_timeout_s: float = 5.0
    # Ray's dashboard, for a local Ray this run starts (an attached cluster has its own).
    dashboard: bool = False
    dashboard_host: str = "127.0.0.1"  # 0.0.0.0 to reach it from other machines
    dashboard_port: int = 8265
    # Ray workers' own output (Ray Data executions, Horovod chatter) on this console; off: it
    # stays in Ray's session logs, and each training worker's log in <trainer.logdir>/rank-N.log.
    worker_logs: bool = False

    def __post_init__(self):
        # Ray counts a node's CPUs and GPUs in whole units (a fraction fails inside ray.init).
        _require(
            self.num_cpus is None or (self.num_cpus >= 1 and float(self.num_cpus).is_integer()),
            "backend.num_cpus",
            "a whole number, at least 1 (Ray counts a node's CPUs in whole units)",
            self.num_cpus,
        )
        _require(
            self.num_gpus is None or (self.num_gpus >= 0 and float(self.num_gpus).is_integer()),
            "backend.num_gpus",
            "a whole number (Ray counts a node's GPUs in whole units)",
            self.num_gpus,
        )
        _require(
            self.connect_timeout_s > 0, "backend.connect_timeout_s", "> 0", self.connect_timeout_s
        )
        _require(
            1 <= self.dashboard_port <= 65535,
            "backend.dashboard_port",
            "in [1, 65535]",
            self.dashboard_port,
        )


@dataclass
class RayBackendConfig(RaySettings):
    _target_: str = "runner.backends.ray.RayBackend"


@dataclass
class HorovodBackendConfig:
    _target_: str = "runner.backends.horovod.HorovodBackend"


@dataclass
class AutoBackendConfig:
    _target_: str = "runner.backends.auto.AutoBackend"
    ray: RaySettings = field(default_factory=RaySettings)  # used when it picks Ray


# ---------------------------------------------------------------- processor


@dataclass
class PandasProcessorConfig:
    _target_: str = "runner.processing.pandas_processor.PandasProcessor"


@dataclass
class ModinProcessorConfig:
    _target_: str = "runner.processing.modin_processor.ModinProcessor"
    parallelism: int | None = None  # partitions; null lets the processor decide

    def __post_init__(self):
        if self.parallelism is not None:
            _require(
                self.parallelism >= 1,
                "processor.parallelism",
                "at least 1, or null",
                self.parallelism,
            )


@dataclass
class ArrowProcessorConfig(ModinProcessorConfig):
    _target_: str = "runner.processing.arrow_processor.ArrowProcessor"
    persist: bool = True  # keep partitions in the object store between passes; false streams them
    blocksize: str = "64MB"  # CSV bytes per partition when parallelism is null


@dataclass
class DaskProcessorConfig(ArrowProcessorConfig):
    _target_: str = "runner.processing.dask_processor.DaskProcessor"


@dataclass
class AutoProcessorConfig(ArrowProcessorConfig):
    _target_: str = "runner.assembly.AutoProcessor"  # arrow on Ray for large data, pandas otherwise
    # Below this much raw data, pandas beats spreading it over tasks (measured: bench/).
    distributed_min_bytes: int = 256 * 2**20


# ---------------------------------------------------------------- trainer


@dataclass
class EarlyStoppingConfig:
    # "loss" or "<output>/<metric>" on the validation split, e.g. "label/roc_auc".
    metric: str = "loss"
    patience: int = 5  # epochs without improvement; 0 disables early stopping

    def __post_init__(self):
        _require(self.patience >= 0, "trainer.early_stopping.patience", "0 or more", self.patience)


@dataclass
class TrainerConfig:
    """One contract for every trainer option: the same keys, distributed ones included. Each
    option (conf/trainer/) is a subclass below that names its class in `_target_`; this one is
    trainer=auto: one worker -> this process; more (or null with GPUs in the cluster) on Ray
    -> Horovod on Ray; under horovodrun -> Horovod (runner.assembly.AutoTrainer)."""

    # Which trainer it is, for the checks made before any trainer exists (the early Ray start,
    # the Tune sweeper's placement): a class attribute, not a key.
    kind: ClassVar[str] = "auto"
    _target_: str = "runner.assembly.AutoTrainer"
    epochs: int = 30
    batch_size: int = 256  # per worker
    learning_rate: float = 0.003
    optimizer: str = "adamw"  # adamw | adam | sgd
    weight_decay: float = 0.0
    # constant | cosine (decays the rate over trainer.epochs, epoch by epoch, to near 0)
    schedule: str = "constant"
    # Weights averaged (an exponential moving average, runner/training/averaging.py) over about
    # this many epochs of steps; validation, the best checkpoint and predictions use the average.
    # 0 turns it off.
    ema_epochs: float = 1.0
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    seed: int = II("seed")
    checkpoint_every: int = 1  # epochs between checkpoints/last.pt writes
    resume_from: str | None = None  # a run dir or a checkpoint file
    num_threads: int | None = (
        None  # torch threads per worker; null = cores / workers on the machine
    )
    progress_bar: bool = True
    # Training steps' autocast: 32 | bf16 | fp16 (fp16 with a gradient scaler on CUDA) | auto
    # (bf16 on a CPU that multiplies bf16 natively, else 32; runner/training/step.py). Validation,
    # test and predictions run in full precision, as the saved model answers.
    precision: str = "auto"
    # With N workers the global batch is N x batch_size: scale the rate linearly
    # (or by sqrt, or not), reached through a linear warm-up of warmup_epochs.
    learning_rate_scaling: str = "linear"
    warmup_epochs: int = 0
    # Distributed keys (ignored by one in-process worker):
    num_workers: int | None = None  # null: one per GPU when the cluster has GPUs, else 1
    use_gpu: bool | None = None  # null: true when the cluster (or this machine) has a GPU
    # Any Ray resource, custom ones too (e.g. {CPU: 1, highmem: 1}); null: {CPU: 1}. Any, not a
    # typed dict, so that `trainer.resources_per_worker={...}` replaces it whole.
    resources_per_worker: Any = None
    placement: str | None = None  # spread | pack; null: spread on CPU, pack on GPU
    logdir: str | None = None  # worker logs (rank-N.log); null = <run dir>/workers
    max_retries: int = 3  # restarts after a lost worker, resuming from the last checkpoint
    compression: str = "none"  # none | fp16 gradient compression
    # Elastic Horovod: train on as many workers as are alive, between these bounds.
    min_workers: int | None = None
    max_workers: int | None = None
    # Network interfaces Horovod's traffic between hosts uses (e.g. [eth0]); null: Horovod probes
    # the hosts for common ones (loopback when every worker is on one host).
    nics: list[str] | None = None
    # Horovod Timeline (Chrome trace JSON of every collective) written here by rank 0.
    timeline: str | None = None

    def __post_init__(self):
        t = "trainer"
        _require(self.epochs >= 1, f"{t}.epochs", "at least 1", self.epochs)
        _require(self.batch_size >= 1, f"{t}.batch_size", "at least 1", self.batch_size)
        _require(self.learning_rate > 0, f"{t}.learning_rate", "> 0", self.learning_rate)
        _one_of(self.optimizer, OPTIMIZERS, f"{t}.optimizer")
        _require(self.weight_decay >= 0, f"{t}.weight_decay", "0 or more", self.weight_decay)
        _one_of(self.schedule, SCHEDULES, f"{t}.schedule")
        _require(self.ema_epochs >= 0, f"{t}.ema_epochs", "0 or more (0: off)", self.ema_epochs)
        _require(
            self.checkpoint_every >= 1, f"{t}.checkpoint_every", "at least 1", self.checkpoint_every
        )
        if self.num_threads is not None:
            _require(
                self.num_threads >= 1, f"{t}.num_threads", "at least 1, or null", self.num_threads
            )
        _one_of(str(self.precision), PRECISIONS, f"{t}.precision")
        _one_of(self.learning_rate_scaling, LR_SCALING, f"{t}.learning_rate_scaling")
        _require(self.warmup_epochs >= 0, f"{t}.warmup_epochs", "0 or more", self.warmup_epochs)
        for key in ("num_workers", "min_workers", "max_workers"):
            value = getattr(self, key)
            if value is not None:
                _require(value >= 1, f"{t}.{key}", "at least 1, or null", value)
        if self.min_workers and self.max_workers:
            _require(
                self.max_workers >= self.min_workers,
                f"{t}.max_workers",
                f"at least trainer.min_workers={self.min_workers}",
                self.max_workers,
            )
        self.resources_per_worker = _resources(
            self.resources_per_worker, f"{t}.resources_per_worker"
        )
        if self.placement is not None:
            _one_of(self.placement, PLACEMENTS, f"{t}.placement")
        _require(self.max_retries >= 0, f"{t}.max_retries", "0 or more", self.max_retries)
        _one_of(self.compression, COMPRESSIONS, f"{t}.compression")

    @property
    def elastic(self) -> bool:
        return bool(self.min_workers)

    def many_workers(self) -> str | None:
        """Why this run needs several workers (hence Ray), if it does."""
        if self.num_workers and self.num_workers > 1:
            return f"trainer.num_workers={self.num_workers}"
        if self.elastic:
            return f"trainer.min_workers={self.min_workers}"
        return None

    def wants_ray(self) -> str | None:
        """Why the trainer will need Ray, if it will (under horovodrun it never starts it)."""
        if self.kind in ("horovod", "ddp"):
            return f"trainer={self.kind}"
        return self.many_workers() if self.kind == "auto" else None

    @property
    def most_workers(self) -> int:
        """The most workers the run may train on at once (elastic runs: max_workers)."""
        return self.max_workers or self.num_workers or 1

    def cpus_wanted(self) -> float:
        """CPUs for the workers, and one besides them for what feeds them (Ray Data's tasks,
        the scoring pool)."""
        return self.most_workers * self.resources_per_worker.get("CPU", 0.0) + 1

    @property
    def cpus_per_worker(self) -> float:
        """A worker holds one CPU unless resources_per_worker says otherwise."""
        return float(self.resources_per_worker.get("CPU", 1.0))


@dataclass
class LocalTrainerConfig(TrainerConfig):
    """trainer=local: the loop in this process."""

    kind: ClassVar[str] = "local"
    _target_: str = "runner.training.trainers.LocalTrainer"


@dataclass
class HorovodTrainerConfig(TrainerConfig):
    """trainer=horovod: on Ray (RayExecutor), or under horovodrun with backend=horovod."""

    kind: ClassVar[str] = "horovod"
    _target_: str = "runner.training.horovod_trainer.HorovodTrainer"


@dataclass
class DDPTrainerConfig(TrainerConfig):
    """trainer=ddp: torch DDP through Ray Train's TorchTrainer (gloo on CPU, NCCL on GPU)."""

    kind: ClassVar[str] = "ddp"
    _target_: str = "runner.training.ddp_trainer.DDPTrainer"


def component_settings(keys: dict, schema: type[T]) -> T:
    """A component's keys, as hydra's instantiate passes them, as its typed settings (nested
    ones arrive as dicts or dataclasses; types are checked again)."""
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.structured(schema), keys)
    return cast(T, OmegaConf.to_object(merged))


def trainer_settings(keys: dict, schema: type[TrainerConfig] = TrainerConfig) -> TrainerConfig:
    return component_settings(keys, schema)


# ---------------------------------------------------------------- loader


@dataclass
class LocalLoaderConfig:
    _target_: str = "runner.loading.local.LocalLoader"
    batch_size: int = II("trainer.batch_size")
    shuffle: bool = True
    drop_last: bool = False
    eval_batch_size: int = 4096

    def __post_init__(self):
        _require(self.batch_size >= 1, "loader.batch_size", "at least 1", self.batch_size)
        _require(
            self.eval_batch_size >= 1, "loader.eval_batch_size", "at least 1", self.eval_batch_size
        )


@dataclass
class RayLoaderConfig(LocalLoaderConfig):
    _target_: str = "runner.loading.ray_data.RayDataLoader"
    fully_executed: bool = True  # hold each worker's share whole (false: stream it)
    window_size_bytes: int | None = None  # stream and shuffle in windows of about this size
    prefetch_batches: int = 2

    def __post_init__(self):
        super().__post_init__()
        if self.window_size_bytes is not None:
            _require(
                self.window_size_bytes >= 1,
                "loader.window_size_bytes",
                "at least 1, or null",
                self.window_size_bytes,
            )
        _require(
            self.prefetch_batches >= 0,
            "loader.prefetch_batches",
            "0 or more",
            self.prefetch_batches,
        )


@dataclass
class AutoLoaderConfig(RayLoaderConfig):
    _target_: str = (
        "runner.assembly.AutoLoader"  # Ray Data when distributed, the local reader otherwise
    )


# ---------------------------------------------------------------- run


@dataclass
class SweepConfig:
    # What run.py returns to Hydra and the sweep report ranks by: <split>/<metric>,
    # e.g. val/roc_auc, val/loss, test/label/accuracy.
    objective: str = "val/loss"
    direction: str = "auto"  # maximize | minimize | auto (from the metric)
    # hydra/launcher=ray: trials at once; null = as many as the cluster's CPUs can place.
    max_concurrent: int | None = None


@dataclass
class ServeConfig:
    """command=serve: the model behind HTTP on Ray Serve."""

    host: str = "127.0.0.1"  # 0.0.0.0 to answer other machines
    port: int = 8000
    num_replicas: int = 1
    resources_per_replica: Any = None  # null: {CPU: 1}; GPU and custom resources too
    max_batch_size: int = 64  # requests that Ray Serve scores together
    # How long a batch waits to fill; 0: requests that queued while the last batch ran go together.
    batch_wait_timeout_s: float = 0.0
    max_body_bytes: int = 10 * 2**20  # a larger request body is answered 413
    # haproxy: HAProxy (the binary that ray[serve] installs) sends each request straight to a
    # replica's own HTTP server; about half the single-row latency of proxy, Ray Serve's Python
    # HTTP proxy, one actor hop more (docs/prediction-and-serving.md). Applies when
    # command=serve starts Ray; a cluster of `ray start` takes RAY_SERVE_ENABLE_HA_PROXY=1 there.
    ingress: str = "haproxy"

    def __post_init__(self):
        _one_of(self.ingress, ("proxy", "haproxy"), "serve.ingress")
        _require(1 <= self.port <= 65535, "serve.port", "in [1, 65535]", self.port)
        _require(self.num_replicas >= 1, "serve.num_replicas", "at least 1", self.num_replicas)
        _require(
            self.max_batch_size >= 1, "serve.max_batch_size", "at least 1", self.max_batch_size
        )
        _require(
            self.batch_wait_timeout_s >= 0,
            "serve.batch_wait_timeout_s",
            "0 or more",
            self.batch_wait_timeout_s,
        )
        _require(
            self.max_body_bytes >= 1, "serve.max_body_bytes", "at least 1", self.max_body_bytes
        )
        self.resources_per_replica = _resources(
            self.resources_per_replica, "serve.resources_per_replica"
        )


@dataclass
class InitConfig:
    """command=init: the inferred model config, printed and, where `path` says, written."""

    # e.g. conf/model/houses.yaml, then: python run.py model=houses (--config-dir conf for a
    # directory outside this checkout)
    path: str | None = None


@dataclass
class PredictConfig:
    """command=predict / evaluate and the test split of an experiment (batch scoring)."""

    # Raw columns copied into the predictions beside `row` (an ID, a date), e.g. [id, date].
    keep_columns: list[str] = field(default_factory=list)
    # Rows per batch an actor scores on Ray (one Parquet part each); the actors themselves
    # come from trainer.num_workers / resources_per_worker / use_gpu.
    batch_size: int = 65536
    # On Ray, a cache split (an experiment's test split) of fewer rows is scored in the
    # driver: the pool's start (a fresh process importing torch) costs more than it saves.
    pool_min_rows: int = 1_000_000

    def __post_init__(self):
        _require(self.batch_size >= 1, "predict.batch_size", "at least 1", self.batch_size)
        _require(self.pool_min_rows >= 0, "predict.pool_min_rows", "0 or more", self.pool_min_rows)
        self.keep_columns = [str(c) for c in self.keep_columns]


@dataclass
class ExplainConfig:
    """command=explain: per-row attributions (runner/scoring/explain.py)."""

    # Integrated gradients' points on the path from the baseline (the network; trees and
    # their SHAP values are exact): the attributions' sum meets the output within about
    # 0.01 logits at 64 on the tests' networks; more is slower, in proportion.
    steps: int = 64

    def __post_init__(self):
        _require(self.steps >= 1, "explain.steps", "at least 1", self.steps)


@dataclass
class ExportConfig:
    """command=export: the model as an artifact that takes the encoded tensors."""

    format: str = "auto"
    path: str | None = None  # null: <run dir>/export

    def __post_init__(self):
        _one_of(self.format, EXPORT_FORMATS, "export.format")


@dataclass
class ReportConfig:
    """What experiment and evaluate draw: evaluation plots per output (<run>/plots/), the
    test split's permutation feature importance, and <run>/report.html."""

    plots: bool = True
    importance_rows: int = 10000  # test rows shuffled per input; 0: no importance
    importance_repeats: int = 3

    def __post_init__(self):
        _require(
            self.importance_rows >= 0, "report.importance_rows", "0 or more", self.importance_rows
        )
        _require(
            self.importance_repeats >= 1,
            "report.importance_repeats",
            "at least 1",
            self.importance_repeats,
        )


# What MLflow's tracking client can open ("": a plain path, or no URI: the default).
MLFLOW_SCHEMES = (
    "",
    "http",
    "https",
    "sqlite",
    "postgresql",
    "mysql",
    "mssql",
    "file",
    "databricks",
)


@dataclass
class TensorBoardConfig:
    """Each epoch's metrics as TensorBoard events (<run>/tensorboard); a sweep's trials as
    hparams (<sweep>/tensorboard)."""

    _target_: str = "runner.tracking.tensorboard.TensorBoardTracker"


@dataclass
class MlflowConfig:
    """logger=mlflow: each run (and each sweep, with a child run per trial) in MLflow."""

    _target_: str = "runner.tracking.mlflow.MlflowTracker"
    # null: MLFLOW_TRACKING_URI when set, else a SQLite store in Hydra's output root
    # (outputs/mlflow.db; `mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db` shows it).
    # A server (http://host:5000) when training workers run on other machines.
    tracking_uri: str | None = None
    experiment_name: str = "tabular-runner"
    run_name: str | None = None  # null: the run dir's name (a sweep's trial: its number)
    tags: dict[str, str] = field(default_factory=dict)
    log_model: bool = True  # the model as an mlflow.pyfunc model, with the run's artifacts
    # A run to log this one under, as its child. A sweep's trials need none: they find the
    # parent run their sweep's driver opened by the sweep dir.
    parent_run_id: str | None = None

    def __post_init__(self):
        _require(bool(self.experiment_name), "logger.mlflow.experiment_name", "not empty", "")
        uri = self.tracking_uri or ""
        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        if scheme.split("+", 1)[0] not in MLFLOW_SCHEMES:
            raise UserError(
                f"logger.mlflow.tracking_uri={self.tracking_uri} is not a store MLflow knows; use "
                "http(s)://host:port (a server), sqlite:///path.db, postgresql://, mysql://, "
                "mssql://, file:///dir or databricks (or null: outputs/mlflow.db)"
            )
        self.tags = {str(k): str(v) for k, v in self.tags.items()}


TUNE_SEARCHES = ("random", "grid", "optuna")
TUNE_SCHEDULERS = ("asha", "none")


# Each tracker's schema by its node's name in conf/logger/ (logger_<name>_schema), where
# its `_target_` lives.
LOGGER_SCHEMAS: dict[str, Any] = {"tensorboard": TensorBoardConfig, "mlflow": MlflowConfig}


@dataclass
class TuneSweeperConfig:
    """hydra/sweeper=tune (conf/hydra/sweeper/tune.yaml; the sweep in runner/sweeps/tune/).
    Checked when the sweep starts, so a bad value is one error line, not a Hydra trace."""

    _target_: str = "hydra_plugins.tabular_runner_launchers.sweepers.TuneSweeper"
    num_samples: int = 8  # trials (a grid: repeats of it)
    search: str = "random"  # random | grid | optuna (Optuna's TPE through Ray Tune)
    scheduler: str = "asha"  # asha | none
    grace_period: int = 1  # epochs every trial runs before ASHA may stop it
    reduction_factor: float = 2.0  # ASHA keeps the best 1/reduction_factor at each rung
    max_concurrent: int | None = None  # trials at once; null: as many as the cluster places
    resume: bool = False  # continue the experiment kept in <sweep dir>/.tune
    seed: int | None = None  # of the random search
    num_cpus: float | None = None  # a local Ray the sweep starts (null: every core)
    params: dict[str, Any] = field(default_factory=dict)  # key -> sweep syntax, like optuna's

    def __post_init__(self):
        _one_of(self.search, TUNE_SEARCHES, "hydra.sweeper.search")
        _one_of(self.scheduler, TUNE_SCHEDULERS, "hydra.sweeper.scheduler")
        _require(self.num_samples >= 1, "hydra.sweeper.num_samples", "at least 1", self.num_samples)
        _require(
            self.grace_period >= 1, "hydra.sweeper.grace_period", "at least 1", self.grace_period
        )
        _require(
            self.reduction_factor > 1,
            "hydra.sweeper.reduction_factor",
            "more than 1",
            self.reduction_factor,
        )
        _require(
            self.max_concurrent is None or self.max_concurrent >= 1,
            "hydra.sweeper.max_concurrent",
            "at least 1, or null",
            self.max_concurrent,
        )
        _require(
            self.num_cpus is None or (self.num_cpus >= 1 and float(self.num_cpus).is_integer()),
            "hydra.sweeper.num_cpus",
            "a whole number, at least 1, or null",
            self.num_cpus,
        )
        self.params = dict(self.params or {})


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: Any = MISSING
    processor: Any = MISSING
    trainer: Any = MISSING
    loader: Any = MISSING
    command: str = "experiment"  # experiment | preprocess | train | evaluate | predict
    # k_fold=N (command=experiment): N runs, each validating on another Nth of the training
    # and validation rows (the test split held out), and the metrics' mean and standard error.
    k_fold: int | None = None
    seed: int = 42
    # Where processed splits live, keyed by a checksum of data + preprocessing config.
    cache_dir: str = "${oc.env:TABULAR_RUNNER_CACHE,'~/.cache/tabular-runner'}"
    # Storage options for an object-storage cache_dir: a mapping (key, secret,
    # endpoint_url, ...) or the path of a JSON file holding one. Never logged.
    cache_credentials: Any = None
    sweep: SweepConfig = field(default_factory=SweepConfig)
    # A trained model's directory (<run>/model) for command=predict|evaluate|serve|export.
    model_dir: str | None = None
    predict: PredictConfig = field(default_factory=PredictConfig)
    explain: ExplainConfig = field(default_factory=ExplainConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    init: InitConfig = field(default_factory=InitConfig)
    # The run's trackers by name, each a node with its `_target_` (conf/logger/; typed by its
    # schema where it has one): logger=tensorboard (the default) sets `tensorboard`,
    # logger=mlflow both (runner/tracking/base.py).
    logger: dict[str, Any] = field(default_factory=dict)
    report: ReportConfig = field(default_factory=ReportConfig)

    def __post_init__(self):
        _one_of(self.command, tuple(COMMANDS), "command")
        if self.k_fold is not None:
            _require(self.k_fold >= 2, "k_fold", "at least 2", self.k_fold)
            if self.command != "experiment":
                raise UserError(
                    f"k_fold={self.k_fold} cross-validates command=experiment, not "
                    f"command={self.command}; drop k_fold or use command=experiment"
                )
            if self.dataset.split.method != "random":
                raise UserError(
                    f"k_fold={self.k_fold} cuts random splits into folds; "
                    f"dataset.split.method={self.dataset.split.method} fixes each row's split: "
                    "use dataset.split.method=random"
                )


def _unknown_keys(node, path: str):
    """(dotted key, known keys) for every key of a schema-typed node that its schema lacks
    (Hydra's `+key=value` adds such keys without a complaint)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        known = (
            {f.name for f in dataclasses.fields(schema)}
            if dataclasses.is_dataclass(schema)
            else None
        )
        for key in node.keys():
            dotted = f"{path}{key!s}"
            child = node._get_node(key)
            assert child is not None  # the key came from keys()
            if known is not None and key not in known:
                yield dotted, sorted(known)
            elif not child._is_missing() and not child._is_interpolation():
                yield from _unknown_keys(child, f"{dotted}.")
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            yield from _unknown_keys(node._get_node(i), f"{path}{i}.")


def built(node, **options):
    """A component from its config node (`_target_`); a UserError its constructor raised
    comes out as itself, not inside Hydra's InstantiationException (whose text adds the
    target's name), and a `_target_` that cannot be imported (a tracker of one's own, say)
    as a UserError that names the key."""
    import re

    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from runner.errors import user_error_in

    try:
        return instantiate(node, **options)
    except InstantiationException as error:
        found = user_error_in(error)
        if found is not None:
            raise found from None
        if isinstance(error.__cause__, ImportError):
            key = re.search(r"full_key: (\S+)", str(error))
            where = f"{key.group(1)}._target_" if key else "_target_"
            lines = str(error.__cause__).splitlines()  # Hydra's: "Error loading 'x':", the cause
            cause = lines[1] if len(lines) > 1 else lines[0] if lines else "ImportError"
            raise UserError(
                f"{where}={node.get('_target_')} cannot be imported ({cause}); check the "
                "name, and that its module is on PYTHONPATH"
            ) from None
        raise


def check_config(cfg: DictConfig) -> RunConfig:
    """The composed config as typed settings: an unknown key or a value out of range
    is a UserError naming it (and the closest known key)."""
    for key, known in _unknown_keys(cfg, ""):
        raise UserError(unknown_key_line(key, list(known)))
    from omegaconf import OmegaConf

    return cast(RunConfig, OmegaConf.to_object(cfg))  # a structured config: its dataclass


def register_configs() -> None:
    # Schemas live at the root (<group>_<option>_schema), not in the groups: Hydra lists a
    # group's every entry as its options, in --help and in its errors. Hydra is imported here:
    # a training worker unpickles these dataclasses and never needs it (0.1 s of its start).
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=RunConfig)
    cs.store(name="backend_local_schema", node=LocalBackendConfig)
    cs.store(name="backend_ray_schema", node=RayBackendConfig)
    cs.store(name="backend_auto_schema", node=AutoBackendConfig)
    cs.store(name="backend_horovod_schema", node=HorovodBackendConfig)
    cs.store(name="processor_pandas_schema", node=PandasProcessorConfig)
    cs.store(name="processor_dask_schema", node=DaskProcessorConfig)
    cs.store(name="processor_arrow_schema", node=ArrowProcessorConfig)
    cs.store(name="processor_modin_schema", node=ModinProcessorConfig)
    cs.store(name="processor_auto_schema", node=AutoProcessorConfig)
    cs.store(name="trainer_schema", node=TrainerConfig)
    cs.store(name="trainer_local_schema", node=LocalTrainerConfig)
    cs.store(name="trainer_horovod_schema", node=HorovodTrainerConfig)
    cs.store(name="trainer_ddp_schema", node=DDPTrainerConfig)
    cs.store(name="loader_local_schema", node=LocalLoaderConfig)
    cs.store(name="loader_ray_schema", node=RayLoaderConfig)
    cs.store(name="loader_auto_schema", node=AutoLoaderConfig)
    cs.store(name="dataset_schema", node=DatasetConfig)
    cs.store(name="model_schema", node=ModelConfig)
    for name, schema in LOGGER_SCHEMAS.items():
        cs.store(name=f"logger_{name}_schema", node=schema)
    cs.store(name="hydra_sweeper_tune_schema", node=TuneSweeperConfig)
    # --help: what the runner does, its first commands and its groups (conf/config.yaml picks it).
    cs.store(
        group="hydra/help", name="runner", node={"app_name": "run.py", "template": help_template()}
    )


def unknown_group_option(args: list[str], conf_dir: Path) -> str | None:
    """`processor=spark` (or `trainer=ddp,spark` in a sweep): the one line that names the
    override and the group's real options, said before Hydra's own message (the options, then
    its search path). None when every group option exists, or when this cannot tell: a config
    dir or search path of the user's adds options, or the override syntax is Hydra's to judge."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, ValueType

    if any(a.startswith(("--config-dir", "-cd", "hydra.searchpath")) for a in args):
        return None
    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if not a.startswith("-")]
        )
    except Exception:  # noqa: BLE001 - Hydra reports a syntax error itself
        return None
    groups = {
        d.name: sorted(f.stem for f in d.glob("*.yaml"))
        for d in conf_dir.iterdir()
        if d.is_dir() and d.name != "hydra"
    }
    for override in overrides:
        options = groups.get(override.key_or_group)
        if options is None or override.is_delete():
            continue
        if override.value_type == ValueType.ELEMENT:
            values = [override.get_value_element_as_str()]
        elif override.value_type == ValueType.SIMPLE_CHOICE_SWEEP:
            sweep = override.value()
            assert isinstance(sweep, ChoiceSweep)  # what SIMPLE_CHOICE_SWEEP holds
            values = [str(v) for v in sweep.list]
        else:
            continue  # glob(), range(): Hydra expands them against the options itself
        for value in values:
            if value not in options:
                hint = closest_choice(override.key_or_group, value, options)
                return (
                    f"{override.key_or_group}={value} is not an option; {hint}the options of "
                    f"{override.key_or_group} are: {', '.join(options)}"
                )
    return None
