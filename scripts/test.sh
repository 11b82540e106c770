#!/usr/bin/env bash
# Run the whole test suite (arguments go to pytest). Creates .venv/ and installs the project
# with its test dependencies only when needed (scripts/lib/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/venv.sh
ensure_venv test
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests (exit 5): nothing was tested" >&2
fi
exit "$status"
