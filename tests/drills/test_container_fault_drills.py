"""Drills 7 and 8: a crash-looping image, and an agent killed by the OOM killer.

Both run the real daemon on the real engine; Docker's own ``start`` events
(not the supervisor's word) are what the crash-loop drill counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.engine.settings import SupervisorConfig
from tests.core.lifecycle_helpers import starts_per_minute_with
from tests.real.rig import (
    EventRecorder,
    Rig,
    SlotSampler,
    assert_jobs_clean,
    make_rig,
    slot_of_agent,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

SCALE = 4.0
"""Drill 7 runs the default backoff rules four times faster: 15 s stand for a minute."""
DEFAULTS = SupervisorConfig()


CRASH_RULES = {
    "backoff_base": DEFAULTS.backoff_base / SCALE,
    "backoff_max": DEFAULTS.backoff_max / SCALE,
    "park_after": DEFAULTS.park_after,
}


@pytest.fixture
def crash_rig(tmp_path: Path, docker_client: Any, broken_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, broken_image, count=2, **CRASH_RULES)


@pytest.fixture
def oom_rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(
        tmp_path, docker_client, emulator_image, count=2, agents={"mem_limit": "24m"}
    )


def test_default_rules_allow_at_most_six_starts_per_minute() -> None:
    """The defaults (2 s doubling, park after 5) give 5 starts, then parked, within a minute."""
    assert starts_per_minute_with(DEFAULTS) == DEFAULTS.park_after <= 6
    scaled = SupervisorConfig(
        backoff_base=DEFAULTS.backoff_base / SCALE,
        backoff_max=DEFAULTS.backoff_max / SCALE,
        park_after=DEFAULTS.park_after,
    )
    # The scaled rules of the real drill below give the same count in a quarter of the time.
    assert starts_per_minute_with(scaled, 60.0 / SCALE) == starts_per_minute_with(DEFAULTS)


def test_drill7_crash_looping_image_backs_off_then_parks_with_reason(crash_rig: Rig) -> None:
    """Exit 1 at once: at most 6 starts per (scaled) minute per slot, then parked, reason shown.

    The backoff rules are scaled by 1/4 (base 0.5 s, cap 15 s, park after 5 as
    by default) so that 15 s of drill stand for the issue's minute; the unit
    test above shows the default rules give the same count per real minute.
    Docker's own start events are counted, and the gaps between them must be
    at least the backoff the rules prescribe.
    """
    rig = crash_rig
    window = 60.0 / SCALE
    t0 = time.time()
    recorder = EventRecorder(rig.client, rig.instance)
    with recorder, SlotSampler(rig.client, rig.instance) as sampler:
        rig.start_daemon()
        wait_for(lambda: rig.states() == ["parked", "parked"], 2 * window, "parked slots")
        parked_at = time.time()
        # Parked means parked: nothing starts for a while afterwards.
        wait_for(lambda: time.time() > max(parked_at + 3, t0 + window), 2 * window, "window")
    starts = recorder.times("start")
    assert set(starts) == {"0", "1"}, starts
    for slot, times in starts.items():
        assert len(times) == DEFAULTS.park_after <= 6, (slot, times)
        assert times[-1] - times[0] < window, (slot, times)
        for k, (a, b) in enumerate(zip(times, times[1:], strict=False), start=1):
            delay = CRASH_RULES["backoff_base"] * 2 ** (k - 1)
            assert b - a >= delay - 0.05, f"slot {slot}: start {k + 1} after {b - a:.2f} s"
    sampler.assert_no_duplicates(min_samples=10)
    snap = rig.status()
    assert snap is not None
    for slot in snap["slots"]:
        assert slot["state"] == "parked"
        assert slot["failures"] == DEFAULTS.park_after
        assert slot["last_exit"]["code"] == 1
        assert f"parked after {DEFAULTS.park_after} failed starts" in slot["message"]
    text = rig.cli("status").stdout
    assert "parked" in text
    assert "exit code 1" in text


def test_drill8_oom_killed_agent_is_reported_and_refilled(oom_rig: Rig) -> None:
    """A job eats memory under mem_limit 24m: the kernel kills the agent; status says OOM.

    The job itself is lost with its agent (the organisation abandons it when
    the heartbeats stop or the replacement registers under the same name): that
    is the job's doing, not the manager's, and the drill checks exactly that
    (abandoned for one of those two reasons, handed out once).
    The slot is refilled and serves the next job.
    """
    rig = oom_rig
    rig.start_daemon()
    wait_for(rig.all_idle, 30, "two idle agents")
    with SlotSampler(rig.client, rig.instance) as sampler:
        job = rig.org.queue_job(rig.pool_id, kind="oom", duration=5.0)
        wait_for(lambda: rig.org.job(job).agent_name, 20, "the oom job taken")
        slot = slot_of_agent(rig.org.job(job).agent_name or "-x-0")

        def oom_reported() -> bool:
            last = rig.slot(slot).get("last_exit") or {}
            return bool(last.get("oom"))

        wait_for(oom_reported, 30, "OOM in the status")
        snap = rig.status()
        assert snap is not None
        last = next(s for s in snap["slots"] if s["slot"] == slot)["last_exit"]
        assert last["oom"] is True
        assert last["code"] == 137
        assert "OOM" in last["reason"]
        assert "OOM" in rig.cli("status").stdout
        wait_for(rig.all_idle, 30, "the slot refilled")
        wait_for(lambda: rig.org.job(job).result is not None, 30, "the oom job's end")
        lost = rig.org.job(job)
        # Whichever the organisation notices first: the heartbeats stopped, or the
        # slot's replacement registered under the dead agent's name.
        assert lost.result == "abandoned", lost
        assert lost.note in (
            "the agent stopped heartbeating",
            "the agent registration was replaced",
        ), lost
        assert lost.assign_count == 1
        jobs = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(2)]
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 30, "jobs afterwards")
        wait_for(rig.all_idle, 30, "both slots refilled")
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates(min_samples=10)
