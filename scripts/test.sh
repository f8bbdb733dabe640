#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine, then run it:
# system packages, a virtualenv with the project and its test extras, a Docker
# engine (started here if none answers), lint, types and the tests.
#
# The tests run several at once (pytest-xdist), one more than there are cores: the drills
# spend most of their time waiting for containers and daemons, and on 2 cores 3 at once
# took 15 minutes where 2 took 28. Then the few that cannot share the machine (marked
# serial, each saying why) run alone.
#
# Usage: scripts/test.sh [--quick] [pytest args...]
#   --quick  the quick tier, for development: only the tests that need no component
#            (no Docker engine, terminal, keyring, sshd, registry, daemon process or
#            root: tests/components.py), after lint and types; no apt, no engine.
#   pytest args go to both pytest runs (the parallel one and the serial one).
#   GPUCI_TEST_WORKERS: how many tests run at once (default: cores + 1; --quick: twice the
#   cores: its host and Pilot tests wait on real timers much of the time; on 2 cores 2
#   workers took 5 min 11 s, 4 took 3 min 35 s, 6 no less and flakier).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${GPUCI_VENV:-$ROOT/.venv}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
QUICK=0
if [ "${1:-}" = "--quick" ]; then
  QUICK=1
  shift
fi
WORKERS=${GPUCI_TEST_WORKERS:-$(( QUICK ? 2 * $(nproc) : $(nproc) + 1 ))}

log() { printf '\n== %s\n' "$*"; }

install_system_packages() {
  local need_apt=()
  for pair in docker:docker.io dockerd:docker.io busybox:busybox-static tmux:tmux gcc:gcc \
              gnome-keyring-daemon:gnome-keyring dbus-run-session:dbus secret-tool:libsecret-tools \
              rsvg-convert:librsvg2-bin curl:curl jq:jq setpriv:util-linux \
              ssh:openssh-client ssh-keygen:openssh-client sshd:openssh-server \
              docker-registry:docker-registry htpasswd:apache2-utils; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
  done
  # Static busybox is what the emulator image is built from; the dynamic one would not run in it.
  if command -v busybox >/dev/null 2>&1 && ! file -L "$(command -v busybox)" 2>/dev/null | grep -q static; then
    need_apt+=(busybox-static)
  fi
  command -v file >/dev/null 2>&1 || need_apt+=(file)
  if [ ${#need_apt[@]} -gt 0 ]; then
    log "apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
}

start_docker_engine() {
  log "Docker engine"
  if ! docker info >/dev/null 2>&1; then
    # No default bridge: test containers use host networking and reach only 127.0.0.1.
    # setsid: the engine outlives this script's process group (a runner or a terminal that
    # kills the group at the end, or at a timeout, would otherwise take the engine with it).
    $SUDO setsid sh -c 'nohup dockerd --bridge=none --iptables=false --ip-masq=false >/tmp/gpuci-dockerd.log 2>&1 &' </dev/null
    for _ in $(seq 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/gpuci-dockerd.log" >&2; tail -20 /tmp/gpuci-dockerd.log >&2; exit 1; }
  fi
  docker version --format 'engine {{.Server.Version}} (API {{.Server.APIVersion}})'
}

# One pytest run; its exit status (5: it collected no tests).
run_pytest() {
  local tier=()
  [ $QUICK -eq 0 ] || tier=(--quick)
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=30 "${tier[@]}" "$@"
}

[ $QUICK -eq 1 ] || install_system_packages

# The project and its test extras, installed again only when pyproject.toml changed (the
# stamp holds its hash): a reinstall that changes nothing took 8 s of every quick run.
install_project() {
  local stamp="$VENV/.gpuci-installed" want
  want=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "up to date (pyproject.toml unchanged since the last install)"
    return
  fi
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null
  "$VENV/bin/pip" install -q -e ".[test]"
  echo "$want" >"$stamp"
}

log "virtualenv $VENV"
install_project

[ $QUICK -eq 1 ] || start_docker_engine

# Python writes its bytecode caches (__pycache__, ignored by git), pytest its rewritten test
# modules among them: with PYTHONDONTWRITEBYTECODE set, every worker of every run compiled
# the package and rewrote the asserts of 300 test modules again (6 of its 9 s of collection).
unset PYTHONDONTWRITEBYTECODE

log "ruff"
"$VENV/bin/ruff" check gpuci_tui tests bench scripts
"$VENV/bin/ruff" format --check gpuci_tui tests bench scripts

# --quick: mypy runs while the tests do (its report follows theirs): the workers spend much
# of their time waiting on timers, and a cold mypy takes a core for a quarter of a minute.
# The full run keeps it first: its drills are not given a busier machine than they need.
MYPY_PID=""
if [ $QUICK -eq 1 ]; then
  log "mypy (strict on the whole gpuci_tui package), while the tests run"
  MYPY_OUT=$(mktemp)
  "$VENV/bin/mypy" gpuci_tui >"$MYPY_OUT" 2>&1 &
  MYPY_PID=$!
else
  log "mypy (strict on the whole gpuci_tui package)"
  "$VENV/bin/mypy" gpuci_tui
fi

log "pytest: $WORKERS tests at once$([ $QUICK -eq 1 ] && echo ", the quick tier")"
rc_parallel=0
run_pytest -n "$WORKERS" --dist worksteal -m "not serial" "$@" || rc_parallel=$?

rc_mypy=0
if [ -n "$MYPY_PID" ]; then
  log "mypy (strict on the whole gpuci_tui package)"
  wait "$MYPY_PID" || rc_mypy=$?
  cat "$MYPY_OUT"
  rm -f "$MYPY_OUT"
fi
log "pytest: the serial tests, one at a time$([ $QUICK -eq 1 ] && echo ", the quick tier")"
rc_serial=0
run_pytest -p no:xdist -m serial "$@" || rc_serial=$?

if [ $rc_parallel -eq 5 ] && [ $rc_serial -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
[ "$rc_mypy" -eq 0 ] || exit "$rc_mypy"
for rc in $rc_parallel $rc_serial; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    exit "$rc"
  fi
done
