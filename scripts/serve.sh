#!/usr/bin/env bash
# Set up a virtual environment (once) and serve the webhook on the embedded default:
# local certificates in certs/, the shipped policies and the example cluster state.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/infergate serve "$@"
