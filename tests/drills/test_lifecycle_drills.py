"""Drills 1, 2, 3 and 9: drain, restart and SIGKILL of the daemon while agents are busy.

Each runs the real `gpuci-tui run` against the simulated organisation with
three slots, samples the engine's container list every 100 ms for the whole
drill (never two live containers for one slot), checks every job in the
organisation's record (succeeded, handed out once, nothing abandoned) and that
the slots are full of idle, enabled agents again at the end: a job queued
afterwards is taken.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import (
    Rig,
    SlotSampler,
    assert_jobs_clean,
    make_rig,
    slot_of_agent,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

SLOTS = 3


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=SLOTS)


def _slot_of_job(rig: Rig, job_id: int) -> int:
    name = rig.org.job(job_id).agent_name
    assert name is not None, f"job {job_id} has no agent"
    return slot_of_agent(name)


def _container_of(rig: Rig, slot: int) -> str | None:
    return rig.slot(slot)["container_id"]


def _serves_again(rig: Rig, jobs: list[int]) -> None:
    """Every slot holds an idle agent, and new jobs are taken (the agents are enabled)."""
    wait_for(rig.all_idle, 30, "every slot idle again")
    more = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(SLOTS)]
    wait_for(
        lambda: all(rig.org.job(j).result is not None for j in more), 30, "jobs after the drill"
    )
    jobs.extend(more)
    wait_for(rig.all_idle, 30, "every slot refilled after those jobs")


def test_drill1_drain_all_while_every_agent_is_busy(rig: Rig) -> None:
    """Drain --all with all three agents busy: each job finishes, nothing new starts."""
    rig.start_daemon()
    wait_for(rig.all_idle, 30, "three idle agents")
    with SlotSampler(rig.client, rig.instance) as sampler:
        before = rig.container_ids()
        jobs = [rig.org.queue_job(rig.pool_id, duration=4.0) for _ in range(SLOTS)]
        wait_for(lambda: len(rig.busy_slots()) == SLOTS, 20, "every agent busy")
        out = rig.cli("drain", "--all", "--wait", "--timeout", "60", timeout=90)
        assert out.returncode == 0, out.stdout + out.stderr
        assert_jobs_clean(rig.org, jobs)
        assert rig.states() == ["drained"] * SLOTS
        # Docker may list an agent as running for a moment after its "die" event.
        wait_for(lambda: rig.containers() == [], 10, "the drained agents gone")
        started = set().union(*sampler.seen.values())
        assert started <= before, "a drain must not start containers"
        out = rig.cli("resume", "--all")
        assert out.returncode == 0, out.stderr
        _serves_again(rig, jobs)
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates()


def test_drill2_restart_all_while_some_agents_are_busy(rig: Rig) -> None:
    """Restart --all with two of three busy: the idle one is replaced now, the busy ones after."""
    rig.start_daemon()
    wait_for(rig.all_idle, 30, "three idle agents")
    with SlotSampler(rig.client, rig.instance) as sampler:
        jobs = [rig.org.queue_job(rig.pool_id, duration=5.0) for _ in range(2)]
        wait_for(lambda: len(rig.busy_slots()) == 2, 20, "two busy agents")
        busy = {_slot_of_job(rig, j): j for j in jobs}
        (idle,) = set(range(SLOTS)) - set(busy)
        before = {s: _container_of(rig, s) for s in range(SLOTS)}
        out = rig.cli("restart", "--all")
        assert out.returncode == 0, out.stderr
        assert "after their job" in out.stdout
        # While its job runs, a busy slot keeps its container; the idle slot is replaced.
        while any(rig.org.job(j).result is None for j in jobs):
            for slot, job in busy.items():
                current = _container_of(rig, slot)
                if rig.org.job(job).result is None:
                    assert current == before[slot], f"slot {slot} replaced mid-job"
        assert_jobs_clean(rig.org, jobs)
        wait_for(rig.all_idle, 30, "every slot idle after the restart")
        after = {s: _container_of(rig, s) for s in range(SLOTS)}
        assert all(after[s] != before[s] for s in range(SLOTS)), (before, after)
        assert before[idle] not in rig.container_ids()
        assert not any(s["restart_pending"] for s in (rig.snap() or {})["slots"])
        _serves_again(rig, jobs)
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates()


def test_drill3_sigkill_daemon_while_busy_then_adopt(rig: Rig) -> None:
    """SIGKILL `gpuci-tui run` with three busy agents; a new daemon adopts, never duplicates."""
    daemon = rig.start_daemon()
    wait_for(rig.all_idle, 30, "three idle agents")
    with SlotSampler(rig.client, rig.instance) as sampler:
        jobs = [rig.org.queue_job(rig.pool_id, duration=7.0) for _ in range(SLOTS)]
        wait_for(lambda: len(rig.busy_slots()) == SLOTS, 20, "every agent busy")
        before = {s: _container_of(rig, s) for s in range(SLOTS)}
        everything = rig.container_ids()  # the busy agents and their standbys
        assert len(everything) == SLOTS * rig.lanes
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(10)
        assert rig.container_ids() == everything, "SIGKILL must not touch agents"
        rig.start_daemon()
        wait_for(lambda: rig.busy_slots() == list(range(SLOTS)), 20, "busy agents adopted as busy")
        assert {s: _container_of(rig, s) for s in range(SLOTS)} == before
        assert rig.container_ids() == everything, "adoption must not start containers"
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 30, "the jobs")
        assert_jobs_clean(rig.org, jobs)
        _serves_again(rig, jobs)
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates()


def test_drill9_job_outlives_restart_its_container_is_left_alone(rig: Rig) -> None:
    """`restart 0`-style on a busy slot: same container until the job ends, then replaced."""
    rig.start_daemon()
    wait_for(rig.all_idle, 30, "three idle agents")
    with SlotSampler(rig.client, rig.instance) as sampler:
        job = rig.org.queue_job(rig.pool_id, duration=6.0)
        wait_for(lambda: len(rig.busy_slots()) == 1, 20, "a busy agent")
        slot = _slot_of_job(rig, job)
        original = _container_of(rig, slot)
        out = rig.cli("restart", str(slot))
        assert out.returncode == 0, out.stderr
        assert rig.slot(slot)["restart_pending"] is True
        checks = 0
        while rig.org.job(job).result is None:
            snap = rig.slot(slot)
            if rig.org.job(job).result is None:
                assert snap["container_id"] == original, "the busy container was replaced"
                assert original in rig.container_ids(), "the busy container was stopped"
                checks += 1
        assert checks >= 10, f"only {checks} checks while the job ran"
        assert_jobs_clean(rig.org, [job])
        wait_for(
            lambda: (
                rig.slot(slot)["container_id"] not in (None, original)
                and rig.slot(slot)["state"] == "idle"
            ),
            30,
            "the slot replaced after the job",
        )
        assert rig.slot(slot)["restart_pending"] is False
        name = rig.slot(slot)["name"]
        # The restart disabled the old agent; the replacement must be enabled again.
        wait_for(lambda: getattr(rig.org.find_agent(name), "enabled", False), 10, "re-enabled")
        jobs = [job]
        _serves_again(rig, jobs)
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates()
