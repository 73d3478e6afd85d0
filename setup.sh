#!/usr/bin/env bash
# Sets up .venv with everything the runner and its tests need. Idempotent: a second
# run with unchanged dependency files returns at once.
set -euo pipefail
cd "$(dirname "$0")"
root=$(pwd)
PYTHON=${PYTHON:-python3}
stamp=.venv/.setup-stamp
want=$(cat pyproject.toml setup.sh | sha256sum | cut -c1-16)
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi
# Horovod 0.28.1 is built from its sdist, with MPI (Open MPI from Debian's packages, for
# `mpirun` and `horovodrun --mpi`) and gloo (Ray, `horovodrun --gloo`), and two fixes: C++17 in two CMakeLists (it does
# not compile against torch >= 2.1 as released), and process sets' gloo device bound to
# HOROVOD_GLOO_IFACE like the global one (0.28.1 binds them to the hostname's address, which is
# 127.0.0.1 on many machines, so a job across hosts hangs at start). The built wheel is kept
# outside the checkout, under a name that says which fixes it has, so that fresh clones on this
# machine reuse it; .venv/.horovod-build says which build the venv has.
HOROVOD_VERSION=0.28.1
HOROVOD_BUILD=$HOROVOD_VERSION-fixes2-mpi
WHEELS=${TABULAR_RUNNER_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/tabular-runner/wheels}/horovod-$HOROVOD_BUILD
ensure_mpi() {
    if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
        return
    fi
    echo "setup: installing Open MPI (Debian packages openmpi-bin, libopenmpi-dev)"
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
}

# report.html's test opens the page in headless Chromium (Playwright drives Debian's chromium:
# Playwright's own browser download is not reachable from every machine).
ensure_chromium() {
    if command -v chromium >/dev/null 2>&1; then
        return
    fi
    echo "setup: installing Chromium (Debian package chromium)"
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
}

install_horovod() {
    if [[ "$(cat .venv/.horovod-build 2>/dev/null)" == "$HOROVOD_BUILD" ]] && .venv/bin/python -c "import horovod.torch" 2>/dev/null; then
        return
    fi
    local wheel
    wheel=$(ls "$WHEELS"/horovod-$HOROVOD_VERSION-*.whl 2>/dev/null | head -n 1 || true)
    if [[ -z $wheel ]]; then
        echo "setup: building Horovod $HOROVOD_BUILD (once, about 3 minutes)"
        local build
        build=$(mktemp -d)
        .venv/bin/python -m pip download --quiet --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$build"
        tar xzf "$build/horovod-$HOROVOD_VERSION.tar.gz" -C "$build"
        local src=$build/horovod-$HOROVOD_VERSION
        sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
        perl -0pi -e 's/(InitializeForProcessSet\(const GlooContext& global_context,.*?)(device_attr\.iface = gloo_iface_;)/$1gloo_iface_ = global_context.gloo_iface_;\n  $2/s' \
            "$src/horovod/common/gloo/gloo_context.cc"
        grep -q "gloo_iface_ = global_context.gloo_iface_" "$src/horovod/common/gloo/gloo_context.cc" \
            || { echo "setup: the Horovod gloo fix did not apply" >&2; exit 1; }
        mkdir -p "$WHEELS"
        (cd "$src" && HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
            HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2 \
            "$root/.venv/bin/python" -m pip wheel --quiet --no-build-isolation --no-deps . -w "$WHEELS")
        rm -rf "$build"
        wheel=$(ls "$WHEELS"/horovod-$HOROVOD_VERSION-*.whl | head -n 1)
    fi
    # Another build of the same version may be installed: replace it, resolving deps as usual.
    .venv/bin/python -m pip uninstall --quiet --yes horovod 2>/dev/null || true
    "${pip[@]}" "$wheel"
    echo "$HOROVOD_BUILD" > .venv/.horovod-build
}

[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip wheel setuptools
# The CPU torch first, so that no later requirement drags in the CUDA build.
"${pip[@]}" torch==2.13.0
# compat mode: a .pth to this checkout, so the hydra_plugins namespace portion
# (our launchers) imports everywhere, Ray workers included.
"${pip[@]}" -e ".[test,accuracy]" --config-settings editable_mode=compat
# hydra-ray-launcher pins cloudpickle<3, which Dask needs; its `ray` launcher works
# with cloudpickle 3, so it goes in without its pins (docs/stack.md). The same for
# hydra-optuna-sweeper, which pins optuna<3 where Ray Tune's OptunaSearch needs >= 3; it
# runs on optuna 3.6 (tests/test_sweeps.py).
# The full mlflow (server, UI) pins pyarrow<26; its other requirements are in pyproject.toml.
"${pip[@]}" --no-deps hydra-ray-launcher==1.2.2 hydra-optuna-sweeper==1.3.0 mlflow==3.17.2
ensure_mpi
ensure_chromium
install_horovod
echo "$want" > "$stamp"
echo "setup: .venv is ready"
