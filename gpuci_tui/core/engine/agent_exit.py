"""Exit codes of dockeragent/start.sh, the entry point of every agent container.

The supervisor reads a container's exit code from Docker's ``die`` event and
uses these constants to tell a finished job from a configuration problem (no
point restarting quickly), a missing token (our bug or the runtime's) or a
retryable hiccup. start.sh defines the same numbers; docs/dockeragent.md has
the table and tests/dockeragent/test_start_sh.py checks both agree.

Whether the *job* succeeded is not in the exit code: the agent reports it to
Azure DevOps, and the supervisor reads the job result from the API.

Pure vocabulary, so it lives in the engine: `exits` classifies a dead
container with it, and the Docker side may import it from here.
"""

from __future__ import annotations

JOB_DONE = 0
"""The agent ran its one job (whatever the job's result) and exited."""
AGENT_ERROR = 1
"""run.sh failed (the agent's TerminatedError): e.g. the registration was
replaced by another agent of the same name, or the session could not be created."""
RETRYABLE = 2
"""run.sh's RetryableError: a transient start-up failure; start a new container."""
CONFIG_FAILED = 10
"""config.sh failed: wrong PAT or scope, unknown pool, unreachable or wrong URL.
The log tail has the agent's own message."""
TOKEN_MISSING = 11
"""The token file (AZP_TOKEN_FILE) was missing, unreadable or empty."""
AGENT_UPDATING = 12
"""The agent exited to update itself (run.sh's 3/4) and did not come back: the
server asked for a newer agent than the container has. Not a failure of the
image: the next container starts with the package the daemon caches (see
`gpuci_tui.core.host.images.agent_cache`)."""
BAD_SETUP = 13
"""The container is set up wrongly: AZP_URL unset, the agent directory missing,
or the run-as user does not exist. Fix the image or the configuration."""
INTERRUPTED = 130
"""Stopped by SIGINT."""
TERMINATED = 143
"""Stopped by SIGTERM (``docker stop``). An idle agent went offline (its
registration is kept for reuse); a running job was cancelled and reported as
cancelled by the agent before it exited."""
KILLED = 137
"""SIGKILL: Docker's stop timeout ran out, or the kernel's OOM killer struck
(check the container's OOMKilled flag)."""

_DESCRIPTIONS: dict[int, str] = {
    JOB_DONE: "job finished",
    AGENT_ERROR: "agent stopped with an error (see the log tail)",
    RETRYABLE: "agent failed to start (transient); will retry",
    CONFIG_FAILED: "agent registration failed: check the PAT, its scope, the pool and the URL",
    TOKEN_MISSING: "no token in the container (token file missing or empty)",
    AGENT_UPDATING: "agent left to update itself (the organisation requires a newer agent)",
    BAD_SETUP: "container set up wrongly (environment, agent directory or user); see the log tail",
    INTERRUPTED: "interrupted (SIGINT)",
    TERMINATED: "stopped (SIGTERM)",
    KILLED: "killed (SIGKILL: stop timeout or out of memory)",
}


def describe(code: int | None, *, took_job: bool | None = None) -> str:
    """Plain words for a container exit code, for the console and the logs.

    ``took_job`` says whether the agent was running a job: a stop signal then
    cancelled it; an idle agent (a standby) lost nothing. None: not known.
    """
    if code is None:
        return "still running or exit code unknown"
    if code in (TERMINATED, INTERRUPTED) and took_job is not None:
        what = _DESCRIPTIONS[code]
        return f"{what}; its running job was cancelled" if took_job else f"{what} while idle"
    if code in _DESCRIPTIONS:
        return _DESCRIPTIONS[code]
    if code > 128:
        return f"killed by signal {code - 128}"
    return f"exited with code {code}"
