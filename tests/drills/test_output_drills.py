"""The agents' own lines and the start gate, with the real daemon, Docker and emulator.

The emulator prints the real agent's lines (``Listening for Jobs``, ``Running
job: NAME``, ``Job NAME completed with result: R``) and, its image carrying the
start gate label, waits after registering for the daemon's go. These drills
check what the daemon makes of them on the real engine:

* it follows each container's output and acts on the lines (registered, go,
  the job's name) without a faster poll;
* a job that prints a fake "completed" line while it runs does not make the
  daemon enable the slot's standby: that waits for Docker's ``die``, and the
  slot never runs two jobs at once;
* a container the daemon cannot give its go to (the engine refuses the write:
  tests/drills/no_go_daemon.py) is stopped, never gets a session, and takes no
  job; the slot backs off and parks like a crash loop.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixture_images import image_lock
from tests.real.rig import (
    EventRecorder,
    Rig,
    assert_jobs_clean,
    assert_one_job_per_slot_at_a_time,
    make_rig,
    slot_of_agent,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture(scope="module")
def emulator_image(docker_client: Any) -> str:
    """The emulator under a tag of its own script's content.

    The shared tag may be rebuilt meanwhile from another checkout's script (another
    version on the same engine); these drills need this one's lines and gate.
    """
    from gpuci_tui.sim.image import agent_script, build_emulator_image

    digest = hashlib.sha256(agent_script()).hexdigest()[:12]
    tag = f"gpuci-sim/agent:h{digest}"
    # Under the machine-wide lock, as every fixture image: two workers may build it at once.
    with image_lock(tag):
        return build_emulator_image(docker_client, tag)


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1, agents={"standby": True})


class EnabledWatch:
    """When each agent of the organisation turned enabled, and which ever were online.

    Sampled every 20 ms; an agent enabled when the watch begins counts from then.
    """

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.turned_enabled: list[tuple[str, float]] = []
        self.online: set[str] = set()
        self._enabled: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="enabled-watch", daemon=True)

    def __enter__(self) -> EnabledWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            now = time.time()
            agents = self.rig.org.agents(self.rig.pool_id)
            self.online |= {agent.name for agent in agents if agent.online}
            enabled = {agent.name for agent in agents if agent.enabled}
            self.turned_enabled += [(name, now) for name in sorted(enabled - self._enabled)]
            self._enabled = enabled


def test_the_daemon_acts_on_the_agents_own_lines(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "an idle agent and its ready standby")
    job = rig.org.queue_job(rig.pool_id, pipeline="nightly - gpu", duration=1.0)
    wait_for(lambda: rig.org.job(job).result is not None, 30, "the job")
    wait_for(rig.all_idle, 60, "the slot refilled")
    log = rig.daemon_log()
    for said in ("registered; waits for the go", "given the go", "runs job 'nightly - gpu'"):
        assert said in log, f"{said!r} not in the daemon's events"
    assert "says job 'nightly - gpu' completed: Succeeded" in log
    assert_jobs_clean(rig.org, [job])


def test_a_job_faking_completed_never_puts_two_jobs_on_the_slot(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "an idle agent and its ready standby")
    with EventRecorder(rig.client, rig.instance) as events, EnabledWatch(rig) as watch:
        faker = rig.org.queue_job(rig.pool_id, duration=6.0, kind="fake_completed")
        wait_for(lambda: rig.org.job(faker).state == "running", 30, "the faking job running")
        runner = rig.org.job(faker).agent_name
        assert runner is not None
        after = [rig.org.queue_job(rig.pool_id, duration=0.5) for _ in range(2)]
        wait_for(lambda: all(rig.org.job(j).result for j in [faker, *after]), 60, "all jobs")
    jobs = [faker, *after]
    assert_jobs_clean(rig.org, jobs)
    assert_one_job_per_slot_at_a_time(rig.org, jobs)
    # The faked line came halfway (3 s in); the standby was enabled only after the die.
    faked = rig.org.job(faker)
    assert faked.assign_time is not None and faked.finish_time is not None
    standby_enabled = [
        at
        for name, at in watch.turned_enabled
        if name != runner
        and slot_of_agent(name) == slot_of_agent(runner)
        and at > faked.assign_time
    ]
    died = [t for times in events.times("die").values() for t in times]
    assert died, "the faking agent's container died"
    first_die = min(t for t in died if t > faked.assign_time)
    assert standby_enabled and min(standby_enabled) >= first_die - 0.05, (
        standby_enabled,
        first_die,
    )
    nxt = min(rig.org.job(j).assign_time or 1e18 for j in after)
    assert nxt >= faked.finish_time


def test_a_container_whose_go_cannot_be_written_is_stopped_and_takes_no_job(rig: Rig) -> None:
    """The engine refuses the go file (tests/drills/no_go_daemon.py): stopped, never enabled."""
    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    with EventRecorder(rig.client, rig.instance) as events, EnabledWatch(rig) as watch:
        rig.start_daemon(module="tests.drills.no_go_daemon")
        wait_for(lambda: rig.slot(0)["state"] == "parked", 90, "the slot parked")
    slot = rig.slot(0)
    assert "could not give the go" in (slot["message"] or ""), slot
    assert watch.online == set(), "no agent ever opened a session"
    assert rig.org.job(job).state == "queued" and rig.org.job(job).assign_count == 0
    codes = [
        (e.get("Actor") or {}).get("Attributes", {}).get("exitCode")
        for e in events.events
        if e.get("Action") == "die"
    ]
    # Each one stopped at its gate (SIGTERM: registered, offline), none exited on its own.
    assert codes and set(codes) == {"143"}, codes
