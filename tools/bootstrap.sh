#!/usr/bin/env bash
# Set up everything iopilot needs, installing only what is missing.
# Called by `make`; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
say() { printf 'iopilot setup: %s\n' "$*"; }

apt_install() {
    # Debian packages, only when missing and only where we can install them.
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null; then
        say "please install: ${missing[*]} (no apt-get here)"; return 1
    fi
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    say "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# C, C++ and Fortran compilers, MPI and parallel HDF5 for the runtime, its tests,
# the kernels and the corpus of mistake programs.
if command -v dpkg-query >/dev/null; then
    # With them (one apt-get run), the real services of the `iopilot tune` tests:
    # a PostgreSQL server for shared studies and Slurm for trials as jobs; the
    # tests start and stop their own daemons.  Node.js runs Perfetto's trace
    # processor (WebAssembly) that checks `iopilot export perfetto`.
    # libfaketime (faketime) moves a simulated node's wall clock in the test
    # of a job on several "nodes" of this machine.
    apt_install build-essential gfortran pkg-config openmpi-bin libopenmpi-dev libhdf5-openmpi-dev libhdf5-dev hdf5-tools fio faketime chromium chromium-driver \
        postgresql slurm-wlm nodejs
fi

# A Python >= 3.11 that can make virtual environments.
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
    for cand in python3.13 python3.12 python3.11 python3; do
        if command -v "$cand" >/dev/null &&
           "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            PYTHON=$cand; break
        fi
    done
fi
if [ -z "$PYTHON" ]; then
    apt_install python3 python3-venv
    PYTHON=python3
fi
if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
        apt_install python3-venv
    fi
    say "creating $VENV with $("$PYTHON" --version)"
    "$PYTHON" -m venv "$VENV"
fi

say "installing iopilot and its Python dependencies into $VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
say "ready"
