"""Every option of every config group composes and instantiates; schema errors name the key."""

import pytest
from helpers import CONF, compose_config
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from runner.config import check_config
from runner.errors import UserError

GROUPS = ["backend", "processor", "trainer", "loader", "dataset", "model", "preset"]
INSTANTIATED = {"backend", "processor", "trainer", "loader"}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_instantiates(group, option):
    overrides = [f"{group}={option}"]
    if group == "dataset" and option == "file":
        overrides.append("dataset.path=some.csv")
    cfg = compose_config(overrides)
    if group == "preset":  # a preset sets keys across the config (@package _global_)
        assert cfg.model.family == {"best": "bagged", "fast": "gbm", "default": "auto"}[option]
        return
    assert cfg[group] is not None
    if group in INSTANTIATED:
        obj = instantiate(cfg[group], _convert_="all")
        assert type(obj).__module__.startswith("runner.")


def test_each_group_has_options():
    for group in GROUPS:
        assert options(group), f"conf/{group} has no options"


@pytest.mark.parametrize(
    "override,line",
    [
        ("trainer.epocs=3", "trainer.epocs is not a config key; did you mean trainer.epochs?"),
        ("dataset.targt=y", "dataset.targt is not a config key; did you mean dataset.target?"),
        ("colour=red", "colour is not a config key; known keys: backend, cache_credentials,"),
        ("trainer.epochs=many", "trainer.epochs=many: trainer.epochs takes a whole number"),
        (
            "trainer.learning_rate=fast",
            "trainer.learning_rate=fast: trainer.learning_rate takes a number",
        ),
        ("report.plots=maybe", "report.plots=maybe: report.plots takes true or false"),
        (
            "dataset.exclude=tier",
            "dataset.exclude=tier: dataset.exclude takes a list; write dataset.exclude=[tier]",
        ),
        (
            "dataset.exclude=tier,spend",
            "dataset.exclude=tier,spend is ambiguous: write dataset.exclude=[tier,spend] for a "
            "list, or add --multirun to sweep over the values",
        ),
    ],
)
def test_an_overrides_problem_is_one_line_naming_the_fix(override, line):
    """Hydra's own messages advise `+key=value` for a misspelt key (which check_config would
    then reject) and print several lines; run.py and train() say this one line instead."""
    from runner.overrides import override_problem

    with pytest.raises(ConfigCompositionException) as info:
        compose_config([override])
    assert override_problem(info.value).startswith(line)


def test_train_raises_the_overrides_one_line(tmp_path):
    from runner.api import train

    with pytest.raises(UserError, match=r"^trainer.epocs is not a config key; did you mean"):
        train(None, "y", ["trainer.epocs=3"], run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_feature_with_unknown_key_fails():
    with pytest.raises(ConfigCompositionException):
        compose_config(["model.input_features=[{name:x1,type:number,colour:red}]"])


def test_interpolations_resolve():
    cfg = compose_config(["seed=7", "cache_dir=/tmp/somewhere"])
    assert cfg.trainer.seed == 7
    assert cfg.loader.batch_size == cfg.trainer.batch_size
    assert cfg.cache_dir == "/tmp/somewhere"


@pytest.mark.parametrize(
    "override,message",
    [
        (
            "+trainer.learning_rat=0.01",
            "trainer.learning_rat is not a config key; did you mean trainer.learning_rate?",
        ),
        ("+trainer.early_stopping.patiense=2", "did you mean trainer.early_stopping.patience?"),
        (
            "+model.hiden_size=8",
            "model.hiden_size is not a config key; did you mean model.hidden_size?",
        ),
        ("+dataset.split.ratio=[1,0,0]", "did you mean dataset.split.ratios?"),
        ("+loader.windowsize=10", "loader.windowsize is not a config key"),
        (
            "+processor.parallelism=3",
            "processor.parallelism is not a config key",
        ),  # processor=auto has it...
        ("+colour=red", "colour is not a config key; known keys: backend,"),
    ],
)
def test_unknown_keys_are_errors_naming_the_closest(override, message):
    overrides = [override]
    if override.startswith("+processor"):
        overrides = ["processor=pandas", override]  # ...but pandas does not
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("?", r"\?")):
        check_config(compose_config(overrides))


@pytest.mark.parametrize(
    "override,message",
    [
        ("trainer.learning_rate=0", "trainer.learning_rate=0.0 is out of range: it must be > 0"),
        ("trainer.batch_size=0", "trainer.batch_size=0 is out of range: it must be at least 1"),
        ("trainer.epochs=0", "trainer.epochs=0 is out of range: it must be at least 1"),
        (
            "trainer.num_workers=0",
            "trainer.num_workers=0 is out of range: it must be at least 1, or null",
        ),
        ("model.dropout=1", "model.dropout=1.0 is out of range: it must be in \\[0, 1\\)"),
        ("model.dropout=-0.1", "model.dropout=-0.1 is out of range"),
        (
            "trainer.early_stopping.patience=-1",
            "trainer.early_stopping.patience=-1 is out of range: it must be 0 or more",
        ),
        ("trainer.max_retries=-1", "trainer.max_retries=-1 is out of range"),
        (
            "trainer.optimizer=lion",
            "trainer.optimizer=lion is unknown; use one of: adamw, adam, sgd",
        ),
        ("trainer.precision=8", "trainer.precision=8 is unknown; use one of: auto, 32, bf16, fp16"),
        (
            "trainer.placement=diagonal",
            "trainer.placement=diagonal is unknown; use one of: spread, pack",
        ),
        (
            "trainer.resources_per_worker={CPU:-1}",
            "trainer.resources_per_worker.CPU=-1.0 is out of range",
        ),
        ("loader.eval_batch_size=0", "loader.eval_batch_size=0 is out of range"),
        ("command=fly", "command=fly is unknown; use one of: experiment, preprocess"),
        ("model.token_dropout=1", "model.token_dropout=1.0 is out of range"),
        (
            "model.number_encoder=bins",
            "model.number_encoder=bins is unknown; use one of: auto, none, piecewise, periodic",
        ),
        (
            "model.combiner=transformer model.number_encoder=piecewise",
            "model.number_encoder=piecewise feeds the concat or residual combiner",
        ),
        ("time_limit=0", "time_limit=0.0 is out of range: it must be seconds above 0"),
        ("time_limit=60 command=predict", "time_limit=60 bounds command=experiment or train"),
        (
            "preset=best dataset.split.method=group dataset.split.group_column=g",
            "model.family=bagged \\(preset=best\\) cuts its folds by row",
        ),
        ("model.bagging.folds=1", "model.bagging.folds=1 is out of range: it must be in 2..20"),
        ("model.bagging.members=[xgboost]", "model.bagging.members has 'xgboost'"),
        ("model.bagging.members=[]", "model.bagging.members is empty"),
    ],
)
def test_values_out_of_range_are_errors_naming_the_key(override, message):
    with pytest.raises(UserError, match=message):
        check_config(compose_config(override.split()))


def test_the_number_encoder_auto_is_piecewise_except_with_the_transformer():
    assert check_config(compose_config([])).model.number_encoding == "piecewise"
    transformer = check_config(compose_config(["model.combiner=transformer"])).model
    assert transformer.number_encoding == "none"


def test_the_default_config_is_valid_and_typed():
    settings = check_config(compose_config([]))
    assert settings.trainer.kind == "auto" and settings.trainer.early_stopping.patience == 5
    assert settings.model.hidden_size == 256


def test_the_spelt_out_markers_are_omegaconfs():
    """runner.config spells out OmegaConf's MISSING and II (a worker unpickles the settings
    without importing OmegaConf): they must stay what OmegaConf means by them."""
    import omegaconf

    from runner import config

    assert config.MISSING == omegaconf.MISSING
    assert config.II("trainer.num_workers") == omegaconf.II("trainer.num_workers")
    feature = omegaconf.OmegaConf.structured(config.FeatureConfig)
    assert omegaconf.OmegaConf.is_missing(feature, "name")
