"""`ImagePuller` on a fake registry: policies, one pull per image, failures, the disk floor."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.config.model import AgentsConfig
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import StartFailed
from gpuci_tui.core.errors import ImagePullError, RuntimeUnavailableError
from gpuci_tui.core.host.images.puller import FAILURE_MEMORY, PRESENT_MEMORY, ImagePuller
from gpuci_tui.core.models import SlotSnapshot, SlotState, SupervisorSnapshot
from tests import waiting
from tests.core.supervisor_env import wait_until

IMAGE = "127.0.0.1:5000/agent:v2"
OLD, NEW = "sha256:" + "1" * 64, "sha256:" + "2" * 64
AUTH = ImagePullError(
    "pull of 127.0.0.1:5000/agent:v2 failed: unauthorized (check `docker login 127.0.0.1:5000`)",
    "auth",
)


class FakeRegistry:
    """An engine with one image and a registry; counts what it is asked."""

    def __init__(self, local: str | None = OLD, remote: str = OLD) -> None:
        self.local, self.remote = local, remote
        self.pull_error: Exception | None = None
        self.check_error: Exception | None = None
        self.calls: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        self.calls.append("local")
        return None if self.local is None else (f"127.0.0.1:5000/agent@{self.local}",)

    def remote_digest(self, image: str) -> str:
        self.calls.append("remote")
        if self.check_error is not None:
            raise self.check_error
        return self.remote

    def pull(self, image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        self.calls.append("pull")
        assert on_line is not None
        on_line({"status": "Pulling fs layer", "id": "l1", "progressDetail": {}})
        on_line(
            {"status": "Downloading", "id": "l1", "progressDetail": {"current": 5, "total": 10}}
        )
        self.gate.wait(10)
        if self.pull_error is not None:
            raise self.pull_error
        on_line({"status": "Pull complete", "id": "l1", "progressDetail": {}})
        on_line({"status": f"Digest: {self.remote}"})
        self.local = self.remote


class Rig:
    def __init__(self, registry: FakeRegistry) -> None:
        self.registry = registry
        self.now = 1000.0
        self.events: list[tuple[str, str]] = []
        self.refused: str | None = None
        self.puller = ImagePuller(
            registry,
            report=lambda kind, message: self.events.append((kind, message)),
            refusal=lambda: self.refused,
            clock=lambda: self.now,
        )

    def ensure(self, policy: str = "missing", interval: float = 300.0) -> str | None:
        return self.puller.ensure(IMAGE, policy, interval)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


def wait_for_pull(rig: Rig, timeout: float = 10.0) -> None:
    """Until the pull runs (its progress is visible), with a deadline."""
    waiting.wait_until(rig.puller.in_flight, timeout, "the pull to start")


def test_missing_pulls_an_absent_image_once_and_says_so() -> None:
    rig = Rig(FakeRegistry(local=None, remote=NEW))
    assert rig.ensure() is None
    assert rig.registry.calls == ["local", "pull"]
    assert rig.events[0] == ("pull_started", f"pulling {IMAGE} (not on this host)")
    assert rig.events[1][0] == "pull_done" and NEW in rig.events[1][1]
    # Present now: no pull; within PRESENT_MEMORY not even an inspect.
    rig.now += 1
    assert rig.ensure() is None
    rig.now += PRESENT_MEMORY
    assert rig.ensure() is None
    assert rig.registry.calls == ["local", "pull", "local"]
    assert rig.puller.pulls == {"ok": 1}


def test_missing_never_asks_the_registry_about_a_present_image() -> None:
    rig = Rig(FakeRegistry(local=OLD, remote=NEW))
    assert rig.ensure("missing") is None
    assert rig.registry.calls == ["local"]


def test_always_pulls_when_the_tag_moved_at_most_once_per_interval() -> None:
    rig = Rig(FakeRegistry(local=OLD, remote=OLD))
    assert rig.ensure("always", 300.0) is None
    assert rig.registry.calls == ["local", "remote"]  # same digest: no pull
    rig.registry.remote = NEW  # a new push behind the same tag
    rig.now += 299  # within the interval: the registry is not asked
    assert rig.ensure("always", 300.0) is None
    assert "pull" not in rig.registry.calls
    rig.now += 1
    assert rig.ensure("always", 300.0) is None
    assert rig.registry.calls[-2:] == ["remote", "pull"] and rig.registry.local == NEW
    assert "the registry has sha256:222222222222… behind the tag" in rig.events[0][1]


def test_always_never_asks_for_an_image_pinned_by_digest() -> None:
    rig = Rig(FakeRegistry(local=OLD, remote=NEW))
    assert rig.puller.ensure(f"127.0.0.1:5000/agent@{OLD}", "always", 10.0) is None
    assert rig.registry.calls == ["local"]


def test_a_failed_check_or_pull_starts_with_the_present_image() -> None:
    rig = Rig(FakeRegistry(local=OLD, remote=NEW))
    rig.registry.check_error = ImagePullError("registry check of x failed: unreachable", "other")
    assert rig.ensure("always") is None
    assert rig.events == [
        (
            "pull_check_failed",
            "registry check of x failed: unreachable; starting with the present image",
        )
    ]
    rig.registry.check_error = None
    rig.registry.pull_error = AUTH
    rig.now += 300
    assert rig.ensure("always") is None
    assert rig.events[-1] == ("pull_failed", f"{AUTH}; starting with the present image")
    assert rig.puller.pulls == {"failed": 1}


def test_an_absent_image_that_cannot_be_pulled_makes_the_lane_wait() -> None:
    rig = Rig(FakeRegistry(local=None))
    rig.registry.pull_error = AUTH
    assert rig.ensure() == str(AUTH)
    assert rig.kinds() == ["pull_started", "pull_failed"]
    # The slots retrying one after another get the remembered answer: one pull per round.
    rig.now += FAILURE_MEMORY - 1
    assert rig.ensure() == str(AUTH)
    assert rig.registry.calls.count("pull") == 1
    rig.now += 1
    rig.registry.pull_error = None
    assert rig.ensure() is None
    assert rig.registry.calls.count("pull") == 2


def test_below_the_hard_floor_no_pull_starts() -> None:
    rig = Rig(FakeRegistry(local=None))
    rig.refused = "no pull starts: Docker's data root has 1.0 GiB free, below the hard floor"
    assert rig.ensure() == f"pull of {IMAGE} not started: {rig.refused}"
    assert "pull" not in rig.registry.calls
    assert rig.puller.pulls == {"refused": 1}
    # With the image present the start goes on, and the event says why no pull ran.
    present = Rig(FakeRegistry(local=OLD, remote=NEW))
    present.refused = rig.refused
    assert present.ensure("always") is None
    assert present.events[-1][1].endswith("; starting with the present image")


def test_one_pull_per_image_whatever_the_number_of_starts() -> None:
    rig = Rig(FakeRegistry(local=None))
    rig.registry.gate.clear()
    with ThreadPoolExecutor(8) as pool:
        answers = [pool.submit(rig.ensure) for _ in range(8)]
        wait_for_pull(rig)
        progress = rig.puller.in_flight()[IMAGE]
        assert (progress.layers_total, progress.bytes_done, progress.bytes_total) == (1, 5, 10)
        rig.registry.gate.set()
        assert [a.result(10) for a in answers] == [None] * 8
    assert rig.registry.calls.count("pull") == 1
    assert rig.puller.in_flight() == {}


def test_the_progress_is_the_reason_of_the_slots_waiting_for_it() -> None:
    rig = Rig(FakeRegistry(local=None))
    rig.registry.gate.clear()
    slots = (
        SlotSnapshot(0, "h-0", SlotState.STARTING, image=IMAGE, message="starting"),
        SlotSnapshot(1, "h-1", SlotState.IDLE, container_id="c1", image=IMAGE),
        SlotSnapshot(2, "o-0", SlotState.STARTING, image="other:1"),
    )
    snap = SupervisorSnapshot(
        taken_at=0.0, org_url="", pool="", instance="", desired_count=3, slots=slots
    )
    assert rig.puller.overlay(snap) is snap
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(rig.ensure)
        wait_for_pull(rig)
        during = rig.puller.overlay(snap)
        messages = [s.message for s in during.slots]
        rig.registry.gate.set()
        assert answer.result(10) is None
    assert messages == [f"pulling {IMAGE}: 0/1 layers, 5 B of 10 B", "", ""]
    # The pulls in flight, one line per image, for status and the console's pool panel.
    assert during.pulls == (f"pulling {IMAGE}: 0/1 layers, 5 B of 10 B",)
    assert rig.puller.overlay(snap).pulls == ()
    assert f"\npulling {IMAGE}: 0/1 layers" in render_status(during, now=0.0)


def test_never_asks_nothing_and_a_wait_is_a_pull_start_failure() -> None:
    rig = Rig(FakeRegistry(local=None))
    agents = AgentsConfig(count=1, image=IMAGE, name_prefix="h", pull="never")
    assert asyncio.run(rig.puller.before_start(agents, 0, Lane.A)) is None
    assert rig.registry.calls == []
    rig.registry.pull_error = AUTH
    held = asyncio.run(rig.puller.before_start(replace(agents, pull="missing"), 0, Lane.A))
    assert held == StartFailed(0, Lane.A, "pull", str(AUTH), rig.now)


@pytest.mark.parametrize("policy", ["missing", "always"])
def test_an_engine_failure_is_left_to_the_start(policy: str) -> None:
    registry = FakeRegistry(local=None)
    registry.pull_error = RuntimeUnavailableError("Docker engine not running")
    rig = Rig(registry)
    assert rig.ensure(policy) is None  # runtime.start reports it, kind "engine"


def test_close_ends_a_running_pull_at_its_next_line() -> None:
    registry = FakeRegistry(local=None)

    def endless(image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        assert on_line is not None
        for current in range(10**6):  # a line every 5 ms, as a long download sends them
            detail = {"current": current, "total": 10**6}
            on_line({"status": "Downloading", "id": "l1", "progressDetail": detail})
            time.sleep(0.005)

    registry.pull = endless  # type: ignore[method-assign]
    rig = Rig(registry)
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(rig.ensure)
        wait_for_pull(rig)
        rig.puller.close()
        assert answer.result(5) == f"pull of {IMAGE} stopped: gpuci-tui is stopping"
    with pytest.raises(ImagePullError, match="not started: gpuci-tui is stopping"):
        rig.puller.pull(IMAGE)


async def test_lanes_waiting_for_a_pull_leave_the_loop_s_threads_free() -> None:
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(2))  # small, as on a 2-core host
    rig = Rig(FakeRegistry(local=None))
    rig.registry.gate.clear()
    agents = AgentsConfig(count=8, image=IMAGE, name_prefix="h")
    lanes = [asyncio.ensure_future(rig.puller.before_start(agents, n, Lane.A)) for n in range(8)]
    try:
        await wait_until(lambda: bool(rig.puller.in_flight()), 10, "the pull")
        # Eight lanes wait for the pull, and every other blocking call still runs.
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
    finally:
        rig.registry.gate.set()
    assert await asyncio.gather(*lanes) == [None] * 8
    assert rig.registry.calls == ["local", "pull"]


async def test_after_close_a_start_is_held_without_a_thread() -> None:
    rig = Rig(FakeRegistry(local=None))
    rig.puller.close()
    agents = AgentsConfig(count=1, image=IMAGE, name_prefix="h")
    held = await rig.puller.before_start(agents, 0, Lane.A)
    assert held is not None and held.reason == f"pull of {IMAGE} not started: gpuci-tui is stopping"
    assert rig.registry.calls == []
