"""Why the pool's disabled agents are disabled: each under the first reason that holds.

A table on the engine state: the pool read says which agents are disabled, the
slots say which of them are ours and what each is doing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.gpu_admission import GateKind
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, lane_name
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.engine.snapshots import disabled_agents, pools_total, shared_pool
from gpuci_tui.core.models import DisabledAgents, PoolSummary
from gpuci_tui.core.protocols import Agent
from tests.core.lifecycle_helpers import ACTIVE, BUSY, PARKED_DISABLED, READ, STANDBY, engine

A_NAME, B_NAME = lane_name("h", 0, Lane.A), lane_name("h", 0, Lane.B)


def read(*agents: Agent) -> PoolView:
    """The pool read at 20 with ``agents``."""
    return replace(READ, agents=agents)


def agent(id: int, name: str, *, enabled: bool = False) -> Agent:
    """A registration, disabled unless said."""
    return Agent(id=id, name=name, enabled=enabled, status="online")


HELD = Gate(kind=GateKind.HELD, reason="GPU 0 used by pid 4242", code="foreign_process")

ROWS: list[tuple[str, EngineState, DisabledAgents]] = [
    ("nothing read yet: nothing to explain",
     engine(ACTIVE, STANDBY, read=None), DisabledAgents()),
    ("active enabled, standby disabled: one standby",
     engine(ACTIVE, STANDBY, read=read(agent(1, A_NAME, enabled=True), agent(2, B_NAME))),
     DisabledAgents(standby=1)),
    ("active busy and disabled (so its next container is the standby): on a job",
     engine({**BUSY, "enabled": False}, STANDBY, read=read(agent(1, A_NAME), agent(2, B_NAME))),
     DisabledAgents(busy=1, standby=1)),
    ("a registration left with no container", engine(ACTIVE, PARKED_DISABLED,
     read=read(agent(1, A_NAME, enabled=True), agent(2, B_NAME))), DisabledAgents(idle=1)),
    ("slot draining: its disabled agents are leaving, not standbys",
     engine({**ACTIVE, "enabled": False}, STANDBY, intent=Intent.DRAIN,
            read=read(agent(1, A_NAME), agent(2, B_NAME))), DisabledAgents(leaving=2)),
    ("someone else's disabled agents are not ours",
     engine(ACTIVE, STANDBY, read=read(agent(1, A_NAME, enabled=True), agent(2, B_NAME),
                                        agent(7, "laptop-of-bob"), agent(8, "other-host-0-a"))),
     DisabledAgents(standby=1, others=2)),
    ("enabled agents are never counted, ours or not",
     engine(ACTIVE, STANDBY, read=read(agent(1, A_NAME, enabled=True),
                                        agent(7, "laptop-of-bob", enabled=True))),
     DisabledAgents()),
]  # fmt: skip


@pytest.mark.parametrize(("name", "state", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_disabled_agents_by_reason(name: str, state: EngineState, expected: DisabledAgents) -> None:
    """Each row: the pool read and the slots → the counts by reason."""
    assert disabled_agents(state) == expected, name


def test_a_held_slot_says_held_not_standby() -> None:
    """GPU admission holds the slot: its disabled active agent waits for the GPU."""
    state = engine(
        {**ACTIVE, "enabled": False}, STANDBY, read=read(agent(1, A_NAME), agent(2, B_NAME))
    )
    slot = replace(state.slots[0], gate=HELD)
    held = replace(state, slots=(slot,))
    assert disabled_agents(held) == DisabledAgents(held=2)


def test_groups_sharing_a_pool_add_up_their_own_and_leave_the_rest_to_others() -> None:
    """Two groups read the same pool: each claims its agents; what none claims is others."""
    first = PoolSummary(name="gpu", disabled=5, standby=2,
                        disabled_why=DisabledAgents(standby=2, others=3))  # fmt: skip
    second = PoolSummary(name="gpu", disabled=5, standby=1,
                         disabled_why=DisabledAgents(standby=1, busy=1, others=3))  # fmt: skip
    merged = shared_pool([first, second])
    assert merged.standby == 3
    assert merged.disabled_why == DisabledAgents(standby=3, busy=1, others=1)


def test_distinct_pools_add_up() -> None:
    """Two pools: every count, the reasons included, is the sum."""
    one = PoolSummary(name="a", disabled=2, disabled_why=DisabledAgents(standby=1, others=1))
    two = PoolSummary(name="b", disabled=1, disabled_why=DisabledAgents(held=1))
    total = pools_total([one, two])
    assert (total.name, total.disabled) == ("a, b", 3)
    assert total.disabled_why == DisabledAgents(standby=1, held=1, others=1)


def test_running_jobs_take_our_agents_from_the_engine_and_the_others_from_the_read() -> None:
    """Our job that ended (container exited) is not counted though the last read still shows it."""
    from gpuci_tui.core.engine.snapshots import pool_summary, running_jobs
    from gpuci_tui.core.protocols import JobRequest

    busy = JobRequest(request_id=7)
    pool = replace(
        read(
            replace(agent(1, A_NAME), assigned_request=busy),
            replace(agent(9, "laptop-of-bob", enabled=True), assigned_request=JobRequest(8)),
        ),
        running_jobs=5,  # the job requests' count, read long ago
        jobs_read_at=5.0,
    )
    ended = engine({**ACTIVE, "enabled": False}, STANDBY, read=pool)  # lane a: no job any more
    assert running_jobs(ended) == 1, "only bob's job: ours ended after the read"
    still = engine({**BUSY, "enabled": False}, STANDBY, read=pool)
    assert running_jobs(still) == 2
    summary = pool_summary(still, "gpu")
    assert (summary.running_jobs, summary.read_at, summary.jobs_read_at) == (2, 20.0, 5.0)
