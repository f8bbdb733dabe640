#!/usr/bin/env bash
# The suite's flake proof: run scripts/test.sh N times in a row while every core is kept
# busy by a CPU hog (one busy loop per core, at normal priority), stopping at the first
# red run. A suite that passes only on an idle machine is not green. Each run is the
# parallel one (a test per core and one more, then the serial ones), so the hog's loops and the tests
# share every core.
# Usage: scripts/loadtest.sh [RUNS] [--quick] [pytest args...]     (RUNS defaults to 3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
[ $# -gt 0 ] && shift
hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
  ( while :; do :; done ) &
  hogs+=($!)
done
echo "== CPU hog: ${#hogs[@]} busy loop(s) on $(nproc) core(s)"
for run in $(seq "$runs"); do
  start=$(date +%s)
  echo "== run $run of $runs under load"
  if ! scripts/test.sh "$@"; then
    echo "== run $run of $runs FAILED under load after $(( $(date +%s) - start )) s" >&2
    exit 1
  fi
  echo "== run $run of $runs green in $(( $(date +%s) - start )) s"
done
echo "== $runs of $runs runs green under load"
