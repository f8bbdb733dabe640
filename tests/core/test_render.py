"""`gpuci-tui status`: the plain-text table says what the standby of each slot is doing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.models import (
    AgentSnapshot,
    AgentVersionsSnapshot,
    DisabledAgents,
    DiskSnapshot,
    GpuGateSnapshot,
    ImageAgentVersion,
    PoolSummary,
    SlotSnapshot,
    SlotState,
    SupervisorSnapshot,
)


def test_status_shows_standby_per_slot_and_explains_the_disabled_agents() -> None:
    snap = SupervisorSnapshot(
        taken_at=100.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=2,
        standby=True,
        pool_summary=PoolSummary(
            pool_id=7,
            name="gpu",
            online=4,
            disabled=4,
            standby=2,
            disabled_why=DisabledAgents(busy=1, standby=2, others=1),
        ),
        slots=(
            SlotSnapshot(slot=0, name="h-0", state=SlotState.IDLE, standby="ready"),
            SlotSnapshot(slot=1, name="h-1-b", state=SlotState.BUSY, standby="booting"),
        ),
    )
    text = render_status(snap, now=100.0)
    lines = text.splitlines()
    assert "2 slots, hot standby on" in lines[0]
    assert "4 disabled (1 busy, 2 standby, 1 not ours)" in text
    header = next(line for line in lines if line.startswith("SLOT"))
    assert header.split()[:4] == ["SLOT", "NAME", "STATE", "STANDBY"]
    assert any(line.split()[:4] == ["1", "h-1-b", "busy", "booting"] for line in lines)


def test_status_says_which_gpus_are_held_or_quarantined_and_why() -> None:
    why = "GPU 0 used by pid 4242 python, 61 GB, not ours"
    snap = SupervisorSnapshot(
        taken_at=100.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=2,
        slots=(
            SlotSnapshot(
                slot=0, name="h-0", state=SlotState.HELD, gate="held", gate_reason=why,
                gate_code="foreign_process", message=f"held: {why}",
            ),
            SlotSnapshot(slot=1, name="h-1", state=SlotState.QUARANTINED, gate="quarantined",
                         message="quarantined: GPU 1: Xid 79 (GPU fell off the bus)"),
        ),
        gpu_gates=(
            GpuGateSnapshot(0, "GPU-0", "held", why, "foreign_process"),
            GpuGateSnapshot(1, "GPU-1", "quarantined", "GPU 1: Xid 79 (GPU fell off the bus)", "xid"),
            GpuGateSnapshot(2, "GPU-2"),
        ),
    )  # fmt: skip
    lines = render_status(snap, now=100.0).splitlines()
    assert "gpus: 2 ok" in lines
    assert f"  GPU 0 held: {why}" in lines
    assert "  GPU 1 quarantined: GPU 1: Xid 79 (GPU fell off the bus)" in lines
    assert "  (check the GPU, then: gpuci-tui gpu clear GPU)" in lines
    assert f"  h-0: held: {why}" in lines
    assert any(line.split()[:3] == ["1", "h-1", "quarantined"] for line in lines)


def test_status_gives_the_daemons_uptime_from_its_own_clock_or_nothing() -> None:
    base = SupervisorSnapshot(
        taken_at=10_000.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=1,
        mode="daemon",
        pid=27330,
    )
    # The reader's clock (now) is a day off: the uptime is the daemon's own figure.
    started = replace(base, started_at=10_000.0 - 3 * 3600 - 120)
    assert render_status(started, now=100.0).startswith("gpuci-tui daemon pid 27330, up 3h02m —")
    assert render_status(base, now=100.0).startswith("gpuci-tui daemon pid 27330 —")
    stepped_back = replace(base, started_at=10_060.0)
    assert render_status(stepped_back, now=100.0).startswith("gpuci-tui daemon pid 27330 —")


def one_pool(pool: PoolSummary, **changes: Any) -> SupervisorSnapshot:
    """A one-slot daemon's snapshot of pool ``gpu``, taken at 100.0."""
    snap = SupervisorSnapshot(
        taken_at=100.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=1,
        pool_summary=pool,
    )
    return replace(snap, **changes)


def test_status_says_how_old_the_pool_and_queue_figures_are() -> None:
    """The agents and the queue are read at different times: each figure says when."""
    snap = one_pool(
        PoolSummary(
            name="gpu", online=2, queued_jobs=3, running_jobs=1, read_at=97.0, jobs_read_at=75.0
        )
    )
    text = render_status(snap, now=100.0)
    assert "pool (read 3s ago): 2 online" in text
    assert "jobs 3 queued (read 25s ago), 1 running" in text
    old = PoolSummary(pool_id=7, name="gpu", online=2)  # a daemon from before the ages
    older = render_status(replace(snap, pool_summary=old), now=100.0)
    assert "pool: 2 online" in older, "a daemon that does not say: no age, not a made-up one"
    queue = replace(snap.pool_summary, jobs_read_at=None)
    assert "jobs queue not read yet, 1 running" in render_status(replace(snap, pool_summary=queue))


def test_status_says_a_pool_never_read_is_not_read_yet_not_zeros() -> None:
    """Before the first read (the organisation unreachable): no zeros that look like facts."""
    snap = SupervisorSnapshot(
        taken_at=100.0, org_url="https://dev.azure.com/o", pool="gpu", instance="i",
        desired_count=1, pool_summary=PoolSummary(name="gpu"),
    )  # fmt: skip
    lines = render_status(snap, now=100.0).splitlines()
    assert "pool: not read yet" in lines
    assert not any("0 online" in line or "0 queued" in line for line in lines)


def test_status_says_which_image_each_lane_runs_by_id_and_digest() -> None:
    image_id, other = "sha256:" + "3f2a1b9c0d4e" + "0" * 52, "sha256:" + "9" * 64
    digest = "reg:5000/agent@sha256:" + "abcdef123456" + "1" * 52
    running = AgentSnapshot("a", "h-0", "ready", container_id="c0", image="reg:5000/agent:1",
                            image_id=image_id, repo_digest=digest)  # fmt: skip
    standby = replace(running, lane="b", name="h-0-b", container_id="c1")
    new = replace(running, name="h-1", container_id="c2", image_id=other, repo_digest="")
    snap = SupervisorSnapshot(
        taken_at=100.0, org_url="https://dev.azure.com/o", pool="gpu", instance="i",
        desired_count=3,
        slots=(
            SlotSnapshot(slot=0, name="h-0", state=SlotState.IDLE, agents=(running, standby),
                         image="reg:5000/agent:1", image_id=image_id, repo_digest=digest),
            SlotSnapshot(slot=1, name="h-1", state=SlotState.IDLE, agents=(new,),
                         image="reg:5000/agent:1", image_id=other),
        ),
    )  # fmt: skip
    lines = render_status(snap, now=100.0).splitlines()
    assert (
        "image: reg:5000/agent:1 (id 3f2a1b9c0d4e, digest sha256:abcdef123456) on 2 lanes,"
        " start gate: no" in lines
    )
    assert "image: reg:5000/agent:1 (id 999999999999) on 1 lane, start gate: no" in lines
    gated = replace(snap, slots=(replace(snap.slots[1], agents=(replace(new, start_gate=True),)),))
    assert "image: reg:5000/agent:1 (id 999999999999) on 1 lane, start gate: yes" in (
        render_status(gated, now=100.0).splitlines()
    )
    idle = replace(snap, slots=(replace(snap.slots[0], agents=()),))
    assert (
        "image: reg:5000/agent:1 (configured; no container runs it)"
        in render_status(idle, now=100.0).splitlines()
    )


def test_status_shows_dockers_free_space_and_its_limits_when_watched() -> None:
    gib = 1024**3
    snap = SupervisorSnapshot(
        taken_at=100.0, org_url="https://dev.azure.com/o", pool="gpu", instance="i",
        desired_count=1,
    )  # fmt: skip
    assert "disk:" not in render_status(snap, now=100.0)  # no disk watch: nothing said
    low = DiskSnapshot(
        state="critical", root="/var/lib/docker", free_bytes=gib, hard_floor_bytes=2 * gib,
        min_free_bytes=20 * gib, checked_at=95.0, images_removed=3,
        message="1.0 GiB free on /var/lib/docker, below the hard floor 2.0 GiB: no pull starts",
    )  # fmt: skip
    line = next(
        x for x in render_status(replace(snap, disk=low), now=100.0).splitlines() if "disk" in x
    )
    assert line == (
        "disk: critical (checked 5s ago): 1.0 GiB free on /var/lib/docker, below the hard "
        "floor 2.0 GiB: no pull starts (min_free 20.0 GiB, hard floor 2.0 GiB); 3 unused "
        "images removed"
    )


def test_status_shows_the_agent_versions_and_warns_when_they_differ() -> None:
    base = SupervisorSnapshot(
        taken_at=100.0, org_url="https://dev.azure.com/o", pool="gpu", instance="i", desired_count=1
    )
    assert "agents:" not in render_status(base, now=100.0)  # not watched: nothing said
    versions = AgentVersionsSnapshot(
        org_version="4.270.0",
        images=(ImageAgentVersion("", "gpuci-agent:1", "4.264.2"),),
        cached="4.270.0",
        warnings=("group 's image has agent 4.264.2; the organisation offers 4.270.0",),
        message="",
        checked_at=90.0,
    )
    text = render_status(replace(base, agent_versions=versions), now=100.0)
    assert (
        "agents: organisation 4.270.0; image gpuci-agent:1 has 4.264.2; cached package 4.270.0 "
        "(mounted into new containers of older images)"
    ) in text
    assert "  WARNING: group 's image has agent 4.264.2; the organisation offers 4.270.0" in text


def test_status_says_what_the_calls_cost_and_a_queue_read_at_the_cap() -> None:
    from gpuci_tui.core.models import AzureUsage

    snap = one_pool(
        PoolSummary(
            name="gpu",
            online=2,
            queued_jobs=200,
            queued_capped=True,
            ours_only=True,
            read_at=95.0,
            jobs_read_at=90.0,
        ),
        azure_usage=AzureUsage(
            requests_last_minute=9,
            bytes_last_minute=20_480,
            cap_per_minute=60,
            held_last_minute=2,
            rate_limit_remaining=150,
            rate_limit_limit=200,
            rate_limit_reset_at=400.0,
            read_at=100.0,
        ),
    )
    text = render_status(snap, now=100.0)
    assert (
        "  calls: 9 requests/min, 20 KiB/min received; identity's budget 150/200 left "
        "(resets in 5 min); cap 60/min, 2 held back in the last minute"
    ) in text
    assert "2 online, 0 offline, 0 disabled (ours); jobs 200 or more queued (read 10s ago)" in text
    assert "jobs 200 queued" not in text
