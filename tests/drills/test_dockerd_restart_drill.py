"""Drill 4: dockerd restarts under a running supervisor.

The only test that stops the engine. It restores it in a ``finally`` exactly
as scripts/test.sh starts it, and waits until ``docker info`` answers again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import Rig, SlotSampler, assert_jobs_clean, make_rig, wait_for

pytestmark = pytest.mark.docker

DOCKERD = (
    "nohup dockerd --bridge=none --iptables=false --ip-masq=false >/tmp/gpuci-dockerd.log 2>&1 &"
)
PIDFILE = Path("/var/run/docker.pid")


def _docker_answers() -> bool:
    out = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return out.returncode == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def _dockerd_pid() -> int:
    pid = int(PIDFILE.read_text().strip())
    assert _alive(pid), f"dockerd pid {pid} from {PIDFILE} is not running"
    assert "dockerd" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    return pid


def _start_dockerd() -> None:
    """Start the engine as scripts/test.sh does, unless one already answers."""
    if _docker_answers():
        return
    # Not with this test's environment: its XDG_* directories are pytest temporaries, and
    # an engine that outlives them fails every later `exec` ("runc-process…: no such file").
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    subprocess.run(["sh", "-c", DOCKERD], check=True, timeout=30, env=env)
    wait_for(_docker_answers, 60, "docker info after restarting dockerd")


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=2)


def test_drill4_dockerd_restart_reconnects_readopts_and_refills(rig: Rig) -> None:
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
    try:
        with SlotSampler(rig.client, rig.instance) as sampler:
            pid = _dockerd_pid()
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not _alive(pid), 60, "dockerd to exit")

            def docker_state() -> str:
                return ((rig.snap() or {}).get("docker") or {}).get("state", "")

            wait_for(lambda: docker_state() == "unreachable", 20, "status: docker unreachable")
            down = rig.status()
            assert down is not None
            assert down["docker"]["state"] == "unreachable"
            assert down["docker"]["message"]
            _start_dockerd()
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
    finally:
        with contextlib.suppress(Exception):
            _start_dockerd()
        assert _docker_answers(), "dockerd could not be restarted; see /tmp/gpuci-dockerd.log"
        # Give back an engine that answers API calls, not only `docker info`.
        wait_for(lambda: rig.client.ping(), 30, "docker ping")
