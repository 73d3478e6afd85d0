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
