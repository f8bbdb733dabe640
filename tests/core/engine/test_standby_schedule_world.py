"""A standby schedule in the seeded world: lanes added at the scheduled time, retired after.

The world (`tests.core.lifecycle_world`) runs the engine against simulated
Docker and Azure DevOps on a fake clock, and asserts while it runs that no two
jobs ever share a slot's agents and that no container with a job is stopped.
Its clock starts at 0: Thursday 1 January 1970, 00:00 UTC. Jobs keep coming
through both changes, so the change lands on busy slots too.
"""

from __future__ import annotations

from functools import partial

import pytest

from gpuci_tui.core.engine.lifecycle import Lane, Op
from gpuci_tui.core.engine.standby.schedule import DAYS, StandbySchedule
from gpuci_tui.core.engine.standby.state import AutoStandby
from tests.core.lifecycle_world import World

THURSDAY = DAYS.index("thursday")
#: 1 standby until 00:05, 3 until 00:10, then none (until next Thursday).
SCHEDULE = StandbySchedule(
    "UTC", tuple(((0, 1), (300, 3), (600, 0)) if day == THURSDAY else () for day in range(7))
)
DEEP = (Lane.C, Lane.D)


def probe(world: World, times: tuple[float, ...]) -> dict[float, tuple[int, int]]:
    """At each time: (standby depth in force, lanes c and d in use).

    In use: a container runs in the lane, or its next one is on its way (a lane that
    ran a job restarts at once; at any instant one may be between the two: its dead
    container being removed, or its registration being disabled for the restart once
    the next active lane's enable is confirmed, `planning.run`).
    """
    seen: dict[float, tuple[int, int]] = {}

    def look(t: float) -> None:
        deep = sum(
            1
            for _, lane in world.state.lanes()
            if lane.lane in DEEP
            and (
                lane.live
                or lane.dying_id is not None
                or lane.op is Op.DISABLE
                or any(b.alive and b.name == lane.name for b in world.boxes.values())
            )
        )
        seen[t] = (int(world.state.standby), deep)

    for t in times:
        world.at(t, partial(look, t))
    return seen


@pytest.mark.parametrize("seed", range(2))
def test_schedule_adds_lanes_at_its_time_and_retires_them_after(seed: int) -> None:
    world = World(seed=seed, slots=2, standby=1, crash_rate=0.0)
    world.with_state(schedule=SCHEDULE)
    seen = probe(world, (299.999, 300.001, 420.0, 599.999, 600.001))
    world.run(800.0, jobs_every=3.0, commands=False)
    world.settle(120.0)
    assert seen[299.999] == (1, 0), "no deeper lane before its time"
    assert seen[300.001][0] == 3, "the count applies on the second"
    assert seen[420.0] == (3, 4), "two more lanes on each of the two slots"
    assert seen[599.999][0] == 3 and seen[600.001][0] == 0
    assert world.state.standby == 0 and world.steady() == []
    assert not any(box.alive for box in world.boxes.values() if box.lane is not Lane.A)
    assert world.lost_jobs == 0 and len(world.done) > 100


@pytest.mark.parametrize("seed", range(2))
def test_schedule_is_the_floor_of_auto(seed: int) -> None:
    auto = AutoStandby(least=1, most=3, hold_down=30.0)
    world = World(seed=seed, slots=2, standby=1, auto=auto, crash_rate=0.0)
    world.with_state(schedule=SCHEDULE)
    seen = probe(world, (300.001, 420.0, 599.999))
    world.run(800.0, jobs_every=3.0, commands=False)
    world.settle(120.0)
    assert seen[300.001][0] == 3 and seen[420.0] == (3, 4) and seen[599.999][0] == 3
    # After 00:10 the floor is 0: "auto" retires every standby once idle past its hold-down.
    assert world.state.standby == 0 and world.steady() == []
    assert world.lost_jobs == 0
