"""Serving under sustained load, and a replica lost under it: client threads send single-row
and batch requests for a while, retrying a failed request as a well-behaved client does;
the replicas' memory is sampled every second; optionally one replica's process is SIGKILLed
part-way, and the time until Serve has every replica running again is measured (GET /health
reports the replicas by state). Used by the bench (section `soak`) and the tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

# Ray titles a replica's process ray::ServeReplica:<app>:<deployment>.
REPLICA_TITLE = "ServeReplica:tabular-runner:model"


def replica_pids() -> list[int]:
    import psutil

    pids = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if REPLICA_TITLE in " ".join(process.info["cmdline"] or []):
                pids.append(process.pid)
        except psutil.Error:
            continue
    return sorted(pids)


@dataclass
class Record:
    started: float  # seconds since the soak began
    rows: int
    attempts: int  # 1: answered first time
    statuses: list  # every answer's status (0: no answer: connection refused, reset, timeout)
    latency: float | None  # seconds of the attempt that succeeded


@dataclass
class Soak:
    url: str
    rows: list[dict]  # request bodies are drawn from these
    clients: int = 4
    batch_rows: int = 50
    batch_share: float = 0.2  # of requests that carry batch_rows rows (the rest: one row)
    retries: int = 3
    records: list[Record] = field(default_factory=list)
    memory: list[tuple[float, dict[int, float]]] = field(default_factory=list)
    health: list[tuple[float, dict]] = field(default_factory=list)

    def run(self, seconds: float, kill_at: float | None = None) -> dict:
        """Load for `seconds`; with kill_at, one replica is SIGKILLed that many seconds in."""
        stop = threading.Event()
        self.began = time.perf_counter()
        threads = [
            threading.Thread(target=self._client, args=(n, stop), daemon=True)
            for n in range(self.clients)
        ]
        threads.append(threading.Thread(target=self._watch, args=(stop,), daemon=True))
        for thread in threads:
            thread.start()
        killed = None
        if kill_at is not None:
            time.sleep(kill_at)
            import os
            import signal

            pids = replica_pids()
            if pids:
                killed = (self._now(), pids[0])
                os.kill(pids[0], signal.SIGKILL)
        time.sleep(max(0.0, seconds - self._now()))
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        return self.summary(killed)

    def _now(self) -> float:
        return time.perf_counter() - self.began

    def _client(self, number: int, stop: threading.Event) -> None:
        import requests

        session = requests.Session()
        random = np.random.default_rng(number)
        while not stop.is_set():
            size = self.batch_rows if random.random() < self.batch_share else 1
            start = int(random.integers(0, len(self.rows) - size + 1))
            body = self.rows[start : start + size]
            record = Record(self._now(), size, 0, [], None)
            while record.attempts <= self.retries:
                record.attempts += 1
                sent = time.perf_counter()
                try:
                    answer = session.post(f"{self.url}/predict", json=body, timeout=30)
                    record.statuses.append(answer.status_code)
                    if answer.status_code == 200 and len(answer.json()) == size:
                        record.latency = time.perf_counter() - sent
                        break
                except requests.RequestException:
                    record.statuses.append(0)
                    session = requests.Session()  # a reset connection is not reused
                time.sleep(0.2 * record.attempts)
            self.records.append(record)

    def _watch(self, stop: threading.Event) -> None:
        """Every second: each replica's resident memory, and what /health says."""
        import psutil
        import requests

        while not stop.wait(1.0):
            sample = {}
            for pid in replica_pids():
                try:
                    sample[pid] = psutil.Process(pid).memory_info().rss / 2**20
                except psutil.Error:
                    pass
            self.memory.append((self._now(), sample))
            try:
                answer = requests.get(f"{self.url}/health", timeout=5)
                self.health.append((self._now(), answer.json().get("replicas", {})))
            except (requests.RequestException, ValueError):
                self.health.append((self._now(), {}))

    def summary(self, killed: tuple[float, int] | None = None) -> dict:
        done = [r for r in self.records if r.latency is not None]
        minutes = {}
        for minute in sorted({int(r.started // 60) for r in done}):
            latencies = [r.latency for r in done if int(r.started // 60) == minute]
            minutes[minute] = {
                "requests": len(latencies),
                "p50_ms": 1000 * float(np.percentile(latencies, 50)),
                "p99_ms": 1000 * float(np.percentile(latencies, 99)),
            }
        first_try = [s for r in self.records for s in r.statuses[:1]]
        result = {
            "seconds": self._now(),
            "clients": self.clients,
            "requests": len(self.records),
            "rows": sum(r.rows for r in done),
            "answered": len(done),
            "failed_after_retries": len(self.records) - len(done),
            "first_answers_5xx": sum(1 for s in first_try if s >= 500),
            "answers_5xx": sum(1 for r in self.records for s in r.statuses if s >= 500),
            "answers_4xx": sum(1 for r in self.records for s in r.statuses if 400 <= s < 500),
            "no_answer": sum(1 for r in self.records for s in r.statuses if s == 0),
            "retried": sum(1 for r in self.records if r.attempts > 1),
            "failed_more_than_once": sum(1 for r in self.records if r.attempts > 2),
            "per_minute": minutes,
            **self._memory(killed),
        }
        if killed is not None:
            result["killed_at_s"] = killed[0]
            result["recovered_after_s"] = self._recovery(killed[0])
        return result

    def _memory(self, killed) -> dict:
        """Each replica that lived through the soak: its mean RSS over the first and the last
        10 s (a replica's first seconds, while its process warms up, excluded)."""
        if not self.memory:
            return {}
        dead = {killed[1]} if killed else set()
        lasting = set.intersection(*(set(m) for _, m in self.memory)) - dead
        end = self.memory[-1][0]
        out = {}
        for n, pid in enumerate(sorted(lasting)):
            first = [m[pid] for t, m in self.memory if 5 <= t < 15]
            last = [m[pid] for t, m in self.memory if t >= end - 10]
            if first and last:
                out[f"replica_{n}_rss_mb_first_10s"] = float(np.mean(first))
                out[f"replica_{n}_rss_mb_last_10s"] = float(np.mean(last))
        return out

    def _recovery(self, killed_at: float) -> float | None:
        """Seconds from the kill until /health again shows as many replicas RUNNING, and
        nothing else, as before it."""
        before = [h for t, h in self.health if t < killed_at and h]
        if not before:
            return None
        want = before[-1].get("RUNNING", 0)
        dipped = False
        for t, replicas in self.health:
            if t < killed_at:
                continue
            settled = replicas.get("RUNNING", 0) == want and len(replicas) == 1
            dipped = dipped or not settled
            if dipped and settled:
                return t - killed_at
        return None


def soak_figures(work, smoke: bool = False) -> dict:
    """The bench's section: command=serve with 2 replicas of half a CPU, two minutes of load
    (3 clients; smoke: 5 s), then 30 s of load with a replica SIGKILLed 5 s in (smoke: 15 s, 3 s
    in: long enough for the replacement to be RUNNING)."""
    from bench.probe import replicas_running, until_ready
    from bench.serving import _rows, _train, served

    with served(_train(work), 2, "soak") as (process, url):
        if not until_ready(process, f"{url}/health", 300, replicas_running(2)):
            raise RuntimeError("command=serve did not become healthy")
        rows = _rows(2000)
        load = Soak(url, rows, clients=3).run(seconds=5 if smoke else 120)
        kill = Soak(url, rows, clients=3).run(
            seconds=15 if smoke else 30, kill_at=3 if smoke else 5
        )
    return {"two minutes of load": load, "a replica killed under load": kill}
