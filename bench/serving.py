"""Serving figures: `python run.py command=serve` measured with a real HTTP client: the time
from the command to a healthy server, single-row latency (p50, p99) and rows/s for batches of
1,000 rows, with 1 and 2 replicas; beside them, what a request costs without the model
(`GET /schema`: Ray Serve's proxy hop and FastAPI) and what the model's own part costs in
process (the replica's work for one row: check_request and Predictor.answer_records)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _train(work: Path) -> Path:
    """The default model on the synthetic table, trained once per work folder (the serving and
    soak sections share it)."""
    run_dir = work / "serving" / "train"
    if (run_dir / "model").is_dir():
        return run_dir / "model"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "command=train",
            "backend=local",
            "trainer.epochs=2",
            "trainer.progress_bar=false",
            f"cache_dir={work / 'caches' / 'serving'}",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    return run_dir / "model"


def _rows(n: int) -> list[dict]:
    from runner.processing.synthetic import make_synthetic

    frame = make_synthetic(n, 7).drop(columns=["label"])
    return json.loads(frame.to_json(orient="records"))


@contextlib.contextmanager
def served(model_dir: Path, replicas: int, name: str, ingress: str = "haproxy"):
    """`python run.py command=serve` on a Ray of its own (replicas of half a CPU each), as
    (process, url); SIGTERM when the block ends."""
    from bench.probe import start_serve

    process, url = start_serve(
        model_dir,
        model_dir.parent.parent / name,
        f"serve.num_replicas={replicas}",
        f"serve.ingress={ingress}",
        "serve.resources_per_replica={CPU:0.5}",
        "backend.ray.num_cpus=2",
        output=subprocess.DEVNULL,
    )
    try:
        yield process, url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()


def _runs_haproxy(pid: int) -> bool:
    import psutil

    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.name() == "haproxy":
                return True
    return False


class SingleRowClient:
    """One keep-alive connection; a call that does not answer 200 raises."""

    def __init__(self, url: str):
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)

    def call(self, method: str, path: str, body: bytes | None = None) -> bytes:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.connection.request(method, path, body=body, headers=headers)
        answer = self.connection.getresponse()
        content = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{method} {path}: {answer.status} {content[:200]!r}")
        return content

    def close(self) -> None:
        self.connection.close()


def _measure(model_dir: Path, replicas: int, singles: int, batches: int, ingress: str) -> dict:
    import requests

    from bench.probe import until_ready

    started = time.perf_counter()
    with served(model_dir, replicas, f"serve-{replicas}-{ingress}", ingress) as (process, url):
        if not until_ready(process, f"{url}/health", 300, every=0.1):
            raise RuntimeError("command=serve did not become healthy")
        healthy = time.perf_counter() - started
        # What answers: without an HAProxy binary, haproxy falls back to Serve's proxy.
        answering = "haproxy" if _runs_haproxy(process.pid) else "proxy"
        # The standard library's keep-alive client: the server's time, not a client library's
        # (requests.Session adds about 0.4 ms to each of these calls here).
        client = SingleRowClient(url)
        one = json.dumps(_rows(1)).encode()
        for _ in range(10):  # warm-up
            client.call("POST", "/predict", one)
        latencies, hops = [], []
        for _ in range(singles):
            t = time.perf_counter()
            client.call("POST", "/predict", one)
            latencies.append(time.perf_counter() - t)
            t = time.perf_counter()
            client.call("GET", "/schema")
            hops.append(time.perf_counter() - t)
        client.close()
        batch = _rows(1000)

        def post(_):
            with requests.Session() as s:
                s.post(f"{url}/predict", json=batch, timeout=60).raise_for_status()

        t = time.perf_counter()
        with ThreadPoolExecutor(
            4
        ) as pool:  # concurrent clients, so that replicas can share the load
            list(pool.map(post, range(batches)))
        batch_seconds = time.perf_counter() - t
    ms, hop_ms = np.array(latencies) * 1000, np.array(hops) * 1000
    return {
        "replicas": replicas,
        "ingress": answering,
        "seconds_to_healthy": healthy,
        "single_row_p50_ms": float(np.percentile(ms, 50)),
        "single_row_p99_ms": float(np.percentile(ms, 99)),
        "hop_p50_ms": float(np.percentile(hop_ms, 50)),
        "hop_p99_ms": float(np.percentile(hop_ms, 99)),
        "batch_rows_per_second": batches * 1000 / batch_seconds,
        "single_requests": singles,
        "batches": batches,
    }


def predictor_single_row(model_dir: Path, requests: int) -> dict:
    """The replica's work for one row, in this process: the request's check and
    Predictor.answer_records on its JSON values, the same row each time (as the HTTP figures
    send)."""
    from runner.scoring.predictor import Predictor

    predictor = Predictor.load(model_dir)
    one = _rows(1)

    def answer():
        predictor.check_request(one)
        return predictor.answer_records(one, checked=True)

    for _ in range(20):  # warm-up
        answer()
    seconds = []
    for _ in range(requests):
        t = time.perf_counter()
        answer()
        seconds.append(time.perf_counter() - t)
    ms = np.array(seconds) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "forward_p50_ms": _bare_forward_p50(predictor, one, requests),
        "onnx_p50_ms": _onnx_forward_p50(predictor, one, requests, model_dir.parent / "onnx"),
    }


def _ready_inputs(predictor, one: list[dict]) -> dict:
    from runner.loading.tensors import TensorTable

    processed = predictor.processed(predictor.records_frame(one), False)
    return TensorTable.from_arrow(processed, predictor.layout, False, exact=True).inputs


def _p50_ms(call, requests: int) -> float:
    for _ in range(20):  # warm-up
        call()
    seconds = []
    for _ in range(requests):
        t = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t)
    return float(np.percentile(np.array(seconds) * 1000, 50))


def _bare_forward_p50(predictor, one: list[dict], requests: int) -> float:
    """The floor under the Predictor: the same model on the same row, already a ready tensor
    (no parsing, preprocessing or decoding)."""
    import torch

    inputs = _ready_inputs(predictor, one)
    with torch.inference_mode():
        return _p50_ms(lambda: predictor.saved.model(inputs), requests)


def _onnx_forward_p50(predictor, one: list[dict], requests: int, folder: Path) -> float:
    """The same model exported to ONNX (command=export export.format=onnx: one graph) on the
    same ready row, in onnxruntime with its default session."""
    import onnxruntime

    from runner.model.export import export_model

    artifact = export_model(predictor.saved, folder, "onnx")
    session = onnxruntime.InferenceSession(str(artifact))
    inputs = _ready_inputs(predictor, one)
    feed = {i.name: inputs[i.name].numpy() for i in session.get_inputs()}
    return _p50_ms(lambda: session.run(None, feed), requests)


def serving_figures(work: Path, smoke: bool = False) -> dict:
    sys.path.insert(0, str(ROOT))
    model_dir = _train(work)
    singles, batches = (20, 2) if smoke else (500, 40)
    # Each replica count through HAProxy (the default ingress; the unsuffixed keys), then
    # through Serve's Python proxy, one after the other (the smoke run: HAProxy's path only;
    # the proxy's is tests/test_serving.py's).
    runs = [(r, ingress) for r in (1, 2) for ingress in ("haproxy", "proxy")]
    if smoke:
        runs = [(1, "haproxy"), (2, "haproxy")]
    figures = {
        f"{r} replica(s)" + ("" if ingress == "haproxy" else f", {ingress}"): _measure(
            model_dir, r, singles, batches, ingress
        )
        for r, ingress in runs
    }
    predictor = predictor_single_row(model_dir, singles)
    for entry in figures.values():
        entry["predictor_p50_ms"] = predictor["p50_ms"]
        entry["predictor_p99_ms"] = predictor["p99_ms"]
        entry["forward_p50_ms"] = predictor["forward_p50_ms"]
        entry["onnx_p50_ms"] = predictor["onnx_p50_ms"]
    return figures
