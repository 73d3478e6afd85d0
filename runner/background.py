"""Work off the run's critical path: a child Python process, niced, that runs calls in the
order they were sent while the run goes on. A 2-core machine training a small model leaves a
core mostly idle; this is how the run spends it on what it would otherwise wait for (MLflow's
2.5 s of imports and its logging, matplotlib's import and the figures).

    child = Background()
    pending = child.call("package.module:function", arg, ...)   # returns at once
    pending.result()                                            # waits for that call only
    child.call("package.module:function", arg, reply=False)     # nothing comes back
    child.sync("package.")                                      # waits for every call so far
    child.close()                                               # sync, then the child ends

Calls are module-level functions named by path, with picklable arguments; a call's exception
comes back as a BackgroundError (a reply=False call's as a line that sync() returns). One
child can serve several users (the figures, MLflow): sync's prefix keeps their failures apart
(runner/commands.py gives the figures their own child when a tracker has one).
`stateful` functions keep what they need in their own module: the child is theirs alone.
On end of input the child runs the functions registered with `at_end` (a run that its driver
abandoned is closed as failed), then leaves without Python's exit hooks.
"""

from __future__ import annotations

import importlib
import os
import pickle
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Literal, overload

_HEADER = struct.Struct("!I")


class BackgroundError(RuntimeError):
    """A call that raised in the child: its type and first line."""


def _write(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    return pickle.loads(stream.read(size))


class Pending:
    """A call's answer, read when asked for (replies come back in the order of the calls)."""

    def __init__(self, child: Background, number: int):
        self.child, self.number = child, number

    def ready(self) -> bool:
        """True when the answer is in (no waiting)."""
        return self.child._collect(self.number, wait=False)

    def result(self) -> Any:
        self.child._collect(self.number, wait=True)
        ok, value = self.child._answers.pop(self.number)
        if not ok:
            raise BackgroundError(value)
        return value


class Background:
    """The driver's side: one child process, calls queued into its stdin."""

    def __init__(self):
        package_root = str(Path(__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        # Niced from its first instruction: the run's own work comes first, and the child takes
        # only what the run leaves idle.
        nice_path = shutil.which("nice")
        nice = [nice_path, "-n", "19"] if nice_path else []
        self._process = subprocess.Popen(
            [*nice, sys.executable, "-m", "runner.background"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._process.stdin is not None and self._process.stdout is not None  # PIPEs
        self._requests, self._replies = self._process.stdin, self._process.stdout
        self._sent = 0  # replies carry the number of the call that asked for them
        self._answers: dict[int, tuple[bool, Any]] = {}
        self._closed = False

    @overload
    def call(self, target: str, *args, reply: Literal[True] = True, **kwargs) -> Pending: ...

    @overload
    def call(self, target: str, *args, reply: Literal[False], **kwargs) -> None: ...

    def call(self, target: str, *args, reply: bool = True, **kwargs) -> Pending | None:
        self._sent += 1
        try:
            _write(self._requests, (self._sent, target, args, kwargs, reply))
        except (BrokenPipeError, ValueError):
            pass  # the child is gone: the call's reply (or close) says so
        return Pending(self, self._sent) if reply else None

    def _collect(self, number: int, wait: bool) -> bool:
        import select

        while number not in self._answers:
            if not wait and not select.select([self._replies], [], [], 0)[0]:
                return False
            try:
                got, ok, value = _read(self._replies)
            except EOFError:
                code = self._process.wait()
                self._answers[number] = (False, f"the background process ended (exit {code})")
                break
            self._answers[got] = (ok, value)
        return True

    def sync(self, prefix: str = "") -> list[str]:
        """Waits for every call sent so far; returns what the reply=False calls whose target
        starts with `prefix` raised since (one line each), or why the child could not say."""
        try:
            return self.call("runner.background:_failures", prefix).result()
        except BackgroundError as error:
            return [str(error)]

    def close(self) -> list[str]:
        """sync(), then the child ends. Closing twice returns nothing more."""
        if self._closed:
            return []
        failures = self.sync()
        self._closed = True
        try:
            self._requests.close()
        except BrokenPipeError:
            pass
        self._process.wait()
        return failures

    def stop(self) -> None:
        """Ends the child now, dropping what is queued (it holds nothing a run needs)."""
        self._closed = True
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()


# A child started before Hydra composed the run (start_early), until the command adopts it.
_early: Background | None = None


def start_early(target: str, *args) -> None:
    """Starts the run's child now with a first call (a warm-up): run.py does this before Hydra
    composes the config when the command line asks for a tracker that logs from here
    (runner/tracking/base.py: start_early), so that the tracker's imports
    overlap Hydra's start as well as the run's. The command takes the child over with
    adopt_early(); a process that never does leaves it at its exit (the child's input ends
    and it goes)."""
    global _early
    _early = Background()
    _early.call(target, *args, reply=False)


def adopt_early() -> Background | None:
    """The child start_early() started, handed over once (None when there is none)."""
    global _early
    child, _early = _early, None
    return child


# --- the child's side ------------------------------------------------------------------------

_FAILURES: list[tuple[str, str]] = []  # (target, what it raised) of reply=False calls
_AT_END: list = []


def at_end(fn) -> None:
    """fn() runs when the driver's input ends (closed, or the driver died)."""
    _AT_END.append(fn)


def _failures(prefix: str) -> list[str]:
    mine = [f for f in _FAILURES if f[0].startswith(prefix)]
    _FAILURES[:] = [f for f in _FAILURES if not f[0].startswith(prefix)]
    return [f"{target.partition(':')[2]}: {error}" for target, error in mine]


def _one_line(error: BaseException) -> str:
    text = str(error).splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    while True:
        try:
            number, target, args, kwargs, reply = _read(requests)
        except EOFError:
            break
        module, _, name = target.partition(":")
        try:
            value = getattr(importlib.import_module(module), name)(*args, **kwargs)
            answer = (number, True, value)
        except Exception as error:  # noqa: BLE001 - handed to the driver, never a traceback
            if not reply:
                _FAILURES.append((target, _one_line(error)))
            answer = (number, False, _one_line(error))
        if reply:
            try:
                _write(replies, answer)
            except BrokenPipeError:  # the driver died mid-call: as at the end of its input
                break
    for fn in _AT_END:
        try:
            fn()
        except Exception as error:  # noqa: BLE001
            print(f"background: {_one_line(error)}", file=sys.stderr)


def main() -> None:
    # Replies go to the real stdout only: whatever a library prints goes to stderr instead.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, replies)
    # Done and said. Python's exit hooks (MLflow's took 0.8 s) would keep the driver waiting.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    # The module's own copy, not __main__'s: the calls' at_end and _failures share its lists.
    from runner.background import main as module_main

    module_main()
