"""The commands of run.py: command=<name> runs command_<name> here (runner/command_table.py
lists them and what each needs).

run_command reads top to bottom: assemble the run (config checked, backend
decided), enter the backend, resolve the remaining `auto` choices, run the command.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from omegaconf import DictConfig, OmegaConf

from runner.backends.horovod import launched_rank
from runner.command_table import commands_where
from runner.errors import UserError
from runner.reports.figures import FigureQueue
from runner.training import time_limit

if TYPE_CHECKING:  # imported where used: a tracker's background process starts before torch loads
    from runner.assembly import Plan, Run
    from runner.config import ModelConfig
    from runner.model.layout import Layout
    from runner.processing.features.feature_set import FeatureSet
    from runner.processing.pipeline import Preprocessed

log = logging.getLogger(__name__)


RESULT_COMMANDS = commands_where("writes_results")


def run_command(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Runs cfg.command; returns its metrics (empty for preprocess)."""
    from runner.backends.early import abandon, start_ray_early
    from runner.config import check_config
    from runner.fast_start import tricks_off

    started = time_limit.command_start()
    tricks_off()  # a misspelt RUNNER_TRICKS_OFF fails here, before anything starts
    settings = check_config(cfg)
    if settings.k_fold:
        from runner.folds import cross_validate

        return cross_validate(cfg, settings, Path(run_dir), run_command, started)
    time_limit.begin(settings.time_limit, started)
    # A trainer that will need Ray has it start now, in a thread (runner/backends/early.py).
    early = start_ray_early(cfg, settings)
    try:
        return _run_command(cfg, run_dir, settings, early)
    except BaseException:
        # Stopped by the backend's exit once entered (stopping again does nothing); before
        # that, here, or a process that goes on (a multirun, runner.api) would keep that Ray.
        abandon(early)
        raise
    finally:
        time_limit.end()


def _run_command(cfg: DictConfig, run_dir: str | Path, settings, early) -> dict:
    # The background process starts before anything else (runner/background.py): its
    # imports overlap the run's own. It does nothing visible until the command asks.
    from runner.background import Background
    from runner.tracking.base import Trackers

    child = _background(cfg)
    trackers = Trackers([])
    if child is not None:  # the commands that write results, on the main rank
        trackers = Trackers.from_config(cfg.logger)
        trackers.prepare(Path(run_dir), child)
    # With a tracker in the child, the figures get a child of their own: queued behind a
    # tracker's calls (its run, every epoch, its model) they kept the summary waiting 0.2-0.3 s more.
    drawer = Background() if trackers.background else child
    figures = FigureQueue(drawer)
    children = [c for c in dict.fromkeys((drawer, child)) if c is not None]
    from runner.assembly import assemble

    try:
        plan = assemble(cfg, run_dir, settings, early)
        with plan.backend:
            _share_run_dir(plan)
            run = plan.resolve()
            command = COMMAND_FUNCTIONS[run.settings.command]
            if run.settings.command not in RESULT_COMMANDS:
                return command(run)
            with _tracked(run, trackers) as tracking:
                result = command(run, figures, tracking)
        for each in children:
            each.close()
        return result
    finally:
        for each in children:
            each.stop()  # a failed command drops what is still queued (a finished one waited)


def _background(cfg: DictConfig):
    """The process that draws the figures and runs the trackers' logging while the run goes on
    (runner/background.py): for the commands that write results, on the main rank."""
    from runner.background import Background, adopt_early

    early = adopt_early()  # run.py's, started before Hydra composed the config
    if cfg.get("command") not in RESULT_COMMANDS or launched_rank() not in (None, 0):
        if early is not None:
            early.stop()
        return None
    return early or Background()


def _share_run_dir(plan: Plan) -> None:
    """Under horovodrun every rank composed its own Hydra run dir: all use rank 0's."""
    if not plan.backend.launched_ranks:
        return
    shared = Path(plan.backend.share(str(plan.run_dir)))
    if shared.resolve() != plan.run_dir.resolve():
        own, plan.run_dir = plan.run_dir, shared
        for handler in list(logging.getLogger().handlers):  # Hydra's run.log in our own dir
            if str(getattr(handler, "baseFilename", "")).startswith(str(own.resolve())):
                logging.getLogger().removeHandler(handler)
                handler.close()
        shutil.rmtree(own, ignore_errors=True)
        log.info("rank %d shares rank 0's run dir %s", plan.backend.rank, shared)


def _features(run: Run) -> FeatureSet:
    from runner.processing.features.feature_set import FeatureSet
    from runner.processing.features.registry import feature_type

    model = cast(dict, OmegaConf.to_container(run.cfg.model, resolve=True))
    if run.source.decimal == ",":  # the file's decimal commas, for the numbers not told
        for feature in [*model["input_features"], *model["output_features"]]:
            kind = feature_type(feature["type"])
            if kind is not None and kind.numeric:
                options = feature.get("preprocessing") or {}
                feature["preprocessing"] = {"decimal": ",", **options}
    return FeatureSet(model["input_features"], model["output_features"])


def _preprocess(run: Run) -> Preprocessed:
    from runner.processing.pipeline import preprocess
    from runner.processing.split import split_settings

    split = split_settings(run.cfg.dataset.split)
    features = _features(run)
    preprocessed = run.backend.main_first(
        lambda: preprocess(
            run.processor,
            run.source,
            features,
            split,
            run.settings.cache_dir,
            run.cache_options,
            run.type_inference.watched() if run.type_inference is not None else None,
        )
    )
    if run.type_inference is not None and run.backend.is_main:
        # Once the data has preprocessed with them: bad input leaves no model.yaml behind.
        from runner import outputs

        outputs.write_text_atomic(run.run_dir / "model.yaml", run.type_inference.yaml())
    return preprocessed


def command_preprocess(run: Run) -> dict:
    pre = _preprocess(run)
    rows = ", ".join(f"{k} {v}" for k, v in pre.meta["rows"].items())
    print(
        f"processed splits: {pre.entry.url} ({rows} rows)"
        + (" [cache hit]" if pre.cache_hit else "")
    )
    return {}


@contextmanager
def _tracked(run: Run, trackers) -> Iterator:
    """The run's trackers (runner/tracking/base.py), told of the run by the main process only;
    they finish it "failed" when the command raises."""
    from runner.tracking.base import RunStart, SweepTrial, Trackers

    if not run.backend.is_main:
        trackers = Trackers([])
    from runner.training.reporting import stopped_by_scheduler

    config = cast(dict, OmegaConf.to_container(run.cfg, resolve=True))
    trackers.start(RunStart(run.run_dir, config, _run_tags(run), SweepTrial.current()))
    try:
        yield trackers
    except BaseException:
        trackers.finish("failed")
        raise
    trackers.finish("pruned" if stopped_by_scheduler() else "completed")


def _run_tags(run: Run) -> dict[str, str]:
    """What the run picked and where it ran: the components (`auto` resolved), the cluster."""
    tags = {
        "runner.command": run.settings.command,
        "runner.backend": run.backend.name,
        "runner.processor": run.processor.name,
        "runner.loader": run.loader.name,
        "runner.trainer": run.trainer.name,
        "runner.dataset": run.source.label,
    }
    if run.backend.offers_ray:
        import ray

        if ray.is_initialized():
            resources = ray.cluster_resources()
            tags["cluster.nodes"] = str(len([n for n in ray.nodes() if n.get("Alive")]))
            tags["cluster.cpus"] = f"{resources.get('CPU', 0):g}"
            tags["cluster.gpus"] = f"{resources.get('GPU', 0):g}"
    return tags


def _preprocess_and_train(run: Run, figures, trackers):
    pre = _preprocess(run)
    return pre, _train(run, pre, figures, trackers)


def _train(run: Run, pre: Preprocessed, figures, trackers):
    from runner import outputs
    from runner.model.layout import Layout
    from runner.training.fit_job import FitJob
    from runner.training.fitting import fit_family
    from runner.training.job import TrainingJob

    layout = Layout.from_meta(pre.meta, run.settings.model)
    model = _resolved_model(run, layout)

    def train_network(splits, meta: dict, settings: ModelConfig, run_dir: str):
        def make_job(world_size: int) -> TrainingJob:
            job = TrainingJob.create(
                splits, meta, settings, run.trainer.settings, run.loader, run_dir, world_size
            )
            if splits == pre.entry:  # the run's own network (not a bagged portfolio's folds)
                job.epoch_logs = trackers.epochs()
            return job

        return run.trainer.fit(make_job, run.backend)

    fit = FitJob(
        model,
        pre.entry,
        pre.meta,
        run.trainer,
        run.backend,
        run.loader,
        train_network=train_network,
        run_dir=str(run.run_dir),
    )
    result = fit_family(fit)
    if not run.backend.is_main:
        return result, layout  # under horovodrun, rank 0 writes the outputs
    assert result is not None and result.model is not None  # rank 0's, with its model
    meta, layout = _decided(result, pre, model, layout)
    outputs.save_model(run.run_dir / "model", result.model, meta, run.cfg)
    figures.draw(
        "runner.reports.evaluation:plot_learning_curves",
        result.history,
        outputs.main_metric(layout),
        run.run_dir / "learning_curves.png",
    )
    # Queued after the figure (the child takes calls in order): the summary waits for the
    # figures, not for the trackers; a tracker's copy of the model is made while the test split
    # is scored.
    trackers.log_model(run.run_dir / "model")
    return result, layout


def _decided(result, pre: Preprocessed, model: ModelConfig, layout: Layout):
    """(the meta the model is saved with, its layout): each binary output's decision threshold
    (runner/scoring/decisions.py), logged and in metrics.json (training.decisions); where one
    was picked on the validation split, the best validation metrics are rescored at it."""
    from runner.model.layout import Layout
    from runner.scoring.decisions import THRESHOLD_METRICS, decide
    from runner.scoring.decoding import Decoders, compute_metrics
    from runner.training.fitted import model_logits, read_split

    scored: dict = {}
    if result.validation_scores is not None:
        scored["logits"], scored["targets"] = result.validation_scores

    def validation() -> tuple[dict, dict]:
        if not scored:
            table = read_split(pre.entry, "validation", layout)
            scored["logits"] = model_logits(result.model, layout, table)
            scored["targets"] = {k: v.numpy() for k, v in table.targets.items()}
        return scored["logits"], scored["targets"]

    decisions = decide(layout, model, pre.meta, validation)
    if not decisions:
        return pre.meta, layout
    for name, decision in decisions.items():
        log.info(
            "%s: decides at probability %.4f (%s)", name, decision["threshold"], decision["why"]
        )
    meta = {**pre.meta, "decisions": decisions}
    decided = Layout.from_meta(meta, model)
    result.family = {**result.family, "decisions": decisions}
    if scored:  # the threshold-dependent validation metrics at the picked thresholds
        rescored = compute_metrics(decided, Decoders(meta), *validation())
        decided_keys = {f"{n}/{m}" for n in decisions for m in THRESHOLD_METRICS}
        changed = {k: v for k, v in rescored.items() if k in decided_keys}
        for entry in result.history:
            if entry["epoch"] == result.best_epoch and entry.get("validation"):
                entry["validation"] = {**entry["validation"], **changed}
    return meta, decided


def _resolved_model(run: Run, layout: Layout) -> ModelConfig:
    """The model settings with model.family and the ensemble's network members made concrete
    for this table (once the outputs and the training split's size are known), each auto pick
    logged with why; the saved config says them."""
    model = run.settings.model
    main = run.backend.is_main
    if model.family == "auto":
        family, why = model.pick_family()
        if main:
            log.info("model.family=auto picked %s: %s", family, why)
        model = replace(model, family=family)
        run.cfg.model.family = family
    picked = model.network_members(layout.train_rows)
    if picked is None:
        return model
    members, why, concrete = picked
    if concrete:
        model = replace(model, ensemble_size=members)
        run.cfg.model.ensemble_size = members
    if main:
        log.info("model.ensemble_size=auto picked %d: %s", members, why)
    return model


def _best_metrics(result) -> dict[str, dict]:
    best = next((h for h in result.history if h["epoch"] == result.best_epoch), result.history[-1])
    return {"train": best["train"], "validation": best["validation"]}


def _baseline_check(run: Run, result, layout, metrics: dict) -> dict:
    """The best validation score of each output against the mean/majority baseline's on the
    same rows; logged as a warning, with what to change, for each output that does not beat it."""
    from runner.scoring.decoding import baseline_check
    from runner.training.advice import Knobs, training_advice
    from runner.training.fitting import fit_of

    check = baseline_check(layout, metrics.get("validation", {}), result.validation_baseline)
    failing = [c for c in check.values() if not c["better"]]
    if failing:
        patience, knobs = run.settings.trainer.early_stopping.patience, Knobs()
        # the family made concrete by _resolved_model
        family_knobs = fit_of(run.cfg.model.family).knobs
        if family_knobs is not None:
            patience, knobs = family_knobs(run.settings.model)
        advice = training_advice(
            result.history, result.best_epoch, result.stopped_early, patience, knobs
        )
        for c in failing:
            c["advice"] = advice
    for line in _baseline_warnings(check):
        log.warning("%s", line)
    return check


def _baseline_warnings(check: dict) -> list[str]:
    """One line per output no better than the baseline (run.log and the summary)."""
    from runner.scoring.decoding import BASELINE_MARGIN

    return [
        f"{c['metric']} on validation ({c['value']:.4f}) is no better than the baseline's "
        f"({c['baseline']:.4f}: always the training mean or majority class; a model must lead "
        f"it by {BASELINE_MARGIN}); {c['advice']}"
        for c in check.values()
        if not c["better"]
    ]


def _steady_rate(history: list[dict]) -> float | None:
    """Training samples/s after the first epoch of this run (warm-up: allocations, Horovod's
    first negotiations, caches), the rate a long run settles at; None with one epoch."""
    later = [h for h in history[1:] if "step_seconds" in h]
    seconds = sum(h["step_seconds"] for h in later)
    return sum(h["samples"] for h in later) / seconds if later and seconds > 0 else None


def _training_report(result, pre: Preprocessed) -> dict:
    return {
        "best_epoch": result.best_epoch,
        "epochs_run": len(result.history),
        "stopped_early": result.stopped_early,
        "monitor": result.monitor,
        "resumed_at_epoch": result.resumed_at_epoch,
        "train_samples_per_second": result.samples_seen / max(result.step_seconds, 1e-9),
        "steady_train_samples_per_second": _steady_rate(result.history),
        "epoch_loop_seconds": result.train_seconds,
        "world_size": result.world_size,
        "precision": result.precision,
        "preprocessing_seconds": pre.seconds,
        "cache_hit": pre.cache_hit,
        "cache_entry": pre.entry.url,
        **result.family,  # the trees' rounds, the ensemble's weights
    }


def command_train(run: Run, figures, trackers) -> dict:
    pre, (result, layout) = _preprocess_and_train(run, figures, trackers)
    if not run.backend.is_main:
        return {}
    metrics = _best_metrics(result)
    check = _baseline_check(run, result, layout, metrics)
    report = {"training": _training_report(result, pre), "baseline_check": check}
    _finish(run, metrics, report, figures, trackers)
    return metrics


def command_experiment(run: Run, figures, trackers) -> dict:
    pre, (result, layout) = _preprocess_and_train(run, figures, trackers)
    # By split; the test split's may be None (no rows scored).
    metrics: dict[str, dict | None] = dict(_best_metrics(result)) if run.backend.is_main else {}
    check = _baseline_check(run, result, layout, metrics) if run.backend.is_main else {}
    from runner.processing.split import HOLDOUT

    predictor = None
    if pre.meta["rows"]["test"] or pre.meta["rows"].get(HOLDOUT):
        # The saved model, as predict loads it: the splits are scored as predict scores.
        run.backend.gather(None)  # under horovodrun: every rank waits for rank 0's model/
        predictor = _predictor(run, run.run_dir / "model")
    if pre.meta["rows"].get(HOLDOUT):
        metrics.update(_holdout_metrics(run, pre, predictor))
    if pre.meta["rows"]["test"]:
        from runner.scoring.batch import ScoringTask
        from runner.scoring.dispatch import score_split

        assert predictor is not None  # loaded above for the test rows
        task = ScoringTask(labelled=True, write_predictions=True, processed=True)
        test = score_split(
            predictor, task, run.backend, pre.split_path("test"), run.run_dir, _pool(run)
        )
        if not run.backend.is_main:
            return {}
        metrics["test"] = test.metrics
        metrics["baseline"] = _majority_baseline(predictor, pre.meta, test.stats)
        _evaluation_plots(run, figures, predictor, test.stats, "test")
        importance = _importance(run, figures, predictor, pre.split_path("test"))
    elif not run.backend.is_main:
        return {}
    else:
        log.warning("the test split is empty; no test metrics or predictions")
        importance = None
    report = {"training": _training_report(result, pre), "baseline_check": check}
    if importance:
        report["importance"] = importance
    _finish(run, metrics, report, figures, trackers)
    return metrics


def _holdout_metrics(run: Run, pre: Preprocessed, predictor) -> dict[str, dict | None]:
    """{holdout: its metrics}: a k_fold run's held-out part, scored by the saved model as the
    test split is (runner/folds.py); empty off rank 0."""
    from runner.processing.split import HOLDOUT
    from runner.scoring.batch import ScoringTask
    from runner.scoring.dispatch import score_split

    task = ScoringTask(labelled=True, write_predictions=False, processed=True)
    scored = score_split(
        predictor, task, run.backend, pre.split_path(HOLDOUT), run.run_dir, _pool(run)
    )
    if not run.backend.is_main or scored.metrics is None:
        return {}  # under horovodrun, rank 0 has the metrics
    return {HOLDOUT: scored.metrics}


def _majority_baseline(predictor, meta: dict, stats: list[dict]) -> dict[str, float]:
    """What always predicting the training split's most frequent class scores (accuracy),
    or its mean (mse and r2: from the scored rows' mean and spread, no second pass)."""
    from runner.scoring.decoding import merge_metrics

    merged = merge_metrics(predictor.layout, stats)
    baseline = {}
    for spec in predictor.layout.outputs:
        stats = meta["features"][spec.name]["stats"]
        found = spec.head.majority_baseline(spec, merged[spec.name], stats)
        baseline.update({f"{spec.name}/{metric}": value for metric, value in found.items()})
    return baseline


def _predictor(run: Run, model_dir=None):
    from runner.scoring.predictor import Predictor

    return Predictor.load(model_dir or run.settings.model_dir)


def _pool(run: Run):
    """Ray's scoring actors from the trainer's keys; None off Ray."""
    if not run.backend.offers_ray:
        return None
    from runner.runtime import require_ray
    from runner.scoring.ray_pool import PoolSettings

    ray = require_ray("batch scoring on Ray")  # started (or attached) here if not yet
    trainer = run.trainer.settings
    resources = dict(trainer.resources_per_worker)
    gpus = ray.cluster_resources().get("GPU", 0.0)
    use_gpu = trainer.use_gpu if trainer.use_gpu is not None else gpus > 0
    if use_gpu:
        resources.setdefault("GPU", 1.0)
    actors = trainer.num_workers or (int(gpus) if use_gpu and gpus else 1)
    predict = run.settings.predict
    return PoolSettings(actors, predict.batch_size, resources, predict.pool_min_rows)


def _score_raw(run: Run, task):
    from runner.scoring.dispatch import score_raw

    predictor, pool = _predictor(run), _pool(run)  # Ray is up from here on
    started = time.perf_counter()
    outcome = score_raw(predictor, task, run.backend, run.processor, run.source, run.run_dir, pool)
    if run.backend.is_main:
        log.info("scored %d rows in %.2fs", outcome.rows, time.perf_counter() - started)
    return predictor, outcome


def command_predict(run: Run) -> dict:
    """The saved model on raw data: partition by partition here, each rank its slice under
    horovodrun, an actor pool on Ray (runner/scoring/dispatch.py)."""
    from runner.scoring.batch import ScoringTask
    from runner.scoring.kept import kept_column_types

    keep = tuple(run.settings.predict.keep_columns)
    types = kept_column_types(run.source, keep)
    task = ScoringTask(
        labelled=False, write_predictions=True, keep_columns=keep, keep_types=tuple(types.items())
    )
    _, outcome = _score_raw(run, task)
    if run.backend.is_main:
        print(
            f"\n{outcome.rows} predictions for {run.source.label}\npredictions  {outcome.predictions}"
        )
    return {}


def command_evaluate(run: Run, figures, trackers) -> dict:
    from runner.scoring.batch import ScoringTask

    predictor, outcome = _score_raw(run, ScoringTask(labelled=True, write_predictions=False))
    if not run.backend.is_main:
        return {}
    if not outcome.rows:
        raise UserError(
            f"{run.source.label} has no rows with a known target; evaluate needs labelled rows"
        )
    metrics = {
        "evaluation": outcome.metrics,
        "baseline": _majority_baseline(predictor, predictor.saved.meta, outcome.stats),
    }
    _evaluation_plots(run, figures, predictor, outcome.stats, "evaluation")
    _finish(run, metrics, {"rows": outcome.rows, "dataset": run.source.label}, figures, trackers)
    return metrics


def command_explain(run: Run, figures, trackers) -> dict:
    """Per-row attributions of a saved model's output on raw data (runner/scoring/explain.py),
    scored where predict scores (here, horovodrun's ranks, Ray's actor pool); their summary
    in metrics.json and report.html beside the model's permutation importance."""
    import json

    from runner.reports.explanations import summarize
    from runner.scoring.batch import ScoringTask
    from runner.scoring.explain import MEMBERS, explain_method

    started = time.perf_counter()
    task = ScoringTask(
        labelled=False,
        write_predictions=True,
        explain=True,
        explain_steps=run.settings.explain.steps,
    )
    predictor, outcome = _score_raw(run, task)
    if not run.backend.is_main:
        return {}
    assert outcome.predictions is not None  # the task writes its rows
    seconds = time.perf_counter() - started
    summary = summarize(outcome.predictions)
    log.info("explained %d rows in %.2fs", summary["rows"], seconds)
    name = predictor.saved.settings.family
    method = explain_method(name)
    method = name if method == MEMBERS else method  # the ensemble: its members' methods
    assert run.settings.model_dir is not None  # the Predictor loaded from it
    trained = Path(run.settings.model_dir).parent / "metrics.json"  # the model's own run
    importance = json.loads(trained.read_text()).get("importance") if trained.exists() else None
    if run.settings.report.plots:
        figures.draw(
            "runner.reports.explanations:plot_attributions",
            summary,
            importance,
            run.run_dir / "plots" / "attributions.png",
        )
    metrics = {
        "explanation": {
            "rows": summary["rows"],
            "rows_per_second": summary["rows"] / max(seconds, 1e-9),
            **{f"mean_abs/{f['input']}": f["value"] for f in summary["mean_abs"]},
        }
    }
    extra = {
        "explained": {
            "output": predictor.layout.outputs[0].name,
            "method": method,
            "dataset": run.source.label,
            "extreme_rows": summary["extreme_rows"],
        },
        **({"importance": importance} if importance else {}),
    }
    _finish(run, metrics, extra, figures, trackers)
    return metrics


def command_serve(run: Run) -> dict:
    """The model behind HTTP on Ray Serve until SIGINT / SIGTERM (runner/serving)."""
    from runner.serving.server import serve_until_stopped

    serve_until_stopped(run.settings.serve, run.settings.model_dir)
    return {}


def command_export(run: Run) -> dict:
    """The model in its family's format, taking the encoded tensors, with the metadata beside it."""
    from runner.model.artifact import load_model_dir
    from runner.model.export import export_model

    saved = load_model_dir(run.settings.model_dir)
    target = Path(run.settings.export.path or run.run_dir / "export").expanduser()
    path = export_model(saved, target, run.settings.export.format)
    print(f"\nexported {saved.settings.family}  {path}")
    return {}


def _evaluation_plots(run: Run, figures, predictor, stats: list[dict], split: str) -> None:
    """<run>/plots/<split>_<output>.png from the statistics the split's metrics came from."""
    if not run.settings.report.plots or not stats:
        return
    from runner.scoring.decoding import merge_metrics

    merged = merge_metrics(predictor.layout, stats)
    figures.draw(
        "runner.reports.evaluation:plot_outputs",
        predictor.layout,
        merged,
        split,
        run.run_dir / "plots",
    )


def _importance(run: Run, figures, predictor, split) -> dict | None:
    """Permutation importance on a sample of the test split (metrics.json and a chart)."""
    settings = run.settings.report
    if not settings.importance_rows:
        return None
    from runner.reports.importance import permutation_importance

    started = time.perf_counter()
    importance = permutation_importance(
        predictor,
        split.read_table(),
        settings.importance_rows,
        settings.importance_repeats,
        run.settings.seed,
        None if (left := time_limit.command_left()) is None else 0.8 * left,
    )
    log.info(
        "permutation importance: %d inputs on %d test rows in %.1fs",
        len(importance["features"]),
        importance["rows"],
        time.perf_counter() - started,
    )
    if settings.plots:
        figures.draw(
            "runner.reports.importance:plot_importance",
            importance,
            run.run_dir / "plots" / "importance.png",
        )
    return importance


def _write_report(run: Run, report: dict, warnings: list[str]) -> None:
    from runner.redact import redact
    from runner.reports.html import run_report

    components = {k.removeprefix("runner."): v for k, v in _run_tags(run).items()}
    config = OmegaConf.to_yaml(
        OmegaConf.create(redact(OmegaConf.to_container(run.cfg, resolve=True)))
    )
    plots = sorted((run.run_dir / "plots").glob("*.png"))
    plots = [p for p in plots if p.name not in ("importance.png", "attributions.png")]
    run_report(run.run_dir, report, components, config, plots, warnings)


def _finish(run: Run, metrics: dict, extra: dict, figures, trackers) -> None:
    from runner import outputs

    outputs.write_json(run.run_dir / "metrics.json", {**metrics, **extra})
    warnings = [f"warning: {line}" for line in _baseline_warnings(extra.get("baseline_check", {}))]
    figures.wait()  # report.html embeds them
    _write_report(run, {**metrics, **extra}, warnings)
    locations = {"metrics": str(run.run_dir / "metrics.json")}
    for name, label in (
        ("report.html", "report"),
        ("plots", "plots"),
        ("model", "model"),
        ("predictions.parquet", "predictions"),
        ("predictions", "predictions"),
        ("explanations.parquet", "explanations"),
        ("explanations", "explanations"),
        ("learning_curves.png", "curves"),
        ("checkpoints", "checkpoints"),
    ):
        if (run.run_dir / name).exists():
            locations[label] = str(run.run_dir / name)
    trackers.log_results(run.run_dir, metrics, extra)
    locations.update(trackers.locations())
    print(outputs.format_summary(metrics, locations, warnings))


def command_init(run: Run) -> dict:
    """The inferred model config as YAML, to edit and keep; nothing is trained."""
    from runner import outputs

    if run.type_inference is None:
        raise UserError(
            "command=init writes the features it infers; this config already lists them "
            "(model.input_features and model.output_features): drop model=... to infer them"
        )
    text = run.type_inference.yaml()
    print(text, end="")
    if run.settings.init.path:
        path = Path(run.settings.init.path).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        outputs.write_text_atomic(path, text)
        print(
            f"\nwritten to {path}; train with it: python run.py "
            f"--config-dir {path.parent.parent} model={path.stem} dataset.path=..."
        )
    return {}


# What command=<name> runs, one function per entry of runner/command_table.py COMMANDS.
COMMAND_FUNCTIONS: dict[str, Callable[..., dict]] = {
    "experiment": command_experiment,
    "preprocess": command_preprocess,
    "train": command_train,
    "evaluate": command_evaluate,
    "predict": command_predict,
    "explain": command_explain,
    "serve": command_serve,
    "export": command_export,
    "init": command_init,
}
