"""The engine's safety promises, checked over many random worlds (tests/core/lifecycle_world.py).

Each seed is ten simulated minutes of jobs, crashes, slow and failing writes,
late reads, late, missing and fake agent lines and random drain/resume/restart/
scale commands, with the real transitions and planner; every other seed's image
has the start gate. The world itself asserts, at every job assignment
and every stop, that a slot never runs two jobs and that no busy agent is
stopped; here we also check that work gets done.
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.lifecycle import Intent
from tests.core.lifecycle_world import World

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_never_two_jobs_on_a_slot_and_work_gets_done(seed: int) -> None:
    world = World(seed=seed, slots=3, standby=True, gated=seed % 2 == 1)
    world.run(600.0)
    assert len(world.done) > 30, f"only {len(world.done)} jobs done"
    # After the last resume, every slot is running again.
    assert all(slot.intent in (Intent.RUN, Intent.RESTART) for slot in world.state.slots)


@pytest.mark.parametrize("seed", range(10))
def test_after_the_storm_every_slot_has_one_active_agent_and_a_ready_standby(seed: int) -> None:
    world = World(seed=seed, slots=3, crash_rate=0.0, gated=seed % 2 == 1)
    world.run(600.0)
    world.settle(120.0)
    assert world.steady() == []


@pytest.mark.parametrize("seed", range(10))
def test_without_standby_too(seed: int) -> None:
    world = World(seed=seed, slots=2, standby=False)
    world.run(600.0)
    assert len(world.done) > 20


def test_standby_hands_over_without_waiting_for_a_start() -> None:
    """No crashes, no failures, jobs longer than start-up: every handover is immediate."""
    world = World(
        seed=1,
        slots=1,
        crash_rate=0.0,
        write_failure_rate=0.0,
        register_delay=(6.0, 6.0),
        session_delay=(3.0, 3.0),
        job_length=(12.0, 12.0),
    )
    world.queue.extend(range(1, 30))
    world.run(400.0, jobs_every=1e9, commands=False)
    # 400 s minus the first start-up and bootstrap, at 12 s a job, with ~0.3 s handovers.
    assert len(world.done) >= 28


@pytest.mark.parametrize("seed", range(30))
def test_foreign_processes_and_failing_gpus_never_get_a_job_and_never_two(seed: int) -> None:
    """Held and quarantined slots under the whole storm: commands, crashes, failing writes."""
    world = World(seed=seed, slots=3, standby=seed % 3 != 0, gpu_faults=True)
    world.run(600.0)
    assert len(world.done) > 20, f"only {len(world.done)} jobs done"
    world.settle(120.0)
    # Every GPU is fine again by now: no slot is still held.
    assert not any(slot.gate.closed for slot in world.state.slots)
    if world.standby:
        assert world.steady() == []


@pytest.mark.parametrize("seed", range(30))
def test_random_reloads_never_two_jobs_no_job_lost_and_bad_specs_rolled_back(seed: int) -> None:
    """New agent specs at random (a third crash at every start) under the whole storm."""
    world = World(seed=seed, slots=3, standby=seed % 4 != 0, reloads=True)
    world.run(900.0)
    assert len(world.specs) >= 4, world.specs
    assert world.lost_jobs == 0
    assert len(world.done) > 30, f"only {len(world.done)} jobs done"
    world.settle(240.0)
    # Every container runs its slot's target, and no target is a spec that cannot start.
    assert world.outdated() == []
    targets = {world.state.target_spec(slot.number) for slot in world.state.slots}
    assert not targets & world.bad_specs, (targets, world.bad_specs, world.state.rollout)


def test_a_reload_replaces_the_standby_first_and_the_busy_lane_after_its_job() -> None:
    world = World(seed=3, slots=1, crash_rate=0.0, write_failure_rate=0.0,
                  job_length=(40.0, 40.0))  # fmt: skip
    world.run(60.0, jobs_every=1e9, commands=False)
    assert world.steady() == []
    world.queue.append(1)
    world.go(5.0)
    busy = [b for b in world.boxes.values() if b.alive and b.job is not None]
    assert len(busy) == 1 and busy[0].spec == "s0"
    world.reload(bad=False, canary=0)
    world.settle(8.0)
    # The standby is on the new spec within seconds; the job still runs on the old one.
    alive = {b.lane: b for b in world.boxes.values() if b.alive}
    assert alive[busy[0].lane] is busy[0] and busy[0].job is not None
    other = next(b for lane, b in alive.items() if lane is not busy[0].lane)
    assert other.spec == "s1"
    world.settle(120.0)
    assert world.outdated() == [] and world.lost_jobs == 0
    assert world.done == [1]


def test_a_canary_on_a_spec_that_never_starts_is_rolled_back_and_the_others_never_change() -> None:
    world = World(seed=5, slots=3, crash_rate=0.0, write_failure_rate=0.0)
    world.run(60.0, commands=False)
    world.reload(bad=True, canary=1)
    canary = set(world.state.rollout.canary) if world.state.rollout else set()
    world.settle(120.0)
    rollout = world.state.rollout
    assert rollout is not None and rollout.phase == "rolled_back", rollout
    assert "crash-looped on s1" in (rollout.reason or "")
    assert world.outdated() == []
    started_on_new = {b.slot for b in world.boxes.values() if b.spec == "s1"}
    assert started_on_new == canary


@pytest.mark.parametrize("seed", range(10))
def test_while_the_organisation_refuses_every_call_jobs_go_on_and_never_two(seed: int) -> None:
    """Windows of 10-60 s in which every read and write is refused, under the whole storm.

    Slots whose active agent exits meanwhile restart it in place (`planning.refused`;
    every other seed's image has the start gate, whose go needs no call):
    jobs keep being handed out; afterwards each slot is back to one active lane and
    its ready standby.
    """
    world = World(seed=seed, slots=3, crash_rate=0.0, outages=True, gated=seed % 2 == 1)
    world.run(600.0)
    assert world.refused, "no refusal window drawn"
    assert world.refused_jobs > 0, "no job started while the organisation refused our calls"
    assert len(world.done) > 30, f"only {len(world.done)} jobs done"
    world.settle(120.0)
    assert world.steady() == []
