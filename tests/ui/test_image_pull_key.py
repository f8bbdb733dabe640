"""Key ``i``: the selected agent's image is pulled now, its progress shown as notifications."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from gpuci_tui.app import make_app
from gpuci_tui.core.errors import ImagePullError
from tests.ui.fakes import FakeHandle, FakeRuntime, make_services
from tests.ui.helpers import notes, ready, wait_for
from tests.ui.scenarios import sample_config

IMAGE = sample_config().agents.image


class PullingRuntime(FakeRuntime):
    """The console's fake runtime, with a registry that pulls one 10-byte layer."""

    def __init__(self, error: ImagePullError | None = None) -> None:
        super().__init__()
        self.registry = self
        self.error = error
        self.pulled: list[str] = []
        self.gate = threading.Event()

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        return None

    def remote_digest(self, image: str) -> str:
        return "sha256:" + "2" * 64

    def pull(self, image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        assert on_line is not None
        detail = {"current": 4, "total": 10}
        on_line({"status": "Downloading", "id": "l1", "progressDetail": detail})
        self.gate.wait(10)
        if self.error is not None:
            raise self.error
        on_line({"status": "Pull complete", "id": "l1", "progressDetail": {}})
        on_line({"status": "Digest: sha256:" + "2" * 64})
        self.pulled.append(image)


async def test_i_pulls_the_selected_agent_s_image_with_progress(handle: FakeHandle) -> None:
    runtime = PullingRuntime()
    app = make_app(make_services(handle=handle, runtime=runtime))
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await pilot.press("i")
        await wait_for(pilot, lambda: f"pulling {IMAGE}: 0/1 layers, 4 B of 10 B" in notes(app))
        assert f"pulling {IMAGE}…" in notes(app)
        await pilot.press("i")  # a second press while it runs starts nothing
        await wait_for(pilot, lambda: f"{IMAGE} is being pulled already." in notes(app))
        runtime.gate.set()
        await wait_for(pilot, lambda: any(n.startswith(f"pulled {IMAGE} (") for n in notes(app)))
        assert runtime.pulled == [IMAGE]
        assert handle.sent == []  # Docker directly: nothing goes to the daemon


async def test_a_failed_pull_is_an_error_with_the_registry_s_words(handle: FakeHandle) -> None:
    error = ImagePullError(f"pull of {IMAGE} failed: unauthorized (check `docker login`)", "auth")
    runtime = PullingRuntime(error)
    runtime.gate.set()
    app = make_app(make_services(handle=handle, runtime=runtime))
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await pilot.press("i")
        await wait_for(pilot, lambda: str(error) in notes(app))


async def test_read_only_and_no_engine_refuse(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle, runtime=PullingRuntime(), readonly=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await pilot.press("i")
        await wait_for(pilot, lambda: any("read-only: pulling an image" in n for n in notes(app)))
    app = make_app(make_services(handle=handle))  # a runtime that cannot pull
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await pilot.press("i")
        await wait_for(
            pilot,
            lambda: (
                "Pulling is not available here: this console has no Docker engine of the "
                "agents' host (on that host: gpuci-tui image pull)." in notes(app)
            ),
        )
