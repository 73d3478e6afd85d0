"""Every option of every config group composes and instantiates; schema errors name the key."""

import pytest
from conftest import CONF, compose_config
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

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
