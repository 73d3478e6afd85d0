"""`python run.py ...` for the tests, without paying Python's imports on every call.

A test suite runs the CLI about a hundred times, and each call spent 2-3 s importing torch,
pandas, pyarrow, Hydra, scikit-learn and LightGBM before reading its arguments. This process imports them once, then
for each call forks a child that runs run.py as `python run.py` does (runpy, as __main__,
with the call's argv, cwd, environment and its own stdout/stderr files) and exits with its
status. The child is a real process of its own: exit codes, stderr, atexit hooks, Ray and
Horovod starting from it, signals to it, are those of the command.

Protocol, one JSON object per line: the client sends {args, cwd, env, stdout, stderr}; this
process answers {pid} when the child is forked, then {returncode} when it has ended.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a run imports first (-X importtime on run.py). None of it runs OpenMP or any work on a
# thread before the fork; OpenBLAS's idle pool threads are re-made by its own fork handler.
WARM = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "torch",
    "hydra",
    "omegaconf",
    "sklearn",
    "lightgbm",
)


def serve(requests, replies) -> None:
    import importlib

    sys.path.insert(0, str(ROOT))
    for name in WARM:
        importlib.import_module(name)
    importlib.import_module("runner.config")
    for line in requests:
        call = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(call)  # never returns
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


def run_child(call: dict) -> None:
    os.setpgid(0, 0)  # its own group: a timeout stops it and whatever it started
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    for fd, path in ((1, call["stdout"]), (2, call["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(call["cwd"])
    sys.argv = [str(ROOT / "run.py"), *call["args"]]
    # As `python run.py` with this call's environment has it: the script's folder, then the
    # call's PYTHONPATH, then the rest (neither this process's PYTHONPATH nor tests/).
    own = {str(ROOT), str(Path(__file__).resolve().parent), *_entries(os.environ)}
    os.environ.clear()
    os.environ.update(call["env"])
    sys.path[:] = [str(ROOT), *_entries(call["env"]), *(p for p in sys.path if p not in own)]
    code = 0
    try:
        runpy.run_path(str(ROOT / "run.py"), run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        if exit_.code is not None and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    # The interpreter's exit, less freeing every module's objects (torch's and pandas' are
    # loaded here, where a failing `python run.py` may not have imported them yet).
    from runner.fast_start import exit_now

    exit_now(code)


def _entries(env) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
