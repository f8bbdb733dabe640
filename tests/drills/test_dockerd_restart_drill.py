"""Drill 4: dockerd restarts under a running supervisor.

The engine stopped and started here is the test's own (`private_engine`): its
own socket, data root, exec root and pid file. The host's engine, and whatever
else runs on it, is never touched; the fixture asserts that its pid is the same
afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.drills.private_engine import PrivateEngine, host_engine_pid, private_engine
from tests.real.rig import Rig, SlotSampler, assert_jobs_clean, make_rig, wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.daemon,
    pytest.mark.root,
    pytest.mark.serial(
        reason="stops and starts a whole Docker engine and its containerd (its own) under a "
        "running daemon: each start takes the cores for seconds, stalling the tests beside it"
    ),
]


@pytest.fixture
def engine(docker_client: Any, emulator_image: str) -> Iterator[PrivateEngine]:
    with private_engine() as started:
        started.copy_image(docker_client, emulator_image)
        yield started


@pytest.fixture
def rig(tmp_path: Path, engine: PrivateEngine, emulator_image: str) -> Iterator[Rig]:
    client = engine.client()
    try:
        for made in make_rig(tmp_path, client, emulator_image, count=2):
            made.env["DOCKER_HOST"] = engine.url
            yield made
    finally:
        client.close()


def test_private_engine_is_not_the_hosts(engine: PrivateEngine, docker_client: Any) -> None:
    """The drill's engine is a separate dockerd; stopping it leaves the host's running."""
    host_pid = host_engine_pid()
    assert host_pid is not None and host_pid != engine.pid
    assert engine.client().info()["DockerRootDir"] != docker_client.info()["DockerRootDir"]
    engine.stop()
    assert not engine.answers()
    assert host_engine_pid() == host_pid
    docker_client.ping()


def test_drill4_dockerd_restart_reconnects_readopts_and_refills(
    rig: Rig, engine: PrivateEngine
) -> None:
    """Stop dockerd under the supervisor, start it again: it notices, reconnects, refills.

    Docker's default ``live-restore`` is off (checked), so the agent containers
    die with the engine. The drill therefore runs while the agents are idle: a
    job running at that moment would be lost to the engine's restart, not to
    the manager. What must hold: the status shows Docker unreachable while it
    is down, no slot is parked for it, the supervisor reconnects by itself,
    re-adopts what exists, fills both slots again without ever having two live
    containers for one, and the new agents take jobs.
    """
    assert rig.client.info().get("LiveRestoreEnabled") is False
    rig.start_daemon()
    wait_for(rig.all_idle, 30, "two idle agents")
    before = rig.container_ids()
    jobs: list[int] = []
    with SlotSampler(rig.client, rig.instance) as sampler:
        engine.stop()

        def docker_state() -> str:
            return ((rig.snap() or {}).get("docker") or {}).get("state", "")

        wait_for(lambda: docker_state() == "unreachable", 20, "status: docker unreachable")
        down = rig.status()
        assert down is not None
        assert down["docker"]["state"] == "unreachable"
        assert down["docker"]["message"]
        engine.start()
        wait_for(lambda: docker_state() == "ok", 30, "status: docker ok again")
        try:
            wait_for(rig.all_idle, 60, "both slots idle after the engine restart")
        except AssertionError as exc:
            slots = (rig.snap() or {}).get("slots")
            raise AssertionError(f"{exc}: {slots}\n{rig.daemon_log()[-3000:]}") from None
        after = rig.container_ids()
        assert len(after) == 2 * rig.lanes
        assert not after & before, "the old agents died with the engine"
        snap = rig.snap() or {}
        assert not any(s["state"] == "parked" for s in snap["slots"]), snap["slots"]
        jobs = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(2)]
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 30, "jobs afterwards")
        wait_for(rig.all_idle, 30, "both slots refilled after the jobs")
    print(f"drill4: {sampler.errors} container listings failed while dockerd was down")
    assert sampler.errors > 0, "the sampler never saw the engine down"
    assert_jobs_clean(rig.org, jobs)
    sampler.assert_no_duplicates()
