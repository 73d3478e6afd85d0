#!/usr/bin/env bash
# Sets up .venv with everything the runner and its tests need. Idempotent: a second
# run with unchanged dependency files returns at once.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
stamp=.venv/.setup-stamp
want=$(cat pyproject.toml setup.sh | sha256sum | cut -c1-16)
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi
[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip wheel setuptools
# The CPU torch first, so that no later requirement drags in the CUDA build.
"${pip[@]}" torch==2.13.0
"${pip[@]}" -e ".[test]"
echo "$want" > "$stamp"
echo "setup: .venv is ready"
