#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine, then run it:
# system packages, a virtualenv with the project and its test extras, a Docker
# engine (started here if none answers), lint, types and the tests.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${GPUCI_VENV:-$ROOT/.venv}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '\n== %s\n' "$*"; }

need_apt=()
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

log "virtualenv $VENV"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >/dev/null
"$VENV/bin/pip" install -q -e ".[test]"

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

log "ruff"
"$VENV/bin/ruff" check gpuci_tui tests bench scripts
"$VENV/bin/ruff" format --check gpuci_tui tests bench scripts
log "mypy (strict on the whole gpuci_tui package)"
"$VENV/bin/mypy" gpuci_tui
log "pytest"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=30 "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit $rc
