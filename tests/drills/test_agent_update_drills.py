"""Issue 20 item 5: the organisation requires a newer agent while jobs queue.

The real daemon, the simulated organisation and emulator containers on real
Docker. The organisation raises the required agent version while the pool is
idle and queues jobs: each out-of-date emulator that would get one leaves to
update (exit 12, start.sh's code for the real agent). The daemon must fetch the
package once (verified against the listed SHA-256, from the organisation's own
list), mount it into the next containers, and serve the queued jobs with no
parked slot and at most one update exit per slot (the standby started before
the package was cached is replaced while idle, never promoted to leave too). With a wrong hash
the package is refused with a clear event and the slots keep their image's
agent and are never parked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.agentspec import LABEL_AGENT_PACKAGE, LABEL_INSTANCE
from tests.real.rig import EventRecorder, Rig, assert_jobs_clean, make_rig, wait_for

pytestmark = pytest.mark.docker

NEW = "4.270.0"
PACKAGE = f"vsts-agent-linux-x64-{NEW}.tar.gz"
#: ``[supervisor] update_retry`` here: the pause before a slot whose agent left to update
#: again starts its next one (30 s by default). The wrong-hash drill waits for more update
#: exits on a slot than would park it: at 30 s apart that was a minute of waiting.
UPDATE_RETRY = 2.0


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    for rig in make_rig(
        tmp_path, docker_client, emulator_image, count=2, update_retry=UPDATE_RETRY
    ):
        # The daemon's own state (and so its agent cache) in this test's directory.
        rig.env["XDG_STATE_HOME"] = str(tmp_path / "state")
        yield rig


class StateWatch:
    """Samples the slots' states from a thread: a parked slot, however briefly, is seen."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.seen: set[str] = set()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StateWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.seen.update(self.rig.states())
            self.samples += 1

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def versions(rig: Rig) -> dict[str, Any]:
    return (rig.snap() or {}).get("agent_versions") or {}


def update_exits(events: EventRecorder) -> dict[str, int]:
    """Containers that exited 12 (left to update), per slot label."""
    per_slot: dict[str, int] = {}
    for event in list(events.events):
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        if event.get("Action") == "die" and attrs.get("exitCode") == "12":
            slot = attrs.get("io.gpuci-tui.slot", "?")
            per_slot[slot] = per_slot.get(slot, 0) + 1
    return per_slot


def test_a_forced_agent_update_costs_at_most_one_start_per_slot_and_parks_nothing(
    rig: Rig,
) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "idle agents and their standbys")
    wait_for(lambda: versions(rig).get("org_version") == "4.264.2", 20, "the versions read")
    assert versions(rig)["warnings"] == [] and versions(rig)["cached"] is None
    with EventRecorder(rig.client, rig.instance) as events, StateWatch(rig) as states:
        t0 = time.monotonic()
        rig.org.require_agent_version(NEW)
        jobs = [rig.org.queue_job(rig.pool_id, duration=1.0) for _ in range(3)]
        wait_for(lambda: all(rig.org.job(j).result for j in jobs), 120, "the queued jobs served")
        served_after = time.monotonic() - t0
        wait_for(rig.all_idle, 60, "idle agents again")
    assert "parked" not in states.seen and states.samples > 20, states.seen
    assert_jobs_clean(rig.org, jobs)
    # Fetched once, from the organisation's list, verified; mounted into the new agents.
    assert rig.org.packages.downloads == {PACKAGE: 1}
    snap = versions(rig)
    assert snap["org_version"] == NEW and snap["cached"] == NEW
    # Every job ran on an agent of the required version; every container started with the
    # package reports it (an idle old standby keeps its version until it would get a job).
    ran_on = {rig.org.job(j).agent_name for j in jobs}
    assert all(rig.org.find_agent(str(name)).version == NEW for name in ran_on), ran_on
    mounted = rig.client.containers.list(
        sparse=True,
        filters={
            "label": [f"{LABEL_INSTANCE}={rig.instance}", f"{LABEL_AGENT_PACKAGE}={NEW}"],
            "status": "running",
        },
    )
    assert mounted, "no container was started with the cached package"
    for c in mounted:
        name = c.attrs["Names"][0].lstrip("/")
        assert rig.org.find_agent(name).version == NEW, name
    # At most one update exit per slot: the lanes without the package (a standby started
    # before it was cached) are replaced while idle instead of leaving at their next job.
    exits = update_exits(events)
    assert exits and all(n <= 1 for n in exits.values()), exits
    text = rig.cli("status").stdout  # what the operator reads
    assert f"agents: organisation {NEW}; image {rig.config.agents.image} has 4.264.2" in text
    assert f"cached package {NEW}" in text and "WARNING: group" in text
    log = rig.daemon_log()
    assert f"agent package {NEW} fetched and verified" in log
    assert f"left to update to {NEW}; the next container uses the cached package {NEW}" in log
    print(f"queued jobs served {served_after:.1f} s after the required version rose; "
          f"update exits per slot {exits}")  # fmt: skip


def test_a_package_with_a_wrong_hash_is_refused_and_no_slot_parks(rig: Rig) -> None:
    rig.org.packages.corrupt_hash()
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "idle agents and their standbys")
    park_after = rig.config.supervisor.park_after
    with EventRecorder(rig.client, rig.instance) as events, StateWatch(rig) as states:
        rig.org.require_agent_version(NEW)
        job = rig.org.queue_job(rig.pool_id, duration=1.0)
        wait_for(lambda: "refused" in versions(rig).get("message", ""), 60, "the refusal")
        # Slots keep cycling on their image's agent (the emulator cannot update itself in
        # place; a real agent would, slower) and never park, however often they leave:
        # more update exits on a slot than the failures that would park it.
        wait_for(
            lambda: max(update_exits(events).values(), default=0) > park_after,
            120,
            f"more than {park_after} update exits on one slot",
        )
    assert "parked" not in states.seen, states.seen
    assert rig.org.packages.downloads == {PACKAGE: 1}  # refused once, not fetched again
    assert versions(rig)["cached"] is None
    log = rig.daemon_log()
    assert f"agent package {NEW} refused: its SHA-256 is " in log
    assert "update themselves (slower), or rebuild the image" in log
    assert rig.org.job(job).assign_count == 0  # never handed to an out-of-date agent
