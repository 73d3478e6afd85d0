"""The network's parts that no end-to-end run pins exactly: the ensemble's members, their
average and their loss."""

import pytest
import torch

from runner.config import FeatureConfig, ModelConfig
from runner.errors import UserError
from runner.model.layout import CATEGORY, NUMERIC, Layout, OutputSpec
from runner.model.network import build_model, mean_of_members
from runner.training.optimization import output_loss


def _layout() -> Layout:
    return Layout(
        numeric=["a", "b", "c"],
        categories=[("color", 5, 4)],
        texts=[],
        outputs=[
            OutputSpec("yes", "binary", 1, ["n", "y"]),
            OutputSpec("kind", "category", 3, ["p", "q", "r"]),
            OutputSpec("price", "number", 1),
        ],
        bin_edges=[[0.0, 1.0, 2.0], [], [-1.0, 1.0]],
    )


def _batch(rows: int = 16) -> dict:
    gen = torch.Generator().manual_seed(0)
    return {
        NUMERIC: torch.randn(rows, 3, generator=gen),
        CATEGORY: torch.randint(0, 5, (rows, 1), generator=gen),
    }


def test_members_mean_their_probabilities_and_values():
    z = torch.tensor([[[2.0], [-1.0], [0.5]], [[30.0], [-40.0], [0.0]]])  # 2 rows, 3 members
    p = torch.sigmoid(z).mean(1)
    np_logit = torch.log(p / (1 - p))
    assert torch.allclose(mean_of_members("binary", z), np_logit, atol=1e-5)
    assert torch.isfinite(mean_of_members("binary", z * 100)).all()  # no overflow at large logits
    c = torch.randn(4, 3, 5)
    probs = torch.softmax(c, dim=2).mean(1)
    assert torch.allclose(torch.softmax(mean_of_members("category", c), dim=1), probs, atol=1e-6)
    assert torch.allclose(mean_of_members("category", c).exp().sum(1), torch.ones(4), atol=1e-5)
    assert torch.allclose(mean_of_members("number", c[..., :1]), c[..., :1].mean(1))


@pytest.mark.parametrize("combiner", ["concat", "residual"])
def test_an_ensemble_trains_every_member_and_predicts_their_mean(combiner):
    torch.manual_seed(0)
    settings = ModelConfig(combiner=combiner, ensemble_size=4, hidden_size=8)
    model = build_model(_layout(), settings)
    batch = _batch()
    model.train()
    members = model(batch)
    assert members["yes"].shape == (16, 4, 1)
    assert members["kind"].shape == (16, 4, 3)
    assert members["price"].shape == (16, 4, 1)
    # The members differ (their sign adapters and heads), so the average is an ensemble's.
    assert not torch.allclose(members["price"][:, 0], members["price"][:, 1])
    model.eval()
    with torch.no_grad():
        joint = model(batch)
    kinds = {"yes": "binary", "kind": "category", "price": "number"}
    for name, kind in kinds.items():
        assert joint[name].dim() == 2
        assert torch.allclose(joint[name], mean_of_members(kind, members[name].detach()), atol=1e-5)

    # The loss is the members' mean loss: every member is fitted on every row.
    targets = {
        "yes": torch.randint(0, 2, (16,)).float(),
        "kind": torch.randint(0, 3, (16,)),
        "price": torch.randn(16),
    }
    layout = _layout()
    each = [
        output_loss(layout, {k: v[:, m] for k, v in members.items()}, targets) for m in range(4)
    ]
    assert torch.allclose(output_loss(layout, members, targets), torch.stack(each).mean())


def test_one_member_is_the_plain_network():
    model = build_model(_layout(), ModelConfig(hidden_size=8))
    model.train()
    assert model(_batch())["kind"].shape == (16, 3)
    assert model.adapter is None


def test_the_ensemble_needs_an_mlp_combiner():
    with pytest.raises(UserError, match="model.ensemble_size>1"):
        ModelConfig(combiner="transformer", ensemble_size=4)
    with pytest.raises(UserError, match="model.ensemble_size=0 is out of range"):
        ModelConfig(ensemble_size=0)


def test_the_ensemble_is_on_by_itself_for_small_tables_only():
    auto = ModelConfig()
    members, why = auto.ensemble_members(30_000)
    assert members == 4 and "30,000 training rows" in why
    members, why = auto.ensemble_members(700_000)
    assert members == 1 and "more than model.ensemble_max_rows=50,000" in why
    assert ModelConfig(ensemble_size=2).ensemble_members(700_000) == (2, "model.ensemble_size")
    assert ModelConfig(combiner="transformer").ensemble_members(100)[0] == 1
    assert ModelConfig(ensemble_max_rows=10).ensemble_members(100)[0] == 1
    small = build_model(Layout(**{**_layout().__dict__, "train_rows": 500}), ModelConfig())
    assert small.members == 4


def test_auto_picks_the_ensemble_for_one_tree_output_at_every_size():
    binary = [FeatureConfig(name="y", type="binary")]
    auto = ModelConfig(output_features=binary)
    family, why = auto.pick_family()
    assert auto.family == "auto" and family == "ensemble" and "weighted on validation" in why
    two = ModelConfig(output_features=[*binary, FeatureConfig(name="z", type="number")])
    family, why = two.pick_family()
    assert family == "network" and "not y (binary), z (number)" in why
    assert ModelConfig(family="gbm").pick_family() == ("gbm", "model.family")


def test_category_embeddings_take_their_own_width_and_a_feature_its_own():
    texts_and_categories = ModelConfig(embedding_size=16, category_embedding_size=4)
    assert texts_and_categories.embedding_of("color", category=True) == 4
    assert texts_and_categories.embedding_of("title") == 16  # texts keep model.embedding_size
    assert ModelConfig(embedding_size=12).embedding_of("color", category=True) == 12  # null: same
    one = ModelConfig(
        category_embedding_size=4,
        input_features=[FeatureConfig(name="color", type="category", embedding_size=6)],
    )
    assert one.embedding_of("color", category=True) == 6  # the feature's own wins
    with pytest.raises(UserError, match="model.category_embedding_size=0 is out of range"):
        ModelConfig(category_embedding_size=0)


def test_the_layout_gives_categories_their_width_and_texts_the_model_s():
    meta = {
        "input_features": ["color", "title"],
        "output_features": ["yes"],
        "features": {
            "color": {"type": "category", "stats": {"vocab": ["red", "blue"]}},
            "title": {"type": "text", "stats": {"vocab": ["a", "b"], "vocab_counts": [3, 2]}},
            "yes": {"type": "binary", "stats": {"labels": ["n", "y"]}},
        },
    }
    layout = Layout.from_meta(meta, ModelConfig(embedding_size=16, category_embedding_size=4))
    assert layout.categories == [("color", 3, 4)]
    assert [dim for *_, dim in layout.texts] == [16]
    assert layout.numeric == []
    # A text's fitted components join the numbers, without bins (z-scored already).
    meta["features"]["title"]["stats"]["components"] = {"mean": [0.0, 0.0], "std": [1.0, 1.0]}
    layout = Layout.from_meta(meta, ModelConfig())
    assert layout.numeric == ["title.component0", "title.component1"]
    assert layout.bin_edges == [[], []]


def test_category_embeddings_start_small():
    """Uniform in +-1/sqrt(dim) (about one number input's norm), not torch's N(0, 1)."""
    model = build_model(_layout(), ModelConfig(hidden_size=8))
    weight = model.embeddings[0].weight  # "color": 5 values, width 4
    assert weight.shape == (5, 4)
    assert weight.abs().max() <= 4**-0.5
    assert weight.std() > 0.1  # drawn, not zeros
