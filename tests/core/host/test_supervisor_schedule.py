"""The standby schedule end to end: the in-process supervisor and the simulated organisation.

The schedule is written for the next seconds of today (UTC, every day): two
standbys from ``LEAD`` seconds after the start, none from 12 s later. The
lanes come up at the scheduled second, not before, and go again after;
``status`` names the schedule in force; a reload changes it live.

On virtual time (tests/core/virtual_env.py): the supervisor, the runtime and the
organisation share the loop's clock, so the test waits for each change at its own
second, for free. (The engine-only version is
`tests.core.engine.test_standby_schedule_world`.)
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

from gpuci_tui.core.engine.standby.schedule import StandbySchedule, time_text
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.records import AgentStartup
from tests.core.supervisor_env import StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

LEAD = 5
"""Seconds before the two standbys are due: the two active agents come up meanwhile."""
DAY = 86400


@on_virtual_time
async def test_lanes_come_at_the_scheduled_second_and_go_after(env: VirtualEnv) -> None:
    env.org.startup = AgentStartup(register=0.2, session=0.1)
    clock, runtime = env.clock, env.runtime

    def running() -> list[str]:
        return [c.name for c in runtime.list_containers({}) if c.status == "running"]

    up = math.ceil(clock()) + LEAD
    down = up + 12
    entries = tuple(sorted(((up % DAY, 2), (down % DAY, 0))))
    agents = replace(
        env.config.agents, standby=1, standby_schedule=StandbySchedule("UTC", (entries,) * 7)
    )
    config = replace(env.config, agents=agents)
    supervisor = Supervisor(
        config, api=env.api, runtime=runtime, tokens=StaticTokens(), clock=clock
    )
    task = asyncio.create_task(supervisor.run())
    try:
        await wait_until(
            lambda: (
                len(supervisor.snapshot().slots) == 2
                and all(s.state.value == "idle" for s in supervisor.snapshot().slots)
            ),
            timeout=LEAD,
            what="two idle slots before the standbys are due",
        )
        assert clock() < up and len(running()) == 2, running()
        # "until Fri 00:00:03" when the change is past midnight: the time is what counts.
        depth = supervisor.snapshot().standby_depth
        assert depth.startswith("off; schedule: 0 until ") and depth.endswith(
            f"{time_text(up % DAY)} (UTC)"
        ), depth
        # The standbys come at their second, not before.
        await wait_until(lambda: len(running()) == 6, timeout=10, what="6 agents")
        assert up <= clock() < down
        # Docker's start times (on the shared clock): no standby lane started early.
        starts = {c.name: c.started_at or 0.0 for c in runtime.list_containers({})}
        assert all(at >= up for name, at in starts.items() if name not in ("t-0", "t-1")), (
            up,
            starts,
        )
        depth = supervisor.snapshot().standby_depth
        assert depth.startswith("2; schedule: 2 until ") and depth.endswith(
            f"{time_text(down % DAY)} (UTC)"
        ), depth
        await wait_until(lambda: len(running()) == 2, timeout=20, what="back to 2 agents")
        assert clock() >= down
        assert sorted(running()) == ["t-0", "t-1"]
        # A reload takes a new schedule live, and dropping it gives standby = 1 back.
        always_two = StandbySchedule("UTC", (((0, 2),),) * 7)
        result = supervisor.reconfigure(
            replace(config, agents=replace(agents, standby_schedule=always_two))
        )
        assert result.ok, result.message
        await wait_until(lambda: len(running()) == 6, timeout=15, what="6 agents again")
        assert supervisor.snapshot().standby_depth == "2; schedule: 2 (UTC)"
        result = supervisor.reconfigure(
            replace(config, agents=replace(agents, standby_schedule=None))
        )
        assert result.ok, result.message
        await wait_until(lambda: len(running()) == 4, timeout=15, what="one standby each")
        assert supervisor.snapshot().standby_depth == "1"
    finally:
        supervisor.request_stop()
        await asyncio.wait_for(task, 10)
