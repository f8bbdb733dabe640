#!/bin/sh
# Run a command with a real, unlocked Secret Service (gnome-keyring) on a private D-Bus.
#
# Usage:   dbus-run-session -- scripts/kr-session.sh COMMAND [ARGS...]
# Env:     KEYRING_TEST_PASSWORD  unlock password (default "test"); a fresh HOME gets a new
#                                 login keyring with it, an existing one must match it.
#          KR_SESSION_VERBOSE=1   keep the daemon's stderr (its "already registered" warnings
#                                 are harmless noise otherwise).
#
# Headless machines and SSH logins have no Secret Service, so tests and operators use this
# wrapper. The daemon runs in the foreground as our child and is killed by its PID: started
# with a plain --unlock it would fork away and outlive the D-Bus session.
set -eu

if [ "$#" -eq 0 ]; then
    echo "usage: dbus-run-session -- $0 COMMAND [ARGS...]" >&2
    exit 2
fi
if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
    echo "kr-session.sh: no D-Bus session; run it as: dbus-run-session -- $0 $*" >&2
    exit 2
fi
for tool in gnome-keyring-daemon dbus-send; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "kr-session.sh: $tool is missing; install it: apt-get install gnome-keyring dbus" >&2
        exit 2
    fi
done

if [ "${KR_SESSION_VERBOSE:-0}" = 1 ]; then daemon_err=/dev/stderr; else daemon_err=/dev/null; fi
printf '%s' "${KEYRING_TEST_PASSWORD:-test}" |
    gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>"$daemon_err" &
gkd=$!
trap 'kill "$gkd" 2>/dev/null || true' EXIT INT TERM

# Wait (up to 5 s) until the daemon owns the Secret Service name on the bus.
ready=0
for _ in $(seq 100); do
    if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null |
        grep -q 'boolean true'; then
        ready=1
        break
    fi
    if ! kill -0 "$gkd" 2>/dev/null; then
        break
    fi
    sleep 0.05
done
if [ "$ready" != 1 ]; then
    echo "kr-session.sh: gnome-keyring-daemon did not provide org.freedesktop.secrets" \
        "(rerun with KR_SESSION_VERBOSE=1 to see why)" >&2
    exit 3
fi

rc=0
"$@" || rc=$?
kill "$gkd" 2>/dev/null || true
wait "$gkd" 2>/dev/null || true
trap - EXIT INT TERM
exit "$rc"
