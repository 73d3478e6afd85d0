"""`python run.py command=serve` with 2 replicas: its metrics over both, and SIGTERM while
requests are in flight: real processes, a real HTTP client. Sustained load and a replica
SIGKILLed under it are the bench's soak section, which tests/test_bench_smoke.py runs."""

import json
import signal
import threading
import time

import pytest
import requests
from helpers import run_experiment, wait_until_serving

from bench.probe import replicas_running, start_serve  # conftest puts bench/ on the path

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A model served by the command itself: its own Ray, 2 replicas of half a CPU each."""
    work = tmp_path_factory.mktemp("soak")
    run_experiment(
        work / "train",
        work / "cache",
        "command=train",
        "backend=local",
        "dataset.synthetic_rows=3000",
        "trainer.epochs=2",
    )
    process, url = start_serve(
        work / "train" / "model",
        work / "serve",
        "serve.num_replicas=2",
        "serve.resources_per_replica={CPU:0.5}",
        "backend.ray.num_cpus=2",
    )
    wait_until_serving(process, f"{url}/health", 180, replicas_running(2))
    from runner.processing.synthetic import make_synthetic

    rows = make_synthetic(2000, 3).drop(columns=["label"])
    yield process, url, json.loads(rows.to_json(orient="records"))  # as a client sends them
    if process.poll() is None:
        process.kill()
        process.communicate()


def test_metrics_count_a_known_burst_over_both_replicas(served):
    """GET /metrics, parsed by Prometheus' own parser: a burst of 40 good requests of 3 rows,
    5 refused rows, 3 bodies that are not JSON, 2 unknown paths and 2 wrong methods, spread
    over both replicas, counted whichever replica answers; /metrics counts itself."""
    from test_serve_metrics import samples

    _, url, rows = served

    def read() -> dict:
        answer = requests.get(f"{url}/metrics", timeout=30)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
        return samples(answer.content)

    time.sleep(2.5)  # the replicas' last totals reach the keeper (once a second)
    before = read()
    for _ in range(40):
        assert requests.post(f"{url}/predict", json=rows[:3], timeout=30).status_code == 200
    for _ in range(5):
        bad = requests.post(f"{url}/predict", json=[{"x1": "lots"}], timeout=30)
        assert bad.status_code == 422
    for _ in range(3):
        assert requests.post(f"{url}/predict", data=b"{oops", timeout=30).status_code == 400
    for _ in range(2):
        assert requests.get(f"{url}/nope", timeout=30).status_code == 404
        assert requests.get(f"{url}/predict", timeout=30).status_code == 405
    time.sleep(2.5)
    after = read()

    def grew(name: str, *labels: tuple[str, str]) -> float:
        key = (name, tuple(sorted(labels)))
        return after.get(key, 0) - before.get(key, 0)

    route, ok = ("route", "/predict"), ("status", "200")
    assert grew("runner_requests_total", route, ok) == 40, sorted(after.items())[:12]
    assert grew("runner_rows_total", route, ok) == 120
    assert grew("runner_requests_total", route, ("status", "422")) == 5
    assert grew("runner_requests_total", route, ("status", "400")) == 3
    assert grew("runner_requests_total", route, ("status", "405")) == 2
    assert grew("runner_requests_total", ("route", "other"), ("status", "404")) == 2
    assert grew("runner_request_seconds_count", route) == 50
    assert grew("runner_requests_total", ("route", "/metrics"), ("status", "200")) >= 1
    loads = [k for k in after if k[0] == "runner_model_load_seconds"]
    assert len(loads) == 2 and all(after[k] > 0 for k in loads)  # both replicas reported
    assert [k for k in after if k[0] == "runner_model_info"]


def test_sigterm_drains_the_requests_in_flight(served):
    """Six requests of 20,000 rows each (a few seconds of scoring on the two half-CPU
    replicas), SIGTERM once they are all at the replicas and before the last is answered:
    every one is answered 200, then the server exits 0."""
    process, url, rows = served
    big = rows * 10
    answers: list = []
    sent = threading.Barrier(7)

    def post():
        sent.wait()
        try:
            answers.append(requests.post(f"{url}/predict", json=big, timeout=120).status_code)
        except requests.RequestException as error:
            answers.append(repr(error))

    clients = [threading.Thread(target=post) for _ in range(6)]
    for client in clients:
        client.start()
    sent.wait()
    time.sleep(1.0)  # uploaded (2.4 MB each, over loopback) and being scored
    in_flight = 6 - len(answers)
    process.send_signal(signal.SIGTERM)
    for client in clients:
        client.join(timeout=150)
    output = process.communicate(timeout=180)[0]
    assert in_flight > 0, "every request was answered before SIGTERM: nothing was drained"
    assert answers == [200] * 6, answers
    assert process.returncode == 0, output[-3000:]
