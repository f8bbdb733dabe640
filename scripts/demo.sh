#!/usr/bin/env bash
# Set up a virtualenv with gpuci-tui and open the console on the built-in simulated
# organisation. Nothing real is touched: no organisation, keyring entry or config.
# Extra arguments go to `gpuci-tui demo` (e.g. --docker, --agents 8).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GPUCI_VENV:-$PWD/.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q .
exec "$VENV/bin/gpuci-tui" demo "$@"
