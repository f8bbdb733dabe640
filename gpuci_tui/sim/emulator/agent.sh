#!/bin/sh
# Azure Pipelines agent emulator for gpuci-tui's simulated organisation (busybox sh).
#
# Honours the env contract of Microsoft's Docker agent start.sh: AZP_URL, AZP_POOL,
# AZP_AGENT_NAME, AZP_TOKEN_FILE (AZP_TOKEN as a fallback), AZP_WORK. It registers with
# replace semantics (like `config.sh --replace`: the registration exists, offline),
# deletes the token file, opens its session (like `run.sh` starting: online), long-polls
# for exactly ONE job, runs it while heartbeating, reports the result and exits 0 (like
# `run.sh --once`). The organisation makes each of the two start-up steps take as long
# as the real agent's (its AgentStartup), so a slot's start-up is realistic.
#
# The PAT never appears on a command line: HTTP requests are written with the shell's
# builtin printf and piped into `nc HOST PORT`; base64 reads the PAT from stdin.
#
# Agent versions: the emulator bakes 4.264.2 (its image's io.gpuci.agent-version label). A
# package mounted at AZP_AGENT_PACKAGE_DIR (default /azp/agent-package; the daemon's agent
# cache) whose .image-agent-version is newer is preferred, as start.sh prefers it for the
# real agent, and that version is reported. When the server would hand it a job but
# requires a newer agent, the poll answers update=VERSION (the AgentRefreshMessage) and the
# emulator goes offline and exits 12: what start.sh makes of run.sh --once's update exit.
#
# Output: the real agent's own lines, behind its UTC timestamp ("2026-01-31 12:00:00Z: "):
# "Listening for Jobs" once the session is open, "Running job: NAME" and "Job NAME completed
# with result: Succeeded|Failed|Canceled" (NAME: the job's pipeline), beside the emulator's own
# plain lines. A job of kind "fake_completed" prints a "completed" line halfway through, as a
# job writing to the container's output could.
#
# Start gate: with AZP_GO_FILE set (the image carries io.gpuci.start-gate=1, as images built from
# dockeragent/ do), it waits after registering until that file exists, saying so in
# dockeragent/start.sh's words ("[start.sh] registered as NAME; waiting for the go file PATH"),
# before it opens its session; a SIGTERM meanwhile leaves it registered and offline (exit 143).
#
# Exit codes: 0 after a job; 12 left to update the agent; 1 configuration failure (bad PAT, unknown pool, organisation
# unreachable at registration) or a lost session; 143 on SIGTERM while idle; 137 when a
# job of kind "oom" makes the kernel kill the agent (run the container with a memory
# limit; SIM_OOM_SIZE, default 1000m, bounds the allocation otherwise). A SIGTERM while a
# job runs is noted and the job runs to its end, is reported, then exit 0 (the supervisor
# disables the agent first, and a GPU job is not cut short by a stop).
#
# gpuci_tui/sim/agent_program.py mirrors this script for the in-process runtime;
# tests/sim/test_agent_parity.py runs both through the same scenarios.
#
# Wire protocol of the private /_sim endpoints: see gpuci_tui/sim/private_api.py.
# shellcheck shell=sh

set -u

log() { printf '%s\n' "$*"; }
# say MESSAGE: one of the real agent's lines, behind its UTC timestamp.
say() { printf '%s: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%SZ')" "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

AGENT_VERSION=4.264.2
PACKAGE_DIR=${AZP_AGENT_PACKAGE_DIR:-/azp/agent-package}
TERMED=0
POLL_PID=
RESP=/tmp/agent-resp.$$
POLL_RESP=/tmp/agent-poll.$$
trap 'TERMED=1' TERM
trap 'TERMED=1' INT

# ------------------------------------------------------------------ configuration
[ -n "${AZP_URL:-}" ] || fail "missing AZP_URL environment variable"
case $AZP_URL in
  http://*) ;;
  *) fail "AZP_URL must look like http://127.0.0.1:PORT (the emulator speaks plain HTTP), got $AZP_URL" ;;
esac
rest=${AZP_URL#http://}
hostport=${rest%%/*}
URL_PATH=${rest#"$hostport"}
URL_PATH=${URL_PATH%/}
HOST=${hostport%%:*}
PORT=${hostport##*:}
[ "$PORT" = "$hostport" ] && PORT=80
POOL=${AZP_POOL:-Default}
HOSTNAME=${HOSTNAME:-$(hostname)}
NAME=${AZP_AGENT_NAME:-$HOSTNAME}
if [ -n "${AZP_WORK:-}" ]; then mkdir -p "$AZP_WORK" 2>/dev/null || true; fi

if [ -z "${AZP_TOKEN_FILE:-}" ]; then
  [ -n "${AZP_TOKEN:-}" ] || fail "missing AZP_TOKEN_FILE (or AZP_TOKEN) environment variable"
  pat=$AZP_TOKEN
  unset AZP_TOKEN
else
  [ -r "$AZP_TOKEN_FILE" ] || fail "cannot read the token file $AZP_TOKEN_FILE"
  pat=
  IFS= read -r pat < "$AZP_TOKEN_FILE" || [ -n "$pat" ]
  pat=$(printf '%s' "$pat" | tr -d '\r\n ')
fi
[ -n "$pat" ] || fail "the token file $AZP_TOKEN_FILE is empty"

# ------------------------------------------------------------------ agent version
# version_gt A B: A is a newer x.y.z than B (busybox sh: no sort -V).
version_gt() {
  a=$1 b=$2
  case $a.$b in *[!0-9.]* | .* | *..* | *.) return 1 ;; esac
  while :; do
    x=${a%%.*} y=${b%%.*}
    [ "$x" -gt "$y" ] && return 0
    [ "$x" -lt "$y" ] && return 1
    [ "$a" = "$x" ] || [ "$b" = "$y" ] && return 1
    a=${a#*.} b=${b#*.}
  done
}
if [ -r "$PACKAGE_DIR/.image-agent-version" ]; then
  pkg_version=
  IFS= read -r pkg_version < "$PACKAGE_DIR/.image-agent-version" || true
  if version_gt "$pkg_version" "$AGENT_VERSION"; then
    log "using agent $pkg_version from the package mounted at $PACKAGE_DIR (the image has $AGENT_VERSION)"
    AGENT_VERSION=$pkg_version
  else
    log "the package mounted at $PACKAGE_DIR ($pkg_version) is not newer than the image's $AGENT_VERSION"
  fi
fi

# ------------------------------------------------------------------ HTTP over nc
# post FILE ROUTE BODY [HEADER]: POST to /_sim/ROUTE; sets CODE, leaves the answer in FILE.
post() {
  len=$(printf '%s' "$3" | wc -c)
  {
    printf 'POST %s/_sim/%s HTTP/1.1\r\nHost: %s:%s\r\n' "$URL_PATH" "$2" "$HOST" "$PORT"
    if [ -n "${4:-}" ]; then printf '%s\r\n' "$4"; fi
    printf 'Content-Type: text/plain\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' \
      "$len" "$3"
  } | nc "$HOST" "$PORT" 2>/dev/null | tr -d '\r' > "$1"
  CODE=$(sed -n '1s/^HTTP\/1\.[01] \([0-9]*\).*/\1/p' "$1")
  [ -n "$CODE" ] || CODE=000
}
# field NAME [FILE]: the value of a NAME=value answer line.
field() { sed -n "s/^$1=//p" "${2:-$RESP}" | head -n 1; }

# ------------------------------------------------------------------ register
# The environment as capabilities (as the real agent reports it). busybox sh, like dash, drops
# names that are not shell identifiers (gpu.product, cuda.driver-version.full) from what its
# children see, so those come from this process's own environment block (bash keeps them).
caps=$({ env; tr '\0' '\n' < /proc/$$/environ 2>/dev/null | grep '^[^=]*[.-][^=]*='; } |
  sed -n -e '/^AZP_TOKEN/d' -e '/^[A-Za-z_][A-Za-z0-9_.-]*=/s/^/cap./p')
auth=$(printf ':%s' "$pat" | base64 | tr -d '\n')
pat=
log "registering agent $NAME in pool $POOL at $AZP_URL"
post "$RESP" register "pool=$POOL
name=$NAME
hostname=$HOSTNAME
version=$AGENT_VERSION
$caps
" "Authorization: Basic $auth"
auth=
# Registered or not, the token is not needed any more: delete it (start.sh does the same).
# GPUCI_EMULATOR_KEEP_TOKEN=1 plays a third-party image that follows the contract but
# never deletes the file (the supervisor must remove it).
if [ -n "${AZP_TOKEN_FILE:-}" ] && [ "${GPUCI_EMULATOR_KEEP_TOKEN:-}" != 1 ]; then rm -f "$AZP_TOKEN_FILE"; fi
case $CODE in
  200) ;;
  000) rm -f "$RESP"; fail "cannot reach $AZP_URL (connection refused or no answer)" ;;
  401 | 203) rm -f "$RESP"; fail "$AZP_URL rejected the PAT ($CODE). Check the token and that it has the Agent Pools (read, manage) scope." ;;
  404) rm -f "$RESP"; fail "agent pool $POOL does not exist in $AZP_URL" ;;
  *) reason=$(field error); rm -f "$RESP"; fail "registration failed: HTTP $CODE $reason" ;;
esac
AGENT_ID=$(field agent_id)
SESSION=$(field session)
if [ -z "$AGENT_ID" ] || [ -z "$SESSION" ]; then
  fail "registration answer not understood (HTTP $CODE)"
fi
log "registered as $NAME (id $AGENT_ID)"

# ------------------------------------------------------------------ the start gate (start.sh's)
if [ -n "${AZP_GO_FILE:-}" ]; then
  log "[start.sh] registered as $NAME; waiting for the go file $AZP_GO_FILE"
  while [ ! -e "$AZP_GO_FILE" ] && [ "$TERMED" = 0 ]; do sleep 0.2; done
fi

go_offline() {
  post "$RESP" offline "agent_id=$AGENT_ID
session=$SESSION
"
}

# ------------------------------------------------------------------ open the session (run.sh)
if [ "$TERMED" = 1 ]; then
  rm -f "$RESP"
  log "SIGTERM before the session was opened: registered, offline"
  exit 143
fi
post "$RESP" session "agent_id=$AGENT_ID
session=$SESSION
"
case $CODE in
  200) ;;
  000) rm -f "$RESP"; fail "cannot reach $AZP_URL to open the session" ;;
  *) reason=$(field error); rm -f "$RESP"; fail "could not open the session: HTTP $CODE $reason" ;;
esac
say "Listening for Jobs"

# ------------------------------------------------------------------ wait for ONE job
lost=0
while :; do
  if [ "$TERMED" = 1 ]; then
    [ -n "$POLL_PID" ] && kill "$POLL_PID" 2>/dev/null
    go_offline
    rm -f "$RESP" "$POLL_RESP"
    log "SIGTERM while idle: went offline"
    exit 143
  fi
  # The long poll runs in the background so that a SIGTERM interrupts `wait` at once.
  # It answers into its own file: a killed poll may still write after we move on.
  (
    post "$POLL_RESP" poll "agent_id=$AGENT_ID
session=$SESSION
timeout=20
"
    printf '%s\n' "$CODE" > "$POLL_RESP.code"
  ) &
  POLL_PID=$!
  wait "$POLL_PID"
  [ "$TERMED" = 1 ] && continue
  POLL_PID=
  CODE=$(cat "$POLL_RESP.code" 2>/dev/null || echo 000)
  rm -f "$POLL_RESP.code"
  case $CODE in
    200)
      if [ "$lost" = 1 ]; then log "organisation reachable again"; lost=0; fi
      UPDATE=$(field update "$POLL_RESP")
      if [ -n "$UPDATE" ]; then
        rm -f "$POLL_RESP"
        log "the server requires agent $UPDATE (this one is $AGENT_VERSION): leaving to update"
        go_offline
        rm -f "$RESP"
        exit 12
      fi
      JOB=$(field job "$POLL_RESP")
      [ -n "$JOB" ] && [ "$JOB" != none ] && break
      ;;
    409 | 404)
      reason=$(field error "$POLL_RESP")
      rm -f "$RESP" "$POLL_RESP"
      fail "the agent session ended: $reason"
      ;;
    *)
      if [ "$lost" = 0 ]; then
        if [ "$CODE" = 000 ]; then why="no answer"; else why="HTTP $CODE"; fi
        log "cannot reach $AZP_URL ($why); retrying"
        lost=1
      fi
      sleep 1
      ;;
  esac
done
# ------------------------------------------------------------------ run it
KIND=$(field kind "$POLL_RESP")
LEFT=$(field duration_ms "$POLL_RESP")
RESULT=$(field result "$POLL_RESP")
PIPELINE=$(field pipeline "$POLL_RESP")
say "Running job: $PIPELINE"
log "job $JOB started ($PIPELINE $(field run "$POLL_RESP"))"
rm -f "$POLL_RESP"
NOTED=0
# note_term: say once that a SIGTERM came and the job still runs to its end.
note_term() {
  if [ "$TERMED" = 1 ] && [ "$NOTED" = 0 ]; then
    log "SIGTERM received: finishing job $JOB first"
    NOTED=1
  fi
}
note_term

if [ "$KIND" = oom ]; then
  log "job $JOB allocates memory until the kernel stops it"
  # The shell itself buffers the command substitution, so it is the biggest process of the
  # container and the OOM killer takes the whole agent down (exit 137, OOMKilled), as when a
  # training job exhausts a container's memory limit. Without a limit it gives up at the size.
  : "$(head -c "${SIM_OOM_SIZE:-1000m}" /dev/zero | tr '\0' x)"
  log "job $JOB was not stopped by the kernel (no memory limit?): reporting it as failed"
  RESULT=failed
  LEFT=0
fi
[ "$KIND" = fail ] && RESULT=failed
FAKE_AT=-1
[ "$KIND" = fake_completed ] && FAKE_AT=$((LEFT / 2))

while [ "${LEFT:-0}" -gt 0 ]; do
  step=1000
  [ "$LEFT" -lt "$step" ] && step=$LEFT
  sleep "$((step / 1000)).$(printf '%03d' $((step % 1000)))"
  LEFT=$((LEFT - step))
  if [ "$FAKE_AT" -ge 0 ] && [ "$LEFT" -le "$FAKE_AT" ]; then
    FAKE_AT=-1
    say "Job $PIPELINE completed with result: Succeeded"
  fi
  note_term
  post "$RESP" heartbeat "agent_id=$AGENT_ID
session=$SESSION
request_id=$JOB
"
  if [ "$CODE" = 409 ]; then
    reason=$(field error)
    rm -f "$RESP"
    fail "job $JOB lost its agent session: $reason"
  fi
  if [ "$(field cancel)" = 1 ]; then
    log "job $JOB was canceled by the server"
    RESULT=canceled
    break
  fi
done

note_term
# The real agent prints this as its job's worker ends, before it reports the result.
case $RESULT in
  succeeded) SAID=Succeeded ;;
  failed) SAID=Failed ;;
  canceled) SAID=Canceled ;;
  *) SAID=$RESULT ;;
esac
say "Job $PIPELINE completed with result: $SAID"
post "$RESP" finish "agent_id=$AGENT_ID
session=$SESSION
request_id=$JOB
result=$RESULT
"
case $CODE in
  200) ;;
  409) reason=$(field error); rm -f "$RESP"; fail "job $JOB lost its agent session: $reason" ;;
  000) log "could not report job $JOB: cannot reach $AZP_URL" ;;
  *) log "could not report job $JOB (HTTP $CODE)" ;;
esac
log "job $JOB $RESULT"
go_offline
rm -f "$RESP"
exit 0
