"""Reload drills (issue 20 item 3): a new agent image under the real daemon and Docker engine.

The daemon is the real `gpuci-tui run`, reloaded through the product's own entry
points: SIGHUP (systemd's ``ExecReload``) and ``gpuci-tui reload --canary N``. A "new
image" is the emulator image under a second tag (never pulled); a bad one is the
crash-looping fixture image. The engine's container list is sampled every 100 ms for the whole drill
(never two live containers for one lane), and every job is checked in the
organisation's record: succeeded, handed out once, nothing abandoned or canceled.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_LANE, LABEL_SLOT
from tests.real.rig import (
    STARTUP,
    EventRecorder,
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


@pytest.fixture
def v2_image(docker_client: Any, emulator_image: str) -> Iterator[str]:
    """The emulator image under a second tag: another image reference, so another spec.

    The tag is the test's own: a drill beside it removes its own tag when it ends.
    """
    v2 = f"gpuci-drill/agent:v2-{uuid.uuid4().hex[:8]}"
    docker_client.images.get(emulator_image).tag(v2)
    yield v2
    with contextlib.suppress(Exception):  # a container of a failed drill may still use it
        docker_client.images.remove(v2)  # only the tag: the emulator image stays


def write_image(rig: Rig, image: str) -> None:
    """Write ``image`` into the daemon's configuration file."""
    save_config(
        replace(rig.config, agents=replace(rig.config.agents, image=image)), rig.config_path
    )


def reload_by_sighup(rig: Rig, image: str) -> str:
    """Write ``image`` and send the daemon SIGHUP; its answer as the daemon logs it."""
    write_image(rig, image)
    before = rig.daemon_log().count("reload on SIGHUP: ")
    rig.procs[-1].send_signal(signal.SIGHUP)
    wait_for(lambda: rig.daemon_log().count("reload on SIGHUP: ") > before, 10, "the reload")
    line = rig.daemon_log().split("reload on SIGHUP: ")[-1]
    return line


def reload_by_cli(rig: Rig, image: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Write ``image`` and run ``gpuci-tui reload ARGS``; it must succeed."""
    write_image(rig, image)
    answer = rig.cli("reload", *args)
    assert answer.returncode == 0, (answer.stdout, answer.stderr)
    return answer


def lanes(rig: Rig) -> dict[tuple[int, str], tuple[str, str]]:
    """(slot, lane) -> (container id, image reference) of each running agent container."""
    listed = rig.client.api.containers(filters={"label": f"{LABEL_INSTANCE}={rig.instance}"})
    return {
        (int(c["Labels"][LABEL_SLOT]), c["Labels"].get(LABEL_LANE, "a")): (c["Id"], c["Image"])
        for c in listed
        if c.get("State") == "running"
    }


def rollout(rig: Rig) -> dict[str, Any] | None:
    snap = rig.snap() or {}
    found = snap.get("rollouts") or []
    return found[0] if found else None


def start(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 40, "every slot idle with a ready standby")


def starts(recorder: EventRecorder, image: str, since: float) -> dict[tuple[int, str], float]:
    """(slot, lane) -> seconds after ``since`` of the first start of a container of ``image``."""
    found: dict[tuple[int, str], float] = {}
    for event in list(recorder.events):
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        if event.get("Action") != "start" or attrs.get("image") != image:
            continue
        key = (int(attrs[LABEL_SLOT]), attrs.get(LABEL_LANE, "a"))
        found.setdefault(key, event["timeNano"] / 1e9 - since)
    return found


def active_lane(rig: Rig, number: int) -> str:
    lane: str = next(a["lane"] for a in rig.slot(number)["agents"] if a.get("role") == "active")
    return lane


def test_reload_to_a_new_image_while_a_job_runs(
    rig: Rig, emulator_image: str, v2_image: str
) -> None:
    start(rig)
    recorder = EventRecorder(rig.client, rig.instance, actions=("start",))
    with SlotSampler(rig.client, rig.instance) as sampler, recorder:
        job = rig.org.queue_job(rig.pool_id, duration=12.0)
        busy = wait_for(rig.busy_slots, 20, "the job taken")[0]
        before = lanes(rig)
        actives = {n: active_lane(rig, n) for n in range(SLOTS)}
        busy_lane = actives[busy]
        other = "b" if busy_lane == "a" else "a"
        t0 = time.time()
        answer = reload_by_sighup(rig, v2_image)
        assert "agents.image" in answer and "slot" in answer, answer
        idle = [(n, lane) for n in range(SLOTS) for lane in "ab" if n != busy]
        switched = wait_for(
            lambda: (
                (found := starts(recorder, v2_image, t0)).keys() >= {*idle, (busy, other)} and found
            ),
            30,
            "every idle lane, and the busy slot's standby, on the new image",
        )
        # The busy lane still runs its job on the old image.
        assert lanes(rig)[(busy, busy_lane)][0] == before[(busy, busy_lane)][0]
        assert rig.org.job(job).result is None, "the job is still running"
        wait_for(lambda: rig.org.job(job).result is not None, 30, "the job finished")
        wait_for(lambda: (rollout(rig) or {}).get("state") == "done", 40, "roll-out done")
        wait_for(rig.all_idle, 30, "every slot idle again")
        assert {image for _cid, image in lanes(rig).values()} == {v2_image}
        more = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(SLOTS)]
        wait_for(lambda: all(rig.org.job(j).result for j in more), 30, "jobs on the new image")
        sampler.assert_no_duplicates()
    assert_jobs_clean(rig.org, [job, *more])
    # Standbys first: in each idle slot the lane that was the standby switched at once, the
    # active one after the hand-over to it.
    for number in range(SLOTS):
        if number == busy:
            continue
        active = actives[number]
        standby = "b" if active == "a" else "a"
        assert switched[(number, standby)] < 2.0, f"slot {number}: {switched}"
        assert switched[(number, standby)] < switched[(number, active)], switched
        # The active's turn comes when the new standby is ready (its agent's start-up).
        turn = switched[(number, standby)] + sum(STARTUP)
        assert switched[(number, active)] < turn + 2.0, f"slot {number}: {switched}"
    assert switched[(busy, other)] < 2.0
    # The job's history row names the image it ran on: the old one.
    rows = json.loads(rig.cli("history", "--json").stdout)
    (row,) = [r for r in rows if r["request_id"] == job]
    assert row["image"] == emulator_image
    assert slot_of_agent(row["agent"]) == busy
    print(f"\nreload drill: new-image starts (s after the reload): {sorted(switched.items())}")


def test_a_crash_looping_canary_rolls_back(
    rig: Rig, emulator_image: str, broken_image: str
) -> None:
    start(rig)
    recorder = EventRecorder(rig.client, rig.instance, actions=("start",))
    with SlotSampler(rig.client, rig.instance) as sampler, recorder:
        t0 = time.time()
        jobs = [rig.org.queue_job(rig.pool_id, duration=2.0) for _ in range(2)]
        answer = reload_by_cli(rig, broken_image, "--canary", "1", "--canary-jobs", "1")
        assert "canary slots" in answer.stdout, answer.stdout
        jobs += [rig.org.queue_job(rig.pool_id, duration=1.0) for _ in range(4)]
        done = wait_for(
            lambda: (r := rollout(rig)) and r["state"] == "rolled_back" and r, 60, "rollback"
        )
        assert "crash-looped on gpuci-fixture/broken:1" in done["reason"], done
        status = rig.cli("status").stdout  # what the operator reads: the reason
        assert f"rolled back to {emulator_image}: {done['reason']}" in status, status
        (canary,) = done["canary_slots"]
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 60, "every job done")
        wait_for(rig.all_idle, 40, "every slot idle again on the old image")
        # (Compared with the bad image, not the emulator's tag: other suites on this engine
        # may re-tag the emulator image meanwhile, and Docker then names it by its id.)
        assert broken_image not in {image for _cid, image in lanes(rig).values()}
        sampler.assert_no_duplicates()
    # Only the canary ever started a container of the bad image.
    bad = starts(recorder, broken_image, t0)
    assert bad and {number for number, _lane in bad} == {canary}
    assert_jobs_clean(rig.org, jobs)


def test_a_canary_roll_out_survives_a_daemon_restart(rig: Rig, v2_image: str) -> None:
    start(rig)
    with SlotSampler(rig.client, rig.instance) as sampler:
        reload_by_cli(rig, v2_image, "--canary", "1", "--canary-jobs", "50")
        (canary,) = wait_for(lambda: (r := rollout(rig)) and r["canary_slots"], 10, "canary")
        on_v2 = {(canary, lane) for lane in "ab"}
        wait_for(
            lambda: (
                {k for k, (_c, image) in lanes(rig).items() if image == v2_image} == on_v2
                and rig.all_idle()
            ),
            40,
            "the canary slot on the new image, the others idle on the old",
        )
        kept = {k: cid for k, (cid, _image) in lanes(rig).items() if k[0] != canary}
        daemon = rig.procs[-1]
        daemon.terminate()  # a plain stop: the agents stay
        daemon.wait(30)
        rig.start_daemon()
        wait_for(lambda: rollout(rig) is not None and rig.all_idle(), 30, "adopted")
        # Lastingly: still canarying; the other slots keep their containers on the old image.
        until = time.monotonic() + 4.0
        while time.monotonic() < until:
            assert (rollout(rig) or {}).get("state") == "canary", rollout(rig)
            now = {k: cid for k, (cid, _image) in lanes(rig).items() if k[0] != canary}
            assert now == kept, "a slot that is no canary changed image after the restart"
            time.sleep(0.1)  # the pace of a lasting state's checks, not a wait
        assert "roll-out kept across the restart" in rig.daemon_log()
        assert f"(canary on slot {canary}: " in rig.cli("status").stdout
        jobs = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(SLOTS)]
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 30, "jobs after the restart")
        sampler.assert_no_duplicates()
    assert_jobs_clean(rig.org, jobs)
