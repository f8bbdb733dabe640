#!/usr/bin/env bash
# Entry point of a gpuci-tui agent container: register one Azure Pipelines
# agent, run exactly one job (run.sh --once), exit. docs/dockeragent.md explains
# every choice made here; gpuci_tui/core/docker/agent_exit.py mirrors the exit codes.
#
# Environment (set by gpuci-tui's supervisor):
#   AZP_URL          organisation URL, e.g. https://dev.azure.com/ORG (required)
#   AZP_POOL         agent pool (default: Default)
#   AZP_AGENT_NAME   agent name (default: the container's host name)
#   AZP_TOKEN_FILE   file holding the PAT, or a Microsoft Entra access token of
#                    the supervisor's service principal / managed identity (valid
#                    for about an hour; Azure DevOps takes it where it takes a
#                    PAT, so it goes to --auth pat too); default /run/azp/token;
#                    read once, deleted before anything else runs
#   AZP_WORK         work directory (default: _work, inside the agent directory)
#   AZP_GO_FILE      the start gate (the image's label io.gpuci.start-gate=1): once
#                    registered, wait until this file exists before the agent may
#                    start (run.sh), so it can take no job before the supervisor has
#                    set its registration's flag; gpuci-tui sets /run/azp/go and
#                    puts the file there. Unset or empty: no gate (docker run by
#                    hand, Kubernetes)
#   GPUCI_INSTANCE, GPUCI_HOST  the marker of the registering gpuci-tui instance and
#                    host; left in the environment so the agent reports them
#   AZP_AUTH         pat (default: the token file holds a PAT or an Entra access
#                    token) | service-principal (it holds the client secret of
#                    AZP_CLIENT_ID in tenant AZP_TENANT_ID: the agent's own
#                    --auth SP, agent 3.227.1 or later; for Kubernetes, where no
#                    supervisor hands out short-lived tokens) | workload-identity
#                    (Kubernetes with Azure Workload Identity: no token file;
#                    the pod's federated token, AZURE_FEDERATED_TOKEN_FILE, is
#                    exchanged for an Azure DevOps access token; needs curl, jq)
# Knobs:
#   AZP_AGENT_SOURCE        where the image has the agent (default: /azp/agent)
#   AZP_AGENT_DIR           where to run it (default: AZP_AGENT_SOURCE); another
#                           path (a host directory mounted at the same path, for
#                           container jobs) gets a copy of the agent
#   AZP_AGENT_PACKAGE_DIR   a newer agent package the supervisor mounts read-only
#                           (default: /azp/agent-package); preferred to the
#                           image's agent when its .image-agent-version is newer
#   AZP_AGENT_USER          user that runs config.sh/run.sh (default: agent)
#   AZP_DOCKER_SOCKET       Docker socket whose group the user joins when it is
#                           mounted (default: /var/run/docker.sock)
#   AZP_RUN_AS_ROOT=1       run the agent and its jobs as root (not recommended)
#   AZP_SKIP_VERSION_CHECK=1  do not compare the agent with the server's version
#   AZP_TEST_SKIP_PRIVDROP=1  tests only: stay root without allowing the real
#                             agent to run as root (it then refuses to start)
set -euo pipefail

# Exit codes: keep equal to gpuci_tui/core/docker/agent_exit.py.
readonly EXIT_AGENT_ERROR=1 EXIT_RETRYABLE=2 EXIT_CONFIG_FAILED=10 EXIT_TOKEN_MISSING=11
readonly EXIT_AGENT_UPDATING=12 EXIT_BAD_SETUP=13

log() { printf '[start.sh] %s\n' "$*"; }
fail() {
    local code=$1
    shift
    printf '[start.sh] ERROR: %s\n' "$*" >&2
    exit "$code"
}

# ----------------------------------------------------------------- signals
# A signal is passed on as SIGTERM to the agent listener (the child of
# run.sh/config.sh): run.sh does not forward signals itself, and killing run.sh
# alone would orphan the listener. SIGTERM, not SIGINT, because background
# children of a non-interactive shell start with SIGINT ignored. A listener
# with a running job cancels it and reports it as cancelled before exiting; an
# idle one just goes offline.
child=""
received=""
forwarded=""

# shellcheck disable=SC2317,SC2329 # reached from the trap below
children_of() {
    local parent=$1 stat rest fields p task kids
    # The kernel's own list when it keeps one (CONFIG_PROC_CHILDREN): exact, and cheap on
    # a loaded host, where scanning every process of /proc took seconds before the
    # signal was passed on.
    if [[ -r /proc/$parent/task/$parent/children ]]; then
        for task in /proc/"$parent"/task/*/children; do
            kids=()
            read -r -a kids <"$task" 2>/dev/null || true  # one line, no newline at its end
            ((${#kids[@]} == 0)) || printf '%s\n' "${kids[@]}"
        done
        return 0
    fi
    for p in /proc/[0-9]*; do
        { read -r stat <"$p/stat"; } 2>/dev/null || continue
        rest=${stat##*) }  # the command name may contain spaces or ")"
        read -r -a fields <<<"$rest"
        [[ ${fields[1]} == "$parent" ]] && printf '%s\n' "${p#/proc/}"
    done
    return 0
}

# shellcheck disable=SC2317,SC2329 # reached from the trap below
forward() {
    local pids
    [[ -n $child ]] || return 0
    forwarded=$child
    pids=$(children_of "$child")
    log "received SIG$1: stopping the agent (a running job is cancelled and reported as such)"
    # shellcheck disable=SC2086 # one PID per word
    kill -s TERM ${pids:-$child} 2>/dev/null || true
}

# shellcheck disable=SC2317,SC2329 # reached from the trap below
on_signal() {
    received=$1
    forward "$1"
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

# Wait for $child; a trapped signal interrupts `wait`, so wait again until the
# child has really exited. Sets $rc.
wait_child() {
    while :; do
        # A signal that came between starting the child and `child=$!`.
        if [[ -n $received && $forwarded != "$child" ]]; then
            forward "$received"
        fi
        rc=0
        wait "$child" || rc=$?
        if ((rc > 128)) && [[ -n $received ]] && kill -0 "$child" 2>/dev/null; then
            continue
        fi
        break
    done
    child=""
}

exit_if_signalled() {
    case $received in
        TERM) log "stopped by SIGTERM"; exit 143 ;;
        INT) log "stopped by SIGINT"; exit 130 ;;
    esac
}

# ----------------------------------------------------------------- inputs
url=${AZP_URL:-}
url=${url%/}
pool=${AZP_POOL:-Default}
name=${AZP_AGENT_NAME:-$HOSTNAME}
token_file=${AZP_TOKEN_FILE:-/run/azp/token}
work=${AZP_WORK:-_work}
agent_source=${AZP_AGENT_SOURCE:-/azp/agent}
agent_dir=${AZP_AGENT_DIR:-$agent_source}
package_dir=${AZP_AGENT_PACKAGE_DIR:-/azp/agent-package}
docker_socket=${AZP_DOCKER_SOCKET:-/var/run/docker.sock}
agent_user=${AZP_AGENT_USER:-agent}
run_as_root=${AZP_RUN_AS_ROOT:-}
skip_version_check=${AZP_SKIP_VERSION_CHECK:-}
test_skip_privdrop=${AZP_TEST_SKIP_PRIVDROP:-}
legacy_token=${AZP_TOKEN:-}
auth=${AZP_AUTH:-pat}
go_file=${AZP_GO_FILE:-}
client_id=${AZP_CLIENT_ID:-}
tenant_id=${AZP_TENANT_ID:-}

# None of these may reach the agent's capabilities or a job's environment.
# GPUCI_INSTANCE and GPUCI_HOST are deliberately not in the list: they are the
# marker the agent reports as capabilities, by which gpuci-tui tells its own
# stale registrations from other hosts' (gpuci_tui/core/engine/stale.py). The slot's
# GPU facts (gpu.product, cuda.*: names bash passes on, sh would drop) must reach
# them too, so never list them.
ignore="AZP_URL,AZP_POOL,AZP_AGENT_NAME,AZP_TOKEN,AZP_TOKEN_FILE,AZP_WORK,AZP_AGENT_DIR"
ignore+=",AZP_AGENT_SOURCE,AZP_AGENT_USER,AZP_DOCKER_SOCKET,AZP_RUN_AS_ROOT"
ignore+=",AZP_SKIP_VERSION_CHECK,AZP_TEST_SKIP_PRIVDROP,AZP_AUTH,AZP_CLIENT_ID,AZP_TENANT_ID"
ignore+=",AZP_AGENT_PACKAGE_DIR,AZP_AGENT_PACKAGE_VERSION,AZP_GO_FILE"
ignore+=",VSTS_AGENT_INPUT_TOKEN,VSTS_AGENT_INPUT_CLIENTSECRET,VSO_AGENT_IGNORE"
export VSO_AGENT_IGNORE="${VSO_AGENT_IGNORE:+$VSO_AGENT_IGNORE,}$ignore"
unset AZP_URL AZP_POOL AZP_AGENT_NAME AZP_TOKEN AZP_TOKEN_FILE AZP_WORK AZP_AGENT_DIR \
    AZP_AGENT_SOURCE AZP_AGENT_USER AZP_DOCKER_SOCKET AZP_RUN_AS_ROOT AZP_SKIP_VERSION_CHECK \
    AZP_TEST_SKIP_PRIVDROP AZP_AUTH AZP_CLIENT_ID AZP_TENANT_ID AZP_AGENT_PACKAGE_DIR \
    AZP_AGENT_PACKAGE_VERSION AZP_GO_FILE

[[ -n $url ]] || fail $EXIT_BAD_SETUP "AZP_URL is not set: it must name the organisation, e.g. https://dev.azure.com/ORG."
case $auth in
    pat) ;;
    service-principal)
        [[ -n $client_id && -n $tenant_id ]] ||
            fail $EXIT_BAD_SETUP "AZP_AUTH=service-principal needs AZP_CLIENT_ID and AZP_TENANT_ID." ;;
    workload-identity)
        [[ -n ${AZURE_FEDERATED_TOKEN_FILE:-} && -n ${AZURE_CLIENT_ID:-} && -n ${AZURE_TENANT_ID:-} ]] ||
            fail $EXIT_BAD_SETUP "AZP_AUTH=workload-identity needs AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE, which Azure Workload Identity's webhook sets: label the pod azure.workload.identity/use=true and run it under the federated service account." ;;
    *) fail $EXIT_BAD_SETUP "AZP_AUTH=$auth is not one of pat, service-principal, workload-identity." ;;
esac

# ----------------------------------------------------------------- token
# Workload identity: the pod's federated token, exchanged for an Azure DevOps
# access token (about an hour), which then registers like a PAT.
exchange_federated_token() {
    if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
        fail $EXIT_BAD_SETUP "AZP_AUTH=workload-identity needs curl and jq in the image."
    fi
    local authority=${AZURE_AUTHORITY_HOST:-https://login.microsoftonline.com/} assertion answer why
    assertion=$(<"$AZURE_FEDERATED_TOKEN_FILE")
    # The assertion goes to curl on stdin (a config file), never on its command line.
    if ! answer=$(printf 'data-urlencode = "client_assertion=%s"\n' "$assertion" |
        curl --config - --silent --show-error --max-time 20 \
            --data-urlencode "grant_type=client_credentials" \
            --data-urlencode "client_id=$AZURE_CLIENT_ID" \
            --data-urlencode "client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer" \
            --data-urlencode "scope=499b84ac-1321-427f-aa17-267ca6975798/.default" \
            "${authority%/}/$AZURE_TENANT_ID/oauth2/v2.0/token" 2>&1); then
        fail $EXIT_RETRYABLE "Cannot reach Microsoft Entra at ${authority%/} (${answer:-no answer})."
    fi
    token=$(jq -r '.access_token // empty' <<<"$answer" 2>/dev/null) || token=""
    if [[ -z $token ]]; then
        why=$(jq -r '.error_description // .error // empty' <<<"$answer" 2>/dev/null | head -n 1)
        fail $EXIT_CONFIG_FAILED "Microsoft Entra refused the workload identity's sign-in: ${why:-no reason given}. Check the federated credential of $AZURE_CLIENT_ID."
    fi
}

if [[ $auth == workload-identity ]]; then
    exchange_federated_token
    auth=pat  # Azure DevOps takes the access token where it takes a PAT
elif [[ -n $legacy_token ]]; then
    log "WARNING: the PAT came in the AZP_TOKEN variable, which 'docker inspect' shows to anyone with Docker access; deliver it as a file (AZP_TOKEN_FILE) instead."
    token=$legacy_token
else
    [[ -f $token_file && -r $token_file ]] ||
        fail $EXIT_TOKEN_MISSING "The token file $token_file does not exist or cannot be read: the PAT (or access token) was not delivered into the container."
    token=$(<"$token_file")
fi
unset legacy_token
token=${token//[$'\t\r\n ']/}
# Delete it at once: a job must never find it, even when it runs as root.
rm -f -- "$token_file" 2>/dev/null || log "WARNING: could not delete $token_file."
[[ -n $token ]] || fail $EXIT_TOKEN_MISSING "The token file $token_file is empty: the PAT (or access token) was not delivered into the container."

# ----------------------------------------------------------------- newer agent package
# When the organisation requires a newer agent than the image bakes, a --once
# agent would spend its one run updating itself and leave (exit 12). The
# supervisor then fetches the required package once, verifies its SHA-256 and
# mounts it read-only here; it is preferred when it is newer than the baked one,
# and copied into the agent directory below (the agent writes into its own
# directory, so it cannot run from the read-only mount).
version_gt() {
    [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
    [[ $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 0 # an unknown baked version is older
    [[ $1 != "$2" && $(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1) == "$1" ]]
}
if [[ -r $package_dir/.image-agent-version && -x $package_dir/config.sh && -x $package_dir/run.sh ]]; then
    offered=$(<"$package_dir/.image-agent-version")
    baked=$(cat "$agent_source/.image-agent-version" 2>/dev/null) || baked=""
    if version_gt "$offered" "$baked"; then
        log "using agent $offered from the package mounted at $package_dir (the image has ${baked:-an unknown version}); rebuild the image to save this copy"
        agent_source=$package_dir
    else
        log "the agent package at $package_dir ($offered) is not newer than the image's ${baked:-agent}; using the image's"
    fi
fi

# ----------------------------------------------------------------- agent directory
# A newer package (above) is copied into the agent directory the same way.
# Container jobs through the host's Docker socket need the agent's directories
# at the same path on the host (the host's daemon mounts them into the job
# container). Then AZP_AGENT_DIR names such a host-mounted directory: the baked
# agent is copied there once per version, and the previous container's
# registration files are removed so config.sh can register afresh.
synced=""
if [[ $agent_dir != "$agent_source" ]]; then
    want=$(cat "$agent_source/.image-agent-version" 2>/dev/null) || want=unknown
    have=$(cat "$agent_dir/.image-agent-version" 2>/dev/null) || have=none
    if [[ $want != "$have" || ! -x $agent_dir/config.sh ]]; then
        log "installing agent $want from $agent_source into $agent_dir"
        # Another version's binaries must not mix with these (bin/ and externals/ are per version).
        if ! { mkdir -p -- "$agent_dir" && rm -rf -- "${agent_dir:?}/bin" "${agent_dir:?}/externals" &&
            cp -a -- "$agent_source/." "$agent_dir/"; }; then
            fail $EXIT_BAD_SETUP "Cannot install the agent into $agent_dir (is it mounted writable?)."
        fi
    fi
    rm -f -- "$agent_dir/.agent" "$agent_dir/.credentials" "$agent_dir/.credentials_rsaparams"
    synced=1
fi
[[ -x $agent_dir/config.sh && -x $agent_dir/run.sh ]] ||
    fail $EXIT_BAD_SETUP "No Azure Pipelines agent in $agent_dir (config.sh/run.sh missing): the image is incomplete or AZP_AGENT_DIR is wrong."

# ----------------------------------------------------------------- user
as_user=()
socket_gid=""
if [[ -S $docker_socket ]]; then
    socket_gid=$(stat -c %g -- "$docker_socket")
    log "WARNING: the Docker socket is mounted: every job can control the host's Docker, which is root-equivalent access to the host."
fi
if [[ $(id -u) == 0 ]]; then
    if [[ $run_as_root == 1 ]]; then
        log "WARNING: AZP_RUN_AS_ROOT=1: the agent and every job run as root in this container."
        export AGENT_ALLOW_RUNASROOT=1
    elif [[ $test_skip_privdrop == 1 ]]; then
        log "AZP_TEST_SKIP_PRIVDROP=1: staying root (tests only; a real agent refuses to run as root)."
    else
        entry=$(getent passwd "$agent_user") ||
            fail $EXIT_BAD_SETUP "User '$agent_user' does not exist in the image (set AZP_AGENT_USER or rebuild the image)."
        IFS=: read -r _ _ uid gid _ home _ <<<"$entry"
        export HOME=$home USER=$agent_user LOGNAME=$agent_user
        # The user's groups, plus the Docker socket's group when it is mounted,
        # without editing /etc/group: the socket's gid differs from host to host.
        groups=$(id -G -- "$agent_user" | tr ' ' ',')
        groups+=${socket_gid:+,$socket_gid}
        as_user=(setpriv --reuid="$uid" --regid="$gid" --groups="$groups")
        # The work directory may be a mounted or fresh path outside the agent directory.
        work_path=$work
        [[ $work_path == /* ]] || work_path=$agent_dir/$work
        if ! { mkdir -p -- "$work_path" && chown "$uid:$gid" -- "$work_path"; }; then
            fail $EXIT_BAD_SETUP "Cannot create the work directory $work_path for user $agent_user."
        fi
        if [[ -n $synced ]] && ! chown -R "$uid:$gid" -- "$agent_dir"; then
            fail $EXIT_BAD_SETUP "Cannot give $agent_dir to user $agent_user."
        fi
    fi
fi

cd "$agent_dir"

# ----------------------------------------------------------------- version check
# The image bakes a pinned agent (fast start, no download); the server may offer
# a newer one. A mismatch is not an error: a pool with auto-update updates the
# agent after registration (run.sh handles the restart). It is flagged so the
# operator can rebuild the image and save that update on every job.
check_agent_version() {
    local baked platform json offered
    if ! baked=$(cat .image-agent-version 2>/dev/null); then
        log "agent version of the image unknown (no .image-agent-version); skipping the version check"
        return 0
    fi
    if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
        log "curl or jq missing; skipping the agent version check"
        return 0
    fi
    case $(uname -m) in
        x86_64) platform=linux-x64 ;;
        aarch64 | arm64) platform=linux-arm64 ;;
        *) platform=linux-arm ;;
    esac
    # The PAT goes to curl on stdin (a config file), never on its command line.
    local quoted=${token//\\/\\\\}
    quoted=${quoted//\"/\\\"}
    if ! json=$(printf 'user = ":%s"\n' "$quoted" |
        curl --config - --silent --show-error --fail --max-time 5 \
            -H 'Accept: application/json' -H 'X-TFS-FedAuthRedirect: Suppress' \
            "$url/_apis/distributedtask/packages/agent?platform=$platform&top=1" 2>&1); then
        log "could not check the server's agent version (${json:-no answer}); continuing"
        return 0
    fi
    offered=$(jq -r '.value[0].version | "\(.major).\(.minor).\(.patch)"' <<<"$json" 2>/dev/null) || offered=""
    if [[ -z $offered || $offered == null* ]]; then
        log "the server named no agent package for $platform; continuing"
    elif [[ $offered != "$baked" ]]; then
        log "WARNING: this image has agent $baked but the organisation offers $offered. If the pool allows updates the agent updates itself after registering (a slower start on every job); rebuild the image with AGENT_VERSION=$offered (dockeragent/build.sh pin-agent $offered)."
    else
        log "agent $baked matches the organisation's current version"
    fi
}
# A client secret cannot be sent to the REST API: the check needs a PAT or an access token.
[[ $skip_version_check == 1 || $auth == service-principal ]] || check_agent_version
exit_if_signalled

# ----------------------------------------------------------------- register
log "registering agent '$name' in pool '$pool' at $url"
# The PAT reaches config.sh only through VSTS_AGENT_INPUT_TOKEN, which the agent
# reads and removes from its environment; it never appears in an argv. An Entra
# access token goes the same way: the agent sends it as Basic auth, which Azure
# DevOps accepts, and once registered the agent authenticates with its own key
# (.credentials_rsaparams), so the token, useless within the hour, is not kept.
if [[ $auth == service-principal ]]; then
    # The secret, like the PAT, only through the environment (VSTS_AGENT_INPUT_*).
    VSTS_AGENT_INPUT_CLIENTSECRET=$token "${as_user[@]}" ./config.sh --unattended --url "$url" \
        --auth SP --clientid "$client_id" --tenantid "$tenant_id" --pool "$pool" \
        --agent "$name" --work "$work" --replace --acceptTeeEula &
else
    VSTS_AGENT_INPUT_TOKEN=$token "${as_user[@]}" ./config.sh --unattended --url "$url" \
        --auth pat --pool "$pool" --agent "$name" --work "$work" --replace --acceptTeeEula &
fi
child=$!
unset token
wait_child
exit_if_signalled
if ((rc != 0)); then
    fail $EXIT_CONFIG_FAILED "Agent registration failed (config.sh exit code $rc): check the PAT (Agent Pools read & manage) or that the service principal is an Administrator of the pool, the pool name and the URL; the agent's message is above."
fi

# ----------------------------------------------------------------- the start gate
# A name registered for the first time comes up enabled, and the agent would take
# a job the moment run.sh opens its session. So the supervisor sets the flag first
# (disabled, for a hot standby) and then gives the go: the file below. The agent
# has no session until then, so it can be handed nothing; a SIGTERM meanwhile
# leaves it registered and offline (exit 143), as before a job. The line below is
# read by the supervisor (gpuci_tui/core/engine/agent_output.py): keep its words.
if [[ -n $go_file ]]; then
    log "registered as $name; waiting for the go file $go_file"
    until [[ -e $go_file ]]; do
        exit_if_signalled
        sleep 0.2
    done
    rm -f -- "$go_file" 2>/dev/null || true
fi

# ----------------------------------------------------------------- one job
exit_if_signalled
log "waiting for one job"
"${as_user[@]}" ./run.sh --once &
child=$!
wait_child
exit_if_signalled
case $rc in
    0) log "job done"; exit 0 ;;
    2) fail $EXIT_RETRYABLE "The agent failed to start (retryable error); a new container will retry." ;;
    3 | 4) fail $EXIT_AGENT_UPDATING "The agent left to update itself (the organisation requires a newer agent). gpuci-tui starts the next container with the verified package it caches; rebuild the image with the current agent version to save that." ;;
    1) fail $EXIT_AGENT_ERROR "The agent stopped with an error (run.sh exit code 1); see its message above." ;;
    *) fail "$rc" "The agent exited with code $rc." ;;
esac
