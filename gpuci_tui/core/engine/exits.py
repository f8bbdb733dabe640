"""How a slot judges the end of a container: failure or not, backoff, parking.

Pure rules over frozen records (see `lifecycle`); the transitions call them
when a container dies or cannot even be started.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent_exit import AGENT_UPDATING, KILLED, describe
from gpuci_tui.core.engine.lifecycle import LaneRecord, SlotRecord
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.models import ExitInfo, JobInfo
from gpuci_tui.core.protocols import ContainerInfo

#: Exit codes of a container ended politely by a signal (SIGINT, SIGTERM). SIGKILL (137)
#: still counts: it is also what a missed OOM kill looks like, and an image that is
#: OOM-killed at every start must back off and park, not restart in a tight loop.
SIGNAL_EXITS = frozenset({130, 143})


def judge_exit(
    lane: LaneRecord,
    code: int | None,
    at: float,
    rules: SupervisorConfig,
    log_tail: tuple[str, ...] = (),
) -> tuple[ExitInfo, bool]:
    """The `ExitInfo` of the lane's current container and whether it was a failure.

    A failure is a container that stopped on its own, without taking a job,
    with a non-zero code: a broken image, a bad PAT, a missing token. Those
    back off exponentially and park after ``rules.park_after`` in a row. A
    container that dies under its running job (`lost_job`) is a job lost on the
    slot, never a failure.
    """
    took_job = lane.took_job or lane.job is not None or code == 0
    lifetime = at - lane.started_at if lane.started_at else 0.0
    lost = lost_job(lane, code)
    if lane.stop_requested:
        reason, failure = "stopped by gpuci-tui", False
    elif lane.oom:
        during = f" during {job_words(lane.job)}" if lane.job is not None else ""
        reason = "killed by the OOM killer" + (during or (" during its job" if took_job else ""))
        failure = not took_job
    elif lost and lane.job is not None:
        reason, failure = killed_during(lane.job, code), False
    elif code == 0:
        reason, failure = ("job finished" if lane.took_job else "exited 0"), False
    elif code is None:
        # Gone while the event stream was down (e.g. dockerd restarted): the slot's
        # image is not to blame, so this is not counted towards parking.
        reason, failure = "gone while the Docker engine was unreachable (exit code unknown)", False
    else:
        reason = f"exit code {code}: {describe(code, took_job=took_job)}"
        # A signal we did not send (docker stop by someone, dockerd shutting down)
        # says nothing about the image: only the agent's own failures count.
        external_signal = code in SIGNAL_EXITS
        # An agent that leaves to update proved the image, the PAT and the pool work: the
        # organisation wants a newer agent. Counting it would park every slot (issue 20).
        updating = code == AGENT_UPDATING
        failure = (
            not took_job and not external_signal and not updating and lifetime < rules.healthy_after
        )
    info = ExitInfo(code=code, oom=lane.oom, at=at, reason=reason, log_tail=log_tail)
    return replace(info, took_job=took_job, lost_job=lost), failure


def lost_job(lane: LaneRecord, code: int | None) -> bool:
    """Whether the lane's container died under the job it was running, not stopped by us.

    Known busy means a job on the lane (`LaneRecord.job`: the organisation's read, or
    the agent's own output) when it died. Not lost: a job that ended (exit 0), an
    agent that left to update after it, a stop signal (the agent cancels its job and
    reports it), an unknown end (the engine was away), and our own stop.
    """
    if lane.job is None or lane.stop_requested:
        return False
    if lane.oom:
        return True
    return code is not None and code not in (0, AGENT_UPDATING, *SIGNAL_EXITS)


def job_words(job: JobInfo) -> str:
    """``job 4711``, or the job's name while its request id is not known yet."""
    if job.request_id:
        return f"job {job.request_id}"
    return f"job {job.name or job.pipeline or '(unnamed)'}"


def killed_during(job: JobInfo, code: int | None) -> str:
    """The reason of a container that died under ``job``: ``killed during job 4711``."""
    if code == KILLED or (code is not None and code > 128):
        signal = "SIGKILL" if code == KILLED else f"signal {(code or 0) - 128}"
        return f"killed during {job_words(job)} ({signal}; the job is lost)"
    return f"exit code {code} during {job_words(job)}: {describe(code)} (the job is lost)"


def count_failure(
    slot: SlotRecord, what: str, reason: str, at: float, rules: SupervisorConfig
) -> SlotRecord:
    """Back off exponentially (capped); park after ``rules.park_after`` failures in a row."""
    failures = slot.failures + 1
    if failures >= rules.park_after:
        return replace(
            slot,
            failures=failures,
            parked=True,
            backoff_until=None,
            message=f"parked after {failures} failed starts: {reason}",
        )
    delay = min(rules.backoff_base * 2 ** (failures - 1), rules.backoff_max)
    return replace(
        slot,
        failures=failures,
        backoff_until=at + delay,
        message=f"{what}; next start in {delay:.0f} s",
    )


def settle_exit(
    slot: SlotRecord,
    lane: LaneRecord,
    code: int | None,
    judged: tuple[bool, str],
    at: float,
    rules: SupervisorConfig,
) -> tuple[SlotRecord, bool]:
    """The slot after its lane's container ended, and whether its agent left to update.

    ``judged`` is `judge_exit`'s verdict: (failure, reason). A failure backs off towards
    parking; an update exit never does (`left_to_update`); anything else is forgiven.
    """
    failure, reason = judged
    if code == AGENT_UPDATING and not lane.stop_requested:
        return left_to_update(slot, lane.started_at, at, rules.update_retry), True
    if failure:
        return count_failure(slot, f"failed ({reason})", reason, at, rules), False
    if lane.go is GoState.REFUSED:
        return slot, False  # stopped because its go failed: counted then, not forgiven now
    slot = forgive(slot)
    # A job ran: a later update exit is a new update, not a repeat of this one.
    return (replace(slot, update_exit_at=None) if lane.took_job else slot), False


def left_to_update(
    slot: SlotRecord, started_at: float | None, at: float, retry: float
) -> SlotRecord:
    """An agent of ``slot`` left to update itself (exit 12): never a step towards parking.

    The next container starts at once, with the package the daemon caches. Only a
    container started *after* the slot's first update exit (since its last job: it
    should have had that package, so the cache cannot help) waits ``retry`` seconds
    (``[supervisor] update_retry``) before the next start: the cache did not help (no
    verified package), so the slot must not hammer the organisation with registrations.
    """
    # The first update exit of an episode is kept (not the latest): with two lanes per
    # slot, each lane's exit would otherwise move it past the other's restart.
    first = slot.update_exit_at
    if first is not None and (started_at or 0.0) > first:
        return replace(
            slot,
            failures=0,
            backoff_until=at + retry,
            message=f"agent left to update again (no newer package to give it); "
            f"next start in {retry:.0f} s",
        )
    return replace(
        slot,
        failures=0,
        backoff_until=None,
        update_exit_at=at if first is None else first,
        message="agent left to update; the next container uses the cached package",
    )


def forgive(slot: SlotRecord) -> SlotRecord:
    """A container that did not fail: the failure streak and its backoff end."""
    return replace(slot, failures=0, backoff_until=None, message="")


def leftover_exit(dead: list[ContainerInfo], at: float) -> tuple[ExitInfo, str] | None:
    """How the newest dead leftover of a lane that failed on its own ended, and its id.

    Containers are not auto-removed, so a supervisor that (re)starts finds the
    ones that died while it was away. A slot that knows no exit yet takes the
    newest failure among them as its last exit, and its tail is read before the
    container is removed: the operator sees why it failed, as for a live exit.
    """
    failed = [
        info
        for info in dead
        if info.oom_killed
        or (info.exit_code not in (None, 0) and info.exit_code not in SIGNAL_EXITS)
    ]
    newest = max(failed, key=lambda info: info.started_at or 0.0, default=None)
    if newest is None:
        return None
    if newest.oom_killed:
        why = "killed by the OOM killer"
    else:
        code = newest.exit_code or 0
        why = f"exit code {code}: {describe(code, took_job=False)}"
    info = ExitInfo(
        code=newest.exit_code, oom=newest.oom_killed, at=at, reason=f"{why} (found exited)"
    )
    return info, newest.id
