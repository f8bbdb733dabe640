"""The standby schedule end to end: the in-process supervisor and the simulated organisation.

The schedule is written for the next seconds of today (UTC, every day): two
standbys from ``LEAD`` seconds after the start, none from 12 s later. The
lanes come up at the scheduled second, not before, and go again after;
``status`` names the schedule in force; a reload changes it live. (The
supervisor keeps the real clock: the simulated organisation stamps its agents
with it. The fake-clock version is `tests.core.engine.test_standby_schedule_world`.)
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import replace

from gpuci_tui.core.engine.standby.schedule import StandbySchedule, time_text
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.records import AgentStartup
from tests.core.supervisor_env import Env, StaticTokens, wait_until

LEAD = 5
"""Seconds before the two standbys are due: the two active agents come up meanwhile."""
DAY = 86400


async def test_lanes_come_at_the_scheduled_second_and_go_after(env: Env) -> None:
    env.org.startup = AgentStartup(register=0.2, session=0.1)
    up = math.ceil(time.time()) + LEAD
    down = up + 12
    entries = tuple(sorted(((up % DAY, 2), (down % DAY, 0))))
    agents = replace(
        env.config.agents, standby=1, standby_schedule=StandbySchedule("UTC", (entries,) * 7)
    )
    config = replace(env.config, agents=agents)
    supervisor = Supervisor(config, api=env.api, runtime=env.runtime, tokens=StaticTokens())
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
        assert time.time() < up and len(env.running()) == 2, env.running()
        # "until Fri 00:00:03" when the change is past midnight: the time is what counts.
        depth = supervisor.snapshot().standby_depth
        assert depth.startswith("off; schedule: 0 until ") and depth.endswith(
            f"{time_text(up % DAY)} (UTC)"
        ), depth
        await wait_until(lambda: len(env.running()) == 6, timeout=LEAD + 10, what="6 agents")
        assert up <= time.time() < down
        depth = supervisor.snapshot().standby_depth
        assert depth.startswith("2; schedule: 2 until ") and depth.endswith(
            f"{time_text(down % DAY)} (UTC)"
        ), depth
        await wait_until(lambda: len(env.running()) == 2, timeout=20, what="back to 2 agents")
        assert time.time() >= down
        assert sorted(env.running()) == ["t-0", "t-1"]
        # A reload takes a new schedule live, and dropping it gives standby = 1 back.
        always_two = StandbySchedule("UTC", (((0, 2),),) * 7)
        result = supervisor.reconfigure(
            replace(config, agents=replace(agents, standby_schedule=always_two))
        )
        assert result.ok, result.message
        await wait_until(lambda: len(env.running()) == 6, timeout=15, what="6 agents again")
        assert supervisor.snapshot().standby_depth == "2; schedule: 2 (UTC)"
        result = supervisor.reconfigure(
            replace(config, agents=replace(agents, standby_schedule=None))
        )
        assert result.ok, result.message
        await wait_until(lambda: len(env.running()) == 4, timeout=15, what="one standby each")
        assert supervisor.snapshot().standby_depth == "1"
    finally:
        supervisor.request_stop()
        await asyncio.wait_for(task, 10)
