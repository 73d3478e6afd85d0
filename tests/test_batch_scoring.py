"""Batch prediction and evaluation on a real local Ray: an actor pool scores the processor's
partitions where they live and writes the predictions itself; metrics merge from partial
statistics. Every path agrees with the local one on the same model and data."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import MIXED_MODEL, error_lines, mixed_table, run_cli, run_experiment

from runner.backends.local import LocalBackend
from runner.errors import UserError, user_error_in
from runner.scoring.batch import ScoringTask
from runner.scoring.dispatch import score_split
from runner.scoring.predictor import Predictor

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.distributed]
TOLERANCE = 1e-6
KEEP = "predict.keep_columns=[id,code,flag,zip]"
KEPT_TYPES = ["string", "int64", "bool", "string"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model trained locally on the mixed table (every input and output type), and new
    data with an ID column, a missing number and a category never seen in training."""
    root = tmp_path_factory.mktemp("batch")
    mixed_table(3000).to_csv(root / "train.csv", index=False)
    metrics = run_experiment(
        root / "train",
        root / "cache",
        "backend=local",
        f"dataset.path={root / 'train.csv'}",
        "trainer.epochs=2",
        *MIXED_MODEL,
    )
    new = mixed_table(2500, seed=5)
    new.loc[0, "shape"] = "hexagon"
    new.loc[1, "size"] = None
    new.loc[2, "review"] = None
    new.insert(0, "id", [f"customer-{i}" for i in range(len(new))])
    # Kept beside the predictions, typed as the file has them: whole numbers, booleans.
    new["code"] = pd.array(np.arange(len(new)) * 7, dtype="Int64")
    new.loc[3, "code"] = None
    new["flag"] = np.arange(len(new)) % 3 == 0
    new["zip"] = [f"{i % 1000:05d}" for i in range(len(new))]  # leading zeros: stays a string
    new.to_csv(root / "new.csv", index=False)
    return root, metrics


def _predictions(run_dir) -> pd.DataFrame:
    path = run_dir / "predictions.parquet"
    if not path.exists():
        path = run_dir / "predictions"
    return pd.read_parquet(path).sort_values("row").reset_index(drop=True)


def _score(root, name, command, *overrides):
    run_dir = root / f"{command}-{name}"
    metrics = run_experiment(
        run_dir,
        root / "cache",
        f"command={command}",
        f"model_dir={root / 'train' / 'model'}",
        f"dataset.path={root / 'new.csv'}",
        *overrides,
    )
    return run_dir, metrics


def assert_same_predictions(got: pd.DataFrame, want: pd.DataFrame):
    assert list(got.columns) == list(want.columns)
    assert got["row"].tolist() == want["row"].tolist()
    for column in want.select_dtypes("number").columns:  # values in raw units: 1e-6 relative
        rtol = 0 if "probability" in column or column == "row" else TOLERANCE
        np.testing.assert_allclose(got[column], want[column], atol=TOLERANCE, rtol=rtol)
    for column in want.columns.difference(want.select_dtypes("number").columns):
        assert got[column].tolist() == want[column].tolist(), column


def assert_same_metrics(got: dict, want: dict):
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=TOLERANCE), key


@pytest.fixture(scope="module")
def local_reference(trained):
    root, _ = trained
    predict_dir, _ = _score(root, "local", "predict", "backend=local", KEEP)
    _, evaluation = _score(root, "local", "evaluate", "backend=local")
    predictions = _predictions(predict_dir)
    assert kept_types(predict_dir) == KEPT_TYPES
    assert predictions["code"].isna().sum() == 1
    assert predictions["zip"].iloc[5] == "00005"
    return predictions, evaluation["evaluation"]


def kept_types(run_dir) -> list[str]:
    """The Parquet types of the kept columns: a CSV's come back typed as the whole column
    reads (whole numbers with a missing one, booleans), not as strings."""
    import pyarrow.dataset as ds

    path = run_dir / "predictions.parquet"
    schema = ds.dataset(path if path.exists() else run_dir / "predictions").schema
    return [str(schema.field(name).type) for name in ("id", "code", "flag", "zip")]


@pytest.mark.parametrize(
    "processor",
    [
        ["processor=pandas"],
        ["processor=dask", "processor.parallelism=3"],
        ["processor=modin"],
        ["processor=arrow", "processor.parallelism=3"],
    ],
)
def test_predict_and_evaluate_on_ray_equal_the_local_path(
    trained, local_reference, processor, caplog
):
    root, _ = trained
    want_predictions, want_metrics = local_reference
    name = processor[0].split("=")[1]
    ray = [
        "backend=ray",
        *processor,
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU: 0.5}",
        "predict.batch_size=700",
    ]
    with caplog.at_level("INFO"):
        predict_dir, _ = _score(root, name, "predict", *ray, KEEP)
    assert "scoring on Ray: 2 actor(s)" in caplog.text
    parts = sorted(p.name for p in (predict_dir / "predictions").iterdir())
    # Parts written by the actors, named by their first row; nothing else (no staging dirs).
    assert len(parts) >= 4 and all(p.startswith("part-") for p in parts)
    assert not list(predict_dir.glob("predictions.partial-*"))
    got = _predictions(predict_dir)
    assert list(got.columns[:2]) == ["row", "id"]
    assert got["id"].tolist() == [f"customer-{i}" for i in range(2500)]
    assert_same_predictions(got, want_predictions)
    assert kept_types(predict_dir) == KEPT_TYPES
    assert got.loc[0, "grade_prediction"] in ("A", "B", "C")  # an unseen category still scores
    _, evaluation = _score(root, name, "evaluate", *ray)
    assert_same_metrics(evaluation["evaluation"], want_metrics)


@pytest.mark.parametrize("where", ["pool", "driver", "one actor"])
def test_experiment_on_ray_scores_the_test_split_with_the_pool(tmp_path, trained, caplog, where):
    """A large test split goes to the actor pool (of more than one actor); one under
    predict.pool_min_rows, or for a pool of one CPU actor, is scored in the driver by the same
    scorer: the same parts, the same metrics as one process."""
    root, _ = trained
    run_dir = tmp_path / "run"
    with caplog.at_level("INFO"):
        metrics = run_experiment(
            run_dir,
            root / "cache",
            "backend=ray",
            f"dataset.path={root / 'train.csv'}",
            "trainer.epochs=2",
            "predict.batch_size=200",
            f"predict.pool_min_rows={10**6 if where == 'driver' else 0}",
            *(
                ["trainer.num_workers=2", "trainer.resources_per_worker={CPU: 0.5}"]
                if where == "pool"
                else []
            ),
            *MIXED_MODEL,
        )
    pooled = "scoring on Ray: 2 actor(s)" in caplog.text
    assert pooled == (where == "pool"), caplog.text[-2000:]
    assert ("in this process (fewer than predict.pool_min_rows" in caplog.text) == (
        where == "driver"
    )
    assert ("a pool of one CPU actor would score" in caplog.text) == (where == "one actor")
    predictions = _predictions(run_dir)
    assert predictions["row"].is_unique
    assert len(list((run_dir / "predictions").iterdir())) >= 2
    assert set(predictions["grade"]) <= {"A", "B", "C"}  # true values beside the predictions
    # The same model and split scored in one process give the same metrics.
    from runner.storage import Location

    entry = json.loads((run_dir / "metrics.json").read_text())["training"]["cache_entry"]
    local = score_split(
        Predictor.load(run_dir / "model"),
        ScoringTask(labelled=True, write_predictions=True, processed=True),
        LocalBackend(),
        Location(entry).join("test"),
        tmp_path,
        None,
    )
    assert_same_metrics(metrics["test"], local.metrics)
    assert_same_predictions(predictions, _predictions(tmp_path))
    assert 0 < metrics["baseline"]["grade/accuracy"] < 1


def _bad_tables(root):
    good = pd.read_csv(root / "new.csv")
    wrong_type = good.copy()
    wrong_type["size"] = wrong_type["size"].astype(object)
    wrong_type.loc[1800, "size"] = "twelve"
    wrong_type.to_csv(root / "wrong_type.csv", index=False)
    good.drop(columns=["shape"]).to_csv(root / "no_shape.csv", index=False)
    good.iloc[:0].to_csv(root / "empty.csv", index=False)


BAD_INPUTS = {
    "missing input": (
        "no_shape.csv",
        [],
        "input feature 'shape' is not a column of",
    ),
    "wrong type": (
        "wrong_type.csv",
        [],
        "number feature 'size' has non-numeric value 'twelve' at data row 1801",
    ),
    "empty table": ("empty.csv", [], "has no data rows"),
    "missing keep column": (
        "new.csv",
        ["predict.keep_columns=[customer]"],
        "predict.keep_columns names 'customer', which is not a column of",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_on_ray_is_one_line_and_leaves_no_predictions(trained, case):
    root, _ = trained
    _bad_tables(root)
    table, extra, message = BAD_INPUTS[case]
    run_dir = root / f"bad-{case.replace(' ', '-')}"
    with pytest.raises(Exception) as raised:
        run_experiment(
            run_dir,
            root / "cache",
            "command=predict",
            f"model_dir={root / 'train' / 'model'}",
            f"dataset.path={root / table}",
            "backend=ray",
            "processor=dask",
            "processor.parallelism=3",
            "trainer.num_workers=2",
            "trainer.resources_per_worker={CPU: 0.5}",
            "predict.batch_size=500",
            *extra,
        )
    error = user_error_in(raised.value)
    assert isinstance(error, UserError) and message in str(error)
    assert "\n" not in str(error)
    leftovers = [p.name for p in run_dir.iterdir() if p.name.startswith("predictions")]
    assert leftovers == []


def test_wrong_type_on_ray_from_the_cli(trained, tmp_path):
    """The error an actor raised reaches the user as one line, exit 2, no predictions."""
    root, _ = trained
    _bad_tables(root)
    result = run_cli(
        "command=predict",
        f"model_dir={root / 'train' / 'model'}",
        f"dataset.path={root / 'wrong_type.csv'}",
        "backend=ray",
        "backend.num_cpus=2",
        "processor=dask",
        "processor.parallelism=2",
        f"hydra.run.dir={tmp_path / 'run'}",
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = error_lines(result)
    assert errors == [
        "error: number feature 'size' has non-numeric value 'twelve' at data row 1801; "
        "fix the value, list it in its preprocessing.missing_values if it stands for a missing "
        "number, or declare 'size' as type category"
    ]
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.startswith("predictions")]


@pytest.mark.slow
def test_an_actor_killed_mid_run_is_replaced_and_every_row_is_scored_once(tmp_path, trained):
    """SIGKILL of a scoring actor's process once the first parts are written: Ray restarts the
    actor and retries its batches (Ray Data's actor pool: max_restarts and max_task_retries
    -1); the predictions hold every row exactly once (a retried batch rewrites its own part,
    named by its first row), and nothing is left staged."""
    import os
    import signal
    import threading
    import time

    import psutil

    root, _ = trained
    rows = 60000
    mixed_table(rows, seed=7).to_csv(tmp_path / "big.csv", index=False)
    run_dir = tmp_path / "predict"
    killed = []

    def kill_an_actor_once_parts_appear():
        deadline = time.time() + 240
        while time.time() < deadline:
            if list(run_dir.glob("predictions.partial-*/part-*")):
                # Ray titles an actor's process after its class: ray::MapWorker(...PartitionScorer)
                actors = [
                    p.pid
                    for p in psutil.process_iter(["cmdline"])
                    if "PartitionScorer" in " ".join(p.info["cmdline"] or [])
                ]
                if actors:
                    os.kill(actors[0], signal.SIGKILL)
                    killed.append(actors[0])
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_an_actor_once_parts_appear)
    killer.start()
    run_experiment(
        run_dir,
        root / "cache",
        "command=predict",
        f"model_dir={root / 'train' / 'model'}",
        f"dataset.path={tmp_path / 'big.csv'}",
        "backend=ray",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU: 0.5}",
        "predict.batch_size=500",
    )
    killer.join()
    assert killed, "no scoring actor was found to kill"
    got = _predictions(run_dir)
    assert got["row"].tolist() == list(range(rows))  # every row, once
    assert not list(run_dir.glob("predictions.partial-*"))
