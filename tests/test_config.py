"""Every option of every config group composes and instantiates; schema errors name the key."""

import pytest
from helpers import CONF, compose_config
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from runner.config import check_config
from runner.errors import UserError

GROUPS = ["backend", "processor", "trainer", "loader", "dataset", "model"]
INSTANTIATED = {"backend", "processor", "trainer", "loader"}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_instantiates(group, option):
    overrides = [f"{group}={option}"]
    if group == "dataset" and option == "file":
        overrides.append("dataset.path=some.csv")
    cfg = compose_config(overrides)
    assert cfg[group] is not None
    if group in INSTANTIATED:
        obj = instantiate(cfg[group], _convert_="all")
        assert type(obj).__module__.startswith("runner.")


def test_each_group_has_options():
    for group in GROUPS:
        assert options(group), f"conf/{group} has no options"


def test_misspelt_key_fails_naming_it():
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(["trainer.epocs=3"])
    assert "epocs" in str(info.value.__cause__) or "epocs" in str(info.value)


def test_wrong_type_fails_naming_key():
    with pytest.raises(ConfigCompositionException) as info:
        compose_config(["trainer.epochs=many"])
    text = str(info.value) + str(info.value.__cause__)
    assert "epochs" in text


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
    assert settings.trainer.strategy == "auto" and settings.trainer.early_stopping.patience == 5
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
