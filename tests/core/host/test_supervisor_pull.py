"""The supervisor with an image puller, on the simulated organisation and a simulated registry.

An absent image whose pull fails keeps the slots waiting (the registry's message
as their reason, never parked however long it lasts); once the registry answers,
ONE pull serves every slot, its progress is the slots' reason while it runs, and
the slots fill.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.engine.transitions import pull as transitions_pull
from gpuci_tui.core.errors import ImagePullError
from gpuci_tui.core.host.images import puller as image_puller
from gpuci_tui.core.host.images.puller import ImagePuller
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.runtime import SimulatedRuntime
from tests.core.supervisor_env import StaticTokens, make_env, wait_until

IMAGE = "127.0.0.1:5000/agent:v2"
DIGEST = "sha256:" + "2" * 64
AUTH = (
    f"pull of {IMAGE} failed: unauthorized (check `docker login 127.0.0.1:5000`; gpuci-tui uses "
    "Docker's own credentials); Docker said: unauthorized: authentication required"
)


class SimRegistry:
    """Pulls into the simulated runtime's image set; fails with an auth error until fixed."""

    def __init__(self, runtime: SimulatedRuntime) -> None:
        self.runtime = runtime
        self.failing = True
        self.pulls = 0
        self.running = 0
        self.most_at_once = 0
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        present = self.runtime.image_present(image)
        return (f"127.0.0.1:5000/agent@{DIGEST}",) if present else None

    def remote_digest(self, image: str) -> str:
        return DIGEST

    def pull(self, image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        with self._lock:
            self.pulls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.failing:
                raise ImagePullError(AUTH, "auth")
            assert on_line is not None
            detail = {"current": 3, "total": 10}
            on_line({"status": "Downloading", "id": "l1", "progressDetail": detail})
            self.gate.wait(10)
            on_line({"status": "Pull complete", "id": "l1", "progressDetail": {}})
            self.runtime.images.add(image)
        finally:
            with self._lock:
                self.running -= 1


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seconds in production; a fraction here, so that many rounds of retries run.
    monkeypatch.setattr(transitions_pull, "PULL_RETRY", 0.1)
    monkeypatch.setattr(image_puller, "FAILURE_MEMORY", 0.05)


async def test_slots_wait_for_an_image_that_cannot_be_pulled_then_fill_from_one_pull() -> None:
    env = make_env()
    config = replace(env.config, agents=replace(env.config.agents, image=IMAGE, count=3))
    registry = SimRegistry(env.runtime)
    puller = ImagePuller(registry)
    sup = GroupSupervisor(
        config, api=env.api, runtime=env.runtime, tokens=StaticTokens(), puller=puller
    )
    puller.report = sup.reporter.event
    puller.changed = sup.reporter.changed
    task = asyncio.ensure_future(sup.run())
    try:
        await wait_until(lambda: registry.pulls > 3 * config.supervisor.park_after, 20, "retries")
        for slot in sup.snapshot().slots:
            assert slot.message == f"waiting for the image: {AUTH}"
            assert (slot.failures, slot.state is SlotState.PARKED) == (0, False)
        assert env.running() == []
        kinds = [e.kind for e in sup.events]
        assert "slot_parked" not in kinds and "start_failed" not in kinds
        assert kinds.count("image_wait") == 3  # one per slot, however many retries
        assert registry.most_at_once == 1, "one pull at a time for the image"

        registry.gate.clear()
        registry.failing = False
        pulls = registry.pulls
        await wait_until(lambda: bool(puller.in_flight()), 10, "the pull")
        messages = {s.message for s in sup.snapshot().slots}
        assert messages == {f"pulling {IMAGE}: 0/1 layers, 3 B of 10 B"}
        registry.gate.set()
        await wait_until(lambda: len(env.running()) == 3, 10, "three agents")
        assert registry.pulls == pulls + 1, "one pull served the three slots"
        assert registry.most_at_once == 1
        assert "pull_done" in [e.kind for e in sup.events]
    finally:
        registry.gate.set()
        sup.request_stop()
        await asyncio.wait_for(task, 10)
