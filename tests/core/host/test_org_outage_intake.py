"""Intake while the organisation answers 500 (issue 30's follow-up), in process.

The supervisor with hot standby, the real Azure DevOps client over HTTP (its
retries on real time) against the simulated organisation (`SimServer`), agents
in process that take time to register and to get a session; jobs keep coming.
Then every public call (the daemon's; the agents' own go on) is answered 500
for a window. Once the daemon knows the organisation is down (its first call
failed for good), every call makes one attempt: the observer's probe, once per
poll interval, is the retry, and no caller waits for in-call retries. Slots go
on taking jobs by restarting in place (`planning.refused`); nothing overlaps
or is lost; the first call after the window is answered within one interval.
The long version, with the real daemon, Docker and the issue's figures, is
bench/bench_org_faults.py.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import replace

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.server import SimServer
from tests.core.host.test_supervisor_standby import jobs_per_slot_never_overlap
from tests.core.supervisor_env import PAT, Env, StaticTokens, wait_until

STARTUP = AgentStartup(register=0.3, session=0.2)
JOB = 0.3
POLL = 2.0
"""``poll_interval``: the probe's cadence while the organisation is down."""
WINDOW = 8.0
RETRIES = 2
"""The client's in-call retries on a healthy organisation (0.25-0.5 s, then 0.5-1 s)."""


def slot_of(agent_name: str) -> str:
    return agent_name.removesuffix("-b")


async def test_slots_take_jobs_in_place_through_500s_and_calls_are_not_retried_meanwhile(
    env: Env,
) -> None:
    env.org.startup = STARTUP
    config = replace(env.config, agents=replace(env.config.agents, standby=True))
    config = replace(config, supervisor=replace(config.supervisor, poll_interval=POLL))
    slots = config.agents.count
    with SimServer(env.org) as server:
        client = AzureDevOpsClient(server.org_url, PAT, max_retries=RETRIES)
        sup = Supervisor(config, api=client, runtime=env.runtime, tokens=StaticTokens())
        task = asyncio.create_task(sup.run())
        jobs: list[int] = []
        feeding = True

        async def feed() -> None:
            while feeding:  # top the queue up so that the slots never run dry
                queued = sum(1 for j in env.org.jobs(env.pool_id) if j.state == "queued")
                jobs.extend(env.org.queue_job(env.pool_id, duration=JOB) for _ in range(4 - queued))
                await asyncio.sleep(0.05)  # pacing of the top-up, not a wait for a state

        feeder = asyncio.create_task(feed())
        try:

            def done() -> int:
                return sum(1 for j in jobs if env.org.job(j).result is not None)

            await wait_until(lambda: done() >= 2 * slots, timeout=30, what="the standby at work")
            t0 = time.time()
            fault = env.org.faults.server_error(500)
            await wait_until(lambda: client.organisation_down, timeout=15, what="a failed call")
            known = time.time()
            await wait_until(lambda: time.time() >= t0 + WINDOW, timeout=WINDOW + 5, what="")
            env.org.faults.clear(fault)
            t_end = time.time()

            def answered() -> float | None:
                log = env.org.request_log(t_end)
                return min((e.at for e in log if not e.private and e.status < 400), default=None)

            back = await wait_until(answered, timeout=4 * POLL, what="the daemon's next call")
            feeding = False
            await wait_until(
                lambda: all(env.org.job(j).result is not None for j in jobs),
                timeout=30,
                what="the queue drained",
            )
            await wait_until(
                lambda: all(s.state is SlotState.IDLE for s in sup.snapshot().slots),
                timeout=30,
                what="every slot idle again",
            )
        finally:
            feeding = False
            await feeder
            sup.request_stop()
            await asyncio.wait_for(task, 10)

        records = [env.org.job(j) for j in jobs]
        assert all(r.result == "succeeded" and r.assign_count == 1 for r in records), "a job lost"
        jobs_per_slot_never_overlap(env, jobs)
        # Intake went on once the daemon knew: each slot took jobs by restarting in place,
        # each one start-up + job (0.8 s) apart at best; half that pace under load.
        taken: dict[str, int] = defaultdict(int)
        for r in records:
            if r.agent_name and r.assign_time and known <= r.assign_time < t_end:
                taken[slot_of(r.agent_name)] += 1
        assert len(taken) == slots and min(taken.values()) >= 2, (
            f"a slot stopped taking jobs after {known - t0:.1f} s: {dict(taken)}"
        )
        # One attempt per call while known down: a route is called again only by the
        # next probe, an interval later, never by a retry 0.25-1 s after its failure.
        calls: dict[str, list[float]] = defaultdict(list)
        for e in env.org.request_log(known + 0.05):
            if not e.private and e.at < t_end:
                calls[f"{e.method} {e.route}"].append(e.at)
        for route, times in calls.items():
            gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
            assert all(gap >= POLL / 2 for gap in gaps), f"{route} retried while down: {gaps}"
        assert back - t_end <= 2 * POLL, f"first answer {back - t_end:.1f} s after the window"
