"""The HTTP face of a trained model: a Ray Serve deployment with a FastAPI ingress.

GET /health    200 {"status": "ok", "replicas": {"RUNNING": 2}} once the replica has loaded
               the model; "replicas": the deployment's replicas by state, so a replica that
               died and is being replaced shows (e.g. {"RUNNING": 1, "STARTING": 1})
GET /schema    the inputs with their types, the outputs with their classes
GET /metrics   Prometheus text: requests (every response, unknown paths and errors too), rows
               and latency by route and status, the model's load time, name and version,
               summed over every replica (runner/serving/metrics.py)
POST /predict  a JSON array of row objects -> a JSON array with one object per row,
               keyed like the prediction columns (<output>_prediction, probabilities)

Every request is checked on its own (body size, JSON, fields, number values) and a bad
one gets a 4xx with {"error": ...} naming the row and field; only good requests reach
Ray Serve's request batching, so one bad request never fails the others of its batch.
Scoring is the Predictor's, as in command=predict.
"""

import asyncio
import json
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from ray import serve

from runner.errors import UserError
from runner.scoring.predictor import Predictor
from runner.serving import metrics as served_metrics

api = FastAPI(title="tabular-runner model")
api.add_middleware(served_metrics.CountEveryResponse)
APP_NAME = "tabular-runner"
DEPLOYMENT = "model"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _replica_states() -> dict[str, int]:
    """The deployment's replicas by state, from Serve's controller ({} if it cannot say)."""
    try:
        deployment = serve.status().applications[APP_NAME].deployments[DEPLOYMENT]
    except Exception:  # noqa: BLE001 - health must answer even when the controller is busy
        return {}
    return {str(getattr(k, "value", k)): int(v) for k, v in deployment.replica_states.items()}


@serve.deployment(name=DEPLOYMENT)
@serve.ingress(api)
class ModelServer:
    def __init__(
        self,
        model_dir: str,
        max_batch_size: int,
        batch_wait_timeout_s: float,
        max_body_bytes: int,
        keeper=None,
    ):
        started = time.perf_counter()
        self.predictor = Predictor.load(model_dir)
        replica = serve.get_replica_context().replica_id.unique_id
        self.counts = served_metrics.ReplicaMetrics(replica, time.perf_counter() - started)
        served_metrics.count_in(self.counts)  # every response, by the app's middleware
        self.keeper, self.labels = keeper, served_metrics.model_labels(model_dir)
        self.reporting: asyncio.Task | None = None
        self.max_body_bytes = max_body_bytes
        # Any: serve.batch gives the method these setters, which Ray's types of it leave out.
        batched: Any = self.predict_batch
        batched.set_max_batch_size(max_batch_size)
        batched.set_batch_wait_timeout_s(batch_wait_timeout_s)

    def check_health(self) -> None:
        """Serve's periodic probe: a replica without its model is restarted."""
        if self.predictor is None:
            raise RuntimeError("the model is not loaded")

    @api.get("/health")
    def health(self) -> dict:  # not async: serve.status() blocks; FastAPI runs a def in a thread
        return {"status": "ok", "replicas": _replica_states()}

    @api.get("/schema")
    async def schema(self) -> dict:  # async: FastAPI runs a plain def in its thread pool
        return self.predictor.schema()

    @api.get("/metrics")
    async def metrics(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        own = {self.counts.replica: self.counts.snapshot()}
        if self.keeper is None:
            merged = served_metrics.merge(own)
        else:
            await self.keeper.put.remote(*next(iter(own.items())))
            merged = await self.keeper.merged.remote()
        return Response(served_metrics.render(merged, self.labels), media_type=CONTENT_TYPE_LATEST)

    def _report_in_background(self) -> None:
        """Once a second, this replica's totals to the keeper when they changed (started by the
        first request: the constructor has no event loop to start it on)."""
        if self.reporting is not None or self.keeper is None:
            return

        async def report():
            while True:
                await asyncio.sleep(1.0)
                if self.counts.changed:
                    self.keeper.put.remote(self.counts.replica, self.counts.snapshot())

        self.reporting = asyncio.get_running_loop().create_task(report())

    @api.post("/predict")
    async def predict(self, request: Request):
        self._report_in_background()
        response, request.state.rows = await self._predict(request)  # counted by the middleware
        return response

    async def _predict(self, request: Request) -> tuple[Response, int]:
        """The answer and the rows it scored (0 for a refused request)."""
        body = await request.body()
        if len(body) > self.max_body_bytes:
            too_big = (
                f"the body has {len(body)} bytes, over serve.max_body_bytes={self.max_body_bytes}; "
                "send fewer rows per request"
            )
            return _error(413, too_big), 0
        try:
            records = json.loads(body)
        except ValueError as exc:
            why = f"the body is not valid JSON ({exc}); send a JSON array of row objects"
            return _error(400, why), 0
        try:
            self.predictor.check_request(records)
        except UserError as exc:
            return _error(422, str(exc)), 0
        try:
            # Plain JSON values already: a JSONResponse skips FastAPI's jsonable_encoder walk.
            return JSONResponse(await self.predict_batch(records)), len(records)
        except UserError as exc:
            return _error(422, str(exc)), 0

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.0)
    async def predict_batch(self, requests: list[list[dict]]) -> list[list[dict]]:
        """Many requests' rows scored together; each gets its own rows back."""
        # A row that preprocessing dropped (a missing value with missing_value_strategy=drop_row)
        # is answered with nulls.
        rows_of_all = [row for rows in requests for row in rows]
        answers = self.predictor.answer_records(rows_of_all, checked=True)
        out, first = [], 0
        for rows in requests:
            out.append(answers[first : first + len(rows)])
            first += len(rows)
        return out
