"""The history drill (issue 28): every job that ran has exactly one history row, whatever happened.

One scenario, two sizes: bench/bench_history_drill.py runs it whole with the issue's
figures (5-s restarts, 30 s of HTTP 500, 15 s of 429, longer steady phases); the
drill tests (tests/drills/test_history_drill.py) run it short and split by fault
kind (`Settings.events`: the roll-outs, the kills, the refusals), each under 30 s
and each with the same proof.

The real daemon with hot standby on the real Docker engine, the emulator image,
the simulated organisation; a feeder keeps the slots busy with short jobs the
whole time. Meanwhile, one after the other, each followed by a steady phase:
a roll-out to a new image; a bad build (a crash-looping image) tried on a canary
and rolled back; the daemon SIGKILLed and started again ``down`` seconds later;
a busy agent SIGKILLed under its job; HTTP 500 for ``server_errors`` s then 429
(with ``Retry-After``) for ``rate_limited`` s; the daemon SIGKILLed again; another
busy agent killed; a roll-out back. Then the feeder stops, every job ends, and
``gpuci-tui history --json`` is compared with the organisation's own record of
the finished requests of our agents: the same ids, each once, each with its
result. Jobs lost (not succeeded, other than the two killed under their agents;
or handed out twice) and overlaps (two jobs at once on one slot's agents) are
counted from the same record.
"""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from gpuci_tui.core.config.loader import save_config
from tests.drills.org_fault_intake import overlapping
from tests.real.rig import Rig, wait_for

ROLLOUT, BAD_BUILD, DAEMON_KILL, AGENT_KILL, REFUSALS, ROLLOUT_BACK = (
    "roll-out",
    "bad build",
    "daemon SIGKILL",
    "agent kill",
    "refusals",
    "roll-out back",
)
SCENARIO = (
    ROLLOUT,
    BAD_BUILD,
    DAEMON_KILL,
    AGENT_KILL,
    REFUSALS,
    DAEMON_KILL,
    AGENT_KILL,
    ROLLOUT_BACK,
)
"""The whole scenario (the issue's), each event followed by a steady phase."""


@dataclass(frozen=True)
class Settings:
    """The drill's lengths (the tests' short ones by default) and its events."""

    events: tuple[str, ...] = SCENARIO
    """The events run, in order (a part of `SCENARIO` in a test; ROLLOUT_BACK after ROLLOUT)."""

    down: float = 1.5
    """Seconds the daemon stays dead after each SIGKILL (the issue's: 5); longer than the
    longest job, so that a job that ran at the kill ends with no daemon to see it."""
    server_errors: float = 3.0
    """Seconds of HTTP 500 on every public call (the issue's: 30)."""
    rate_limited: float = 4.0
    """Seconds of 429 after them at least (the issue's: 15); on until one reached the daemon."""
    retry_after: float = 6.0
    """The 429's ``Retry-After``: longer than the client's inline wait (5 s), so that it
    reaches the daemon's backoff."""
    steady_jobs: int = 4
    """Jobs that finish between two events (a steady phase)."""
    job_seconds: tuple[float, float] = (0.3, 1.2)
    seed: int = 28
    daemon: str = "tests.drills.history_daemon"
    """The daemon's entry point (``python -m``): the tests' shortens the history's waits for
    the organisation's side of a job; the bench's is ``gpuci_tui.cli.main``, as shipped."""


@dataclass
class Figures:
    """What one run measured."""

    seconds: float
    jobs: int
    """Finished requests of our agents (jobs that ran)."""
    rows: int
    reconciled: int
    """Rows recorded after a restart (no live observation)."""
    missing: list[int]
    extra: list[int | None]
    """Rows of no job of ours, or without a request id."""
    twice: list[int]
    wrong_result: list[int]
    lost: list[int]
    overlaps: list[str]
    """Pairs of jobs that ran at once on one slot's agents, each job in words."""
    killed: list[int] = field(default_factory=list)
    """Jobs killed under their agents on purpose (abandoned: rows, not losses)."""
    requests: int = 0
    """Public requests the organisation answered during the run (all the daemon's calls)."""
    finished_reads: int = 0
    """Reads of our agents' finished requests (``jobrequests?agentIds=…``)."""
    job_reads: int = 0
    """Reads of one job request (``jobrequests/{id}``): none, the list carries the result."""
    refused: dict[int, int] = field(default_factory=dict)
    """Public calls answered 500 and 429 (the refusals reached the daemon), by status."""
    phases: list[tuple[str, float]] = field(default_factory=list)
    """Each phase (an event and the steady jobs after it) and when it ended, in seconds."""

    def timeline(self) -> str:
        """Where the time went: each phase's end, then the whole run."""
        ends = ", ".join(f"{what} {at:.1f}" for what, at in self.phases)
        refused = ", ".join(f"{n} answered {status}" for status, n in sorted(self.refused.items()))
        return f"{ends}; measured {self.seconds:.1f} s; {refused or 'no call refused'}"

    def line(self) -> str:
        """The figures in one line."""
        return (
            f"{self.jobs} jobs ran, {self.rows} history rows ({self.reconciled} recorded after a "
            f"restart), {len(self.missing)} missing, {len(self.twice)} twice, "
            f"{len(self.extra)} extra, {len(self.wrong_result)} with another result, "
            f"{len(self.lost)} jobs lost, {len(self.overlaps)} overlaps, {len(self.killed)} killed "
            f"on purpose, in {self.seconds:.0f} s; {self.requests / max(self.jobs, 1):.1f} "
            f"requests per job, {self.finished_reads} reads of finished requests, "
            f"{self.job_reads} of one job"
        )


class Feeder:
    """Keeps ``outstanding`` jobs queued or running until stopped (a thread)."""

    def __init__(self, rig: Rig, outstanding: int, seconds: tuple[float, float], seed: int):
        self.rig = rig
        self.outstanding = outstanding
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.queued: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="history-feeder", daemon=True)

    def _run(self) -> None:
        org = self.rig.org
        while not self._stop.wait(0.05):
            open_jobs = sum(1 for j in self.queued[-4 * self.outstanding :] if not _done(org, j))
            for _ in range(self.outstanding - open_jobs):
                duration = self.rng.uniform(*self.seconds)
                self.queued.append(org.queue_job(self.rig.pool_id, duration=duration))

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _done(org: Any, request_id: int) -> bool:
    return org.job(request_id).result is not None


def history_drill(rig: Rig, images: tuple[str, str, str], settings: Settings) -> Figures:
    """Run the scenario on ``rig`` (no daemon started yet); ``images``: (the emulator image,
    a second tag of it, the crash-looping image)."""
    org = rig.org
    slots = rig.config.agents.count
    t0 = time.time()
    rig.start_daemon(settings.daemon)
    wait_for(rig.all_idle, 60, "every slot idle with a ready standby")
    phases = [("the daemon up", time.time() - t0)]
    """Each phase's end, in seconds from the start (where the time went)."""
    killed: dict[int, float] = {}
    """Jobs killed under their agents on purpose, and when."""
    with Feeder(rig, 2 * slots, settings.job_seconds, settings.seed) as feeder:

        def steady(what: str) -> None:
            # A job killed under its agent ends when the organisation says (abandoned, once
            # the agent's heartbeat is missed): waited for here too, so that what follows (a
            # restart's first read) finds it ended.
            goal = _finished(rig) + settings.steady_jobs
            wait_for(
                lambda: _finished(rig) >= goal and all(_done(org, j) for j in killed),
                120,
                f"jobs finishing after {what}",
            )
            phases.append((what, time.time() - t0))

        steady("the start")
        for event in settings.events:
            _event(rig, event, images, settings, killed)
            steady(f"the {event}")
    queued = list(feeder.queued)
    wait_for(lambda: all(_done(org, j) for j in queued), 120, "every queued job ended")
    phases.append(("every job ended", time.time() - t0))
    return replace(_measure(rig, queued, killed, t0), phases=phases)


def _event(
    rig: Rig,
    event: str,
    images: tuple[str, str, str],
    settings: Settings,
    killed: dict[int, float],
) -> None:
    """Make one event of the scenario happen (``killed``: a job killed under its agent is
    added, with when)."""
    first, second, broken = images
    if event == ROLLOUT:
        _reload(rig, second)
        wait_for(lambda: _rollout_state(rig) == "done", 120, "the roll-out")
    elif event == BAD_BUILD:
        _reload(rig, broken, "--canary", "1", "--canary-jobs", "1")
        wait_for(lambda: _rollout_state(rig) == "rolled_back", 120, "the bad build rolled back")
    elif event == DAEMON_KILL:
        _sigkill_and_restart(rig, settings.down, settings.daemon)
    elif event == AGENT_KILL:
        job, sent = _kill_a_busy_agent(rig)
        killed[job] = sent
    elif event == REFUSALS:
        _refusals(rig.org, settings)
    elif event == ROLLOUT_BACK:
        _reload(rig, first)
        wait_for(lambda: _rollout_state(rig) == "done", 120, "the roll-out back")
    else:
        raise ValueError(f"no such event in the history drill: {event!r}")


def _refusals(org: Any, settings: Settings) -> None:
    """HTTP 500 on every public call for ``server_errors`` s, then 429 for ``rate_limited`` s
    and on until one of the daemon's calls was answered 429.

    Armed together, as in drill 5: the 500 matches first until it expires, then the 429
    takes over with no gap between them. The 429 lasts until it reached the daemon (its
    backoff after the 500s may outlast a short window): the fault then surely happened.
    """
    began = time.time()
    org.faults.server_error(500, duration=settings.server_errors)
    limit = org.faults.rate_limit(retry_after=settings.retry_after)
    until = began + settings.server_errors + settings.rate_limited

    def refused_429() -> bool:
        calls = org.request_log(began)
        return time.time() >= until and any(e.status == 429 and not e.private for e in calls)

    wait_for(refused_429, settings.server_errors + settings.rate_limited + 90, "a 429 answered")
    org.faults.clear(limit)


def _finished(rig: Rig) -> int:
    return sum(1 for j in rig.org.jobs(rig.pool_id) if j.result is not None)


def _rollout_state(rig: Rig) -> str | None:
    rollouts = (rig.snap() or {}).get("rollouts") or []
    return rollouts[0].get("state") if rollouts else None


def _reload(rig: Rig, image: str, *args: str) -> None:
    save_config(
        replace(rig.config, agents=replace(rig.config.agents, image=image)), rig.config_path
    )
    answer = rig.cli("reload", *args)
    assert answer.returncode == 0, (answer.stdout, answer.stderr)


def _sigkill_and_restart(rig: Rig, down: float, daemon_module: str) -> None:
    daemon = rig.procs[-1]
    daemon.send_signal(signal.SIGKILL)
    daemon.wait(10)
    back_at = time.time() + down
    wait_for(lambda: time.time() >= back_at, down + 5, "the daemon's time away")
    rig.start_daemon(daemon_module)


def _kill_a_busy_agent(rig: Rig) -> tuple[int, float]:
    """SIGKILL an agent's container under its job (a long one, queued for it); returns the
    job's request id and when it was killed."""
    job = rig.org.queue_job(rig.pool_id, duration=120.0)

    def busy() -> str | None:
        for slot in (rig.snap() or {}).get("slots", []):
            running = (slot.get("job") or {}).get("request_id") == job
            if running and slot.get("container_id") in rig.container_ids():
                return str(slot["container_id"])
        return None

    container = wait_for(busy, 60, "the agent busy with the long job")
    # The time before the call, not after: the container dies within the call, and the
    # slot's standby may take the next job before the call returns (seen 1.2 s late under
    # load, counted as an overlap). A job on the standby before this time is a real one.
    sent = time.time()
    rig.client.api.kill(container)
    return job, sent


def _measure(rig: Rig, queued: list[int], killed: dict[int, float], t0: float) -> Figures:
    org = rig.org
    prefix = rig.config.agents.name_prefix
    ran = {
        j.request_id: j
        for j in org.jobs(rig.pool_id)
        if j.result is not None and (j.agent_name or "").startswith(f"{prefix}-")
    }

    def rows() -> list[dict[str, Any]]:
        out = rig.cli("history", "--json", "--limit", "0")
        assert out.returncode == 0, out.stderr
        found: list[dict[str, Any]] = json.loads(out.stdout)
        return [r for r in found if r["instance"] == rig.instance]

    def complete() -> list[dict[str, Any]] | None:
        found = rows()
        results = {r["request_id"]: r["result"] for r in found}
        ok = all(results.get(i) == j.result for i, j in ran.items())
        return found if ok else None

    try:
        found = wait_for(complete, 120, "every job's row with its result")
    except AssertionError:
        found = rows()  # measured as they are: the figures say what is missing
    ids = [r["request_id"] for r in found]
    calls = [e for e in org.request_log() if not e.private]
    results = {r["request_id"]: r["result"] for r in found}
    lost = [
        i
        for i in queued
        if i in ran
        and i not in killed
        and (ran[i].result != "succeeded" or ran[i].assign_count > 1)
    ]
    return Figures(
        seconds=time.time() - t0,
        jobs=len(ran),
        rows=len(found),
        reconciled=sum(1 for r in found if r.get("reconciled")),
        missing=sorted(set(ran) - set(ids)),
        extra=[i for i in ids if i not in ran],
        twice=sorted(i for i, n in Counter(ids).items() if n > 1),
        wrong_result=sorted(i for i in ran if i in results and results[i] != ran[i].result),
        lost=lost,
        overlaps=[
            f"{_job_words(ran[a], t0)} / {_job_words(ran[b], t0)}"
            for a, b in overlapping(_as_run(ran.values(), killed))
        ],
        killed=sorted(killed),
        requests=len(calls),
        finished_reads=sum(
            1 for e in calls if e.route.endswith("/jobrequests") and "agentIds" in e.detail
        ),
        job_reads=sum(1 for e in calls if e.route.endswith("/jobrequests/{requestId}")),
        refused=dict(Counter(e.status for e in calls if e.status in (429, 500))),
    )


def _job_words(job: Any, t0: float) -> str:
    """One job for a failure message: id, agent, seconds into the run, result."""
    end = "…" if job.finish_time is None else f"{job.finish_time - t0:.1f}"
    return f"{job.request_id} on {job.agent_name} {job.assign_time - t0:.1f}-{end} s {job.result}"


def _as_run(jobs: Any, killed: dict[int, float]) -> list[Any]:
    """The jobs as they ran: one killed under its agent ended with its container.

    The organisation ends it (abandoned) only once the agent's heartbeat is missed,
    seconds later, while the slot's next agent already runs the next job.
    """
    return [
        dataclasses.replace(j, finish_time=min(j.finish_time, killed[j.request_id]))
        if j.request_id in killed and j.finish_time is not None
        else j
        for j in jobs
    ]
