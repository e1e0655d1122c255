#!/usr/bin/env bash
# CI: fedaudit as a user installs it, not as the tests see it (editable, from the checkout).
#   1. build the wheel (pip wheel --no-deps, setuptools in pip's isolated build environment)
#      from a copy of the checkout's files (tracked and untracked, less what .gitignore
#      ignores), so that nothing left in the checkout (build/, *.egg-info) gets into it;
#   2. install it, NOT editable, into a fresh virtual environment: the pinned torch, then the
#      wheel with its dependencies from the package index, as README's "pip install ." does;
#   3. from a folder outside the checkout (the checkout is not on sys.path): import every
#      module of the installed packages and compare them with the checkout's
#      (.ci/wheel_modules.py), then `fedaudit validate quickstart` and a one-round
#      `fedaudit run quickstart` that must leave results.json.
#   bash .ci/wheel_check.sh        # works in a new folder under $TMPDIR or /tmp (KEEP=1 keeps it)
# Prints each step's time; exit code 0 when every step passed, else the failing step's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TORCH="torch==2.14.1 torchvision==0.29.1"  # as the Makefile pins it
export PIP_DISABLE_PIP_VERSION_CHECK=1 FLWR_TELEMETRY_ENABLED=0 RAY_DEDUP_LOGS=0
unset PYTHONPATH
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fedaudit-wheel.XXXXXX")
# the environment holds torch with its CUDA libraries (several GB): removed unless KEEP=1
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
VENV=$WORK/venv
PY=$VENV/bin/python
step() { echo "wheel check: $1 (${SECONDS}s so far)"; }

step "copying the checkout to $WORK/src"
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/outside"
git ls-files -z --cached --others --exclude-standard \
    | tar -C "$ROOT" --null -T - --ignore-failed-read -cf - \
    | tar -C "$WORK/src" -xf -

step "building the wheel"
"${PYTHON:-python3}" -m venv --clear "$VENV"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip wheel -q --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL=$(ls "$WORK"/dist/fedaudit-*.whl)
echo "wheel check: built $(basename "$WHEEL")"

step "installing $TORCH into $VENV"
"$PY" -m pip install -q $TORCH
step "installing the wheel and its dependencies"
"$PY" -m pip install -q "$WHEEL"

step "importing every installed module, from $WORK/outside"
cd "$WORK/outside"
# -I: no PYTHONPATH, no user site, and not the script's folder (the checkout's .ci/) first
"$PY" -I "$ROOT/.ci/wheel_modules.py" "$WORK/src" "$ROOT"

step "fedaudit validate quickstart"
"$VENV/bin/fedaudit" validate quickstart

step "fedaudit run quickstart --set federation.rounds=1"
"$VENV/bin/fedaudit" run quickstart --set federation.rounds=1 --out "$WORK/runs"
RESULTS=$(find "$WORK/runs" -name results.json)
if [ -z "$RESULTS" ]; then
    echo "wheel check: FAIL: the run left no results.json under $WORK/runs" >&2
    exit 1
fi
echo "wheel check: the run left $(ls "$(dirname "$RESULTS")" | tr '\n' ' ')"
step "passed"
