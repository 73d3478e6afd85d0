"""GET /metrics' counting and text (runner/serving/metrics.py), read back with Prometheus'
own text parser; the served end to end is in test_serving_replicas.py (two replicas)."""

import json

from prometheus_client.parser import text_string_to_metric_families

from runner.serving.metrics import BUCKETS, ReplicaMetrics, merge, model_labels, render


def samples(text: bytes) -> dict:
    """{(sample name, sorted labels): value} of an exposition."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_two_replicas_are_summed_by_route_and_status():
    first, second = ReplicaMetrics("a", 1.5), ReplicaMetrics("b", 2.0)
    for _ in range(3):
        first.observe("/predict", 200, 0.004, rows=2)
    second.observe("/predict", 200, 0.02, rows=5)
    second.observe("/predict", 422, 0.001)
    second.observe("/nope", 404, 0.0005)
    text = render(
        merge({"a": first.snapshot(), "b": second.snapshot()}), {"name": "run", "version": "v1"}
    )
    got = samples(text)
    ok = (("route", "/predict"), ("status", "200"))
    assert got[("runner_requests_total", ok)] == 4
    assert got[("runner_rows_total", ok)] == 11  # 3 x 2 + 5
    assert got[("runner_requests_total", (("route", "/predict"), ("status", "422")))] == 1
    assert got[("runner_requests_total", (("route", "other"), ("status", "404")))] == 1
    predict = (("route", "/predict"),)
    assert got[("runner_request_seconds_count", predict)] == 5
    assert abs(got[("runner_request_seconds_sum", predict)] - (3 * 0.004 + 0.02 + 0.001)) < 1e-9
    # Buckets are cumulative: the 1 ms request, then the three of 4 ms, then the 20 ms one.
    le = {b: got[("runner_request_seconds_bucket", (("le", repr(b)), *predict))] for b in BUCKETS}
    assert (le[0.001], le[0.0025], le[0.005], le[0.01], le[0.025]) == (1, 1, 4, 4, 5)
    assert got[("runner_request_seconds_bucket", (("le", "+Inf"), *predict))] == 5
    assert got[("runner_model_load_seconds", (("replica", "a"),))] == 1.5
    assert got[("runner_model_load_seconds", (("replica", "b"),))] == 2.0
    assert got[("runner_model_info", (("name", "run"), ("version", "v1")))] == 1


def test_a_snapshot_is_a_replicas_totals_and_clears_only_the_changed_flag():
    counts = ReplicaMetrics("a", 0.1)
    counts.observe("/health", 200, 0.001)
    assert counts.changed
    before = counts.snapshot()
    assert not counts.changed and before["requests"] == {("/health", "200"): 1}
    counts.observe("/health", 200, 0.001)
    assert counts.snapshot()["requests"] == {("/health", "200"): 2}  # totals, not deltas


def test_the_models_version_changes_with_its_meta(tmp_path):
    model = tmp_path / "run-1" / "model"
    model.mkdir(parents=True)
    (model / "meta.json").write_text(json.dumps({"a": 1}))
    first = model_labels(str(model))
    (model / "meta.json").write_text(json.dumps({"a": 2}))
    assert first["name"] == "run-1" and model_labels(str(model))["version"] != first["version"]


def test_the_middleware_counts_every_response_of_a_real_server():
    """CountEveryResponse around a FastAPI app served by uvicorn, asked by a real HTTP client:
    a route's rows, the router's 404 and 405, a route's own 4xx, an exception's 500 and a
    request to /metrics itself are each counted once."""
    import socket
    import threading
    import time

    import requests
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from runner.serving import metrics

    app = FastAPI()
    app.add_middleware(metrics.CountEveryResponse)

    @app.post("/predict")
    async def predict(request: Request):
        rows = await request.json()
        if rows == "bad":
            return JSONResponse({"error": "bad"}, status_code=422)
        if rows == "boom":
            raise RuntimeError("a bug")
        request.state.rows = len(rows)
        return rows

    @app.get("/metrics")
    async def text():
        return "ok"

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    counts = ReplicaMetrics("r", 0.1)
    metrics.count_in(counts)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        assert requests.post(f"{url}/predict", json=[1, 2, 3], timeout=10).status_code == 200
        assert requests.post(f"{url}/predict", json="bad", timeout=10).status_code == 422
        assert requests.post(f"{url}/predict", json="boom", timeout=10).status_code == 500
        assert requests.get(f"{url}/predict", timeout=10).status_code == 405
        assert requests.get(f"{url}/nope", timeout=10).status_code == 404
        assert requests.get(f"{url}/metrics", timeout=10).status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        metrics.count_in(None)
    snap = counts.snapshot()
    assert snap["requests"] == {
        ("/predict", "200"): 1,
        ("/predict", "422"): 1,
        ("/predict", "500"): 1,
        ("/predict", "405"): 1,
        ("other", "404"): 1,
        ("/metrics", "200"): 1,
    }
    assert snap["rows"] == {("/predict", "200"): 3}
    assert sum(snap["latency"]["/predict"][:-1]) == 4
