"""Waiting for a server the bench or a test started: GET a URL until its answer is ready,
while the server's process lives, up to a deadline."""

import time


def answers_200(answer) -> bool:
    return answer.status_code == 200


def replicas_running(count: int):
    """Ready once /health's JSON shows `count` replicas, all RUNNING."""

    def ready(answer) -> bool:
        try:
            return answer.json().get("replicas") == {"RUNNING": count}
        except ValueError:  # not JSON yet: the proxy answered before the app
            return False

    return ready


def until_ready(process, url: str, seconds: float, ready=answers_200, every: float = 0.5) -> bool:
    """True once GET `url` gives an answer `ready` accepts; False when `process` ends first or
    `seconds` pass (the caller decides how to fail)."""
    import requests

    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if ready(requests.get(url, timeout=2)):
                return True
        except requests.RequestException:  # not listening yet
            pass
        time.sleep(every)
    return False
