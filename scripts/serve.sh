#!/usr/bin/env bash
# Serve the webhook on the embedded default: local certificates in certs/, the shipped
# policies and the example cluster state. Creates .venv/ and installs into it only when
# needed (scripts/lib/venv.sh), so a second start works offline.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/venv.sh
ensure_venv
exec .venv/bin/infergate serve "$@"
