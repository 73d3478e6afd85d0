"""The windowed stream of loader=ray (window_size_bytes / fully_executed=false), without Ray:
a worker reads its own row groups a window at a time, so these run in the fast tier."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers import compose_config, run_experiment
from hydra.utils import instantiate

from runner.config import check_config
from runner.loading import ray_data, row_spans
from runner.loading.tensors import TensorTable
from runner.model.layout import NUMERIC, Layout
from runner.storage import Location

ROW_GROUP = 300  # rows per row group of the test split: many windows per shard
BATCH = 16  # small batches: a window (at least 32 batches) of a few row groups


@pytest.fixture(scope="module")
def split_and_layout(tmp_path_factory):
    """A processed training split, rewritten as two files of small row groups."""
    tmp = tmp_path_factory.mktemp("stream")
    run_experiment(tmp / "pre", tmp / "cache", "command=preprocess", "dataset.synthetic_rows=6000")
    meta_path = next((tmp / "cache").glob("*/meta.json"))
    meta = json.loads(meta_path.read_text())
    table = pq.read_table(meta_path.parent / meta["data"] / "train")
    out = tmp / "split"
    out.mkdir()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), out / "part-0.parquet", row_group_size=ROW_GROUP)
    pq.write_table(table.slice(half), out / "part-1.parquet", row_group_size=ROW_GROUP)
    layout = Layout.from_meta(meta, check_config(compose_config([])).model)
    return Location(str(out)), layout, table


def streamed_shards(split, layout, world_size, *overrides):
    loader = instantiate(
        compose_config(["loader=ray", f"loader.batch_size={BATCH}", *overrides]).loader
    )
    groups = row_spans.row_groups(split)
    rows = sum(g[2] for g in groups)
    bytes_per_row = sum(g[3] for g in groups) / rows
    shards = [
        ray_data.RayShard(None, end - start, bytes_per_row, split=split, spans=spans, streamed=True)
        for spans, (start, end) in ray_data._shares(groups, rows, world_size, True)
    ]
    return loader, [loader.open(shard, layout) for shard in shards]


def epoch_rows(loader, shard, epoch):
    """The numeric inputs of one epoch's batches, in the order they came, and the batch sizes."""
    batches = list(loader.train_batches(shard, epoch, seed=0))
    return np.concatenate([inputs[NUMERIC].numpy() for inputs, _ in batches]), [
        len(inputs[NUMERIC]) for inputs, _ in batches
    ]


def sorted_rows(matrix):
    return matrix[np.lexsort(matrix.T[::-1])]


def test_a_window_at_a_time_every_row_once_in_a_new_order_every_epoch(split_and_layout):
    split, layout, table = split_and_layout
    # ~4 row groups (1,200 rows) per window: each epoch is many windows, with leftovers carried over
    loader, (shard,) = streamed_shards(split, layout, 1, "loader.window_size_bytes=40000")
    window_rows = loader._buffer_rows(shard)
    assert ROW_GROUP < window_rows < shard.rows / 3
    whole = TensorTable.from_arrow(table, layout).inputs[NUMERIC].numpy()
    first, sizes = epoch_rows(loader, shard, 1)
    second, _ = epoch_rows(loader, shard, 2)
    # every row exactly once per epoch (drop_last off by default: the last batch is partial)
    np.testing.assert_array_equal(sorted_rows(first), sorted_rows(whole))
    np.testing.assert_array_equal(sorted_rows(second), sorted_rows(whole))
    assert sizes[:-1] == [BATCH] * (len(sizes) - 1) and sizes[-1] == len(whole) % BATCH
    assert not np.array_equal(first, second)  # reshuffled between epochs
    # rows mix across row groups within a window: the first batch is not one row group's
    starts = {tuple(r) for r in whole[:ROW_GROUP]}
    assert not all(tuple(r) in starts for r in first[:BATCH])
    # evaluation: every row once, in the split's order
    evaluated = np.concatenate([t.inputs[NUMERIC].numpy() for t in loader.eval_batches(shard)])
    np.testing.assert_array_equal(evaluated, whole)


def test_equal_shares_take_equal_steps_and_drop_last_drops_only_the_end(split_and_layout):
    split, layout, table = split_and_layout
    loader, shards = streamed_shards(
        split, layout, 2, "loader.window_size_bytes=30000", "loader.drop_last=true"
    )
    assert shards[0].rows == shards[1].rows == table.num_rows // 2
    steps = [epoch_rows(loader, shard, 3)[1] for shard in shards]
    assert steps[0] == steps[1] == [BATCH] * (shards[0].rows // BATCH)


def test_memory_holds_about_two_windows_whatever_the_share(split_and_layout):
    """What the stream holds at once: the window being trained and the one read ahead."""
    split, layout, _ = split_and_layout
    loader, (shard,) = streamed_shards(split, layout, 1, "loader.window_size_bytes=40000")
    window_rows = loader._buffer_rows(shard)
    held = [
        t.num_rows for t in ray_data.read_ahead(split, ray_data.windows(shard.spans, window_rows))
    ]
    assert sum(held) == shard.rows
    assert max(held) < window_rows + ROW_GROUP  # a window overshoots by less than a row group


def test_the_epochs_training_metrics_come_from_an_even_bounded_sample():
    """Every batch under the cap (exact metrics); past it every 2nd, 4th... batch, evenly
    across the epoch, never more than the cap's rows."""
    import torch

    from runner.model.layout import OutputSpec
    from runner.training.loop import EpochSample

    layout = Layout([], [], [], [OutputSpec("label", "binary", 1)])

    def run(batches, cap):
        sample = EpochSample(layout, cap=cap)
        for i in range(batches):  # batch i: 10 rows whose logits are all i
            z = torch.full((10, 1), float(i))
            sample.add({"label": z}, {"label": torch.zeros(10)}, 10)
        logits, targets = sample.stacked()
        return sorted(set(logits["label"][:, 0].astype(int).tolist())), len(targets["label"])

    assert run(50, cap=1000) == (list(range(50)), 500)  # under the cap: every batch
    held, rows = run(1000, cap=1000)
    assert rows <= 1000 and len(held) >= 50  # bounded, and at least half the cap
    stride = held[1] - held[0]
    assert held == list(range(0, 1000, stride))  # evenly spread over the whole epoch


def test_as_numpy_reads_what_to_numpy_reads():
    """The loader's buffer reads (runner/loading/tensors.py: no pandas import) give what
    pyarrow's to_numpy gives: several chunks, a sliced chunk (an offset into its buffer), every
    fixed-width type; nulls, booleans and no chunks go through to_numpy itself."""
    import pyarrow as pa

    from runner.loading.tensors import as_numpy

    cases = [
        pa.chunked_array([pa.array([1.5, 2.5, 3.5], pa.float32()), pa.array([4.5], pa.float32())]),
        pa.chunked_array([pa.array(np.arange(10), pa.int64()).slice(3, 4)]),
        pa.array([7, 8, 9], pa.int32()).slice(1),
        pa.array(np.arange(5, dtype=np.uint16)),
        pa.array([1.0, 2.0], pa.float64()),
        pa.chunked_array([pa.array([1.0, None, 3.0], pa.float32())]),
        pa.array([True, False, True]),
        pa.chunked_array([], type=pa.float32()),
        pa.array([[1, 2], [3]], pa.list_(pa.int32())).offsets,
        pa.array([[1, 2], [3]], pa.list_(pa.int32())).slice(1).flatten(),
    ]
    cases.append(pa.array([3, 4], pa.int32()).slice(2))  # no rows left
    cases.append(pa.chunked_array([pa.array(["2024-01-02"]).cast(pa.date32())]))
    for array in cases:
        got, want = as_numpy(array), array.to_numpy(zero_copy_only=False)
        assert got.dtype == want.dtype, array
        np.testing.assert_array_equal(got, want)
    # A view of Arrow's memory is read-only, as to_numpy's: the table is not ours to write.
    table = pa.table({"x": pa.array([1.0, 2.0], pa.float32())})
    view = as_numpy(table.column("x"))
    assert not view.flags.writeable
