"""Drill: the registry is stopped in the middle of a pull; the lane keeps the image it has.

The engine is the test's own (`private_engine.PrivateEngine`) with
``--max-download-attempts=1``: the host's engine retries a broken layer download
five times over about 50 s, this one reports the failure at once (what it
reports is the same). Between it and the registry a `ThrottledProxy` keeps the
40 MB layer on its way for seconds; the registry is killed once the pull's
progress shows bytes (a wait for the progress, not a sleep).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.host.images.puller import ImagePuller
from tests.drills.private_engine import PrivateEngine, host_engine_pid
from tests.real.registry import ThrottledProxy, loopback_registry, publish, unique_repo
from tests.real.rig import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.root]

MB = 1_000_000


class OneAttemptEngine(PrivateEngine):
    """A private engine that does not retry a failed layer download."""

    def argv(self) -> list[str]:
        return [*super().argv(), "--max-download-attempts=1"]


@pytest.fixture
def engine(docker_client: Any, busybox_image: str) -> Iterator[PrivateEngine]:
    root = Path(tempfile.mkdtemp(prefix="gpuci-dp-", dir="/tmp"))  # short: socket path limit
    started = OneAttemptEngine(root)
    host_before = host_engine_pid()
    try:
        started.start()
        started.copy_image(docker_client, busybox_image)
        yield started
    finally:
        started.remove()
        assert host_engine_pid() == host_before, "the host's Docker engine changed under the test"


def test_the_registry_stopped_mid_pull_leaves_the_lane_its_image(
    engine: PrivateEngine,
    docker_client: Any,
    busybox_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    with loopback_registry(tmp_path / "registry") as registry:
        proxy = ThrottledProxy(registry.port, rate=4 * MB)
        runtime = DockerRuntime(base_url=engine.url)
        try:
            ref = f"{proxy.host}/{unique_repo()}:stable"
            publish(docker_client, busybox_image, ref, 1 * MB)
            events: list[tuple[str, str]] = []
            now = [1000.0]
            puller = ImagePuller(
                runtime.registry,
                report=lambda kind, message: events.append((kind, message)),
                clock=lambda: now[0],
            )
            assert puller.ensure(ref, "always", 10.0) is None  # v1 is pulled
            kept = runtime.image_config(ref)
            assert kept is not None
            publish(docker_client, busybox_image, ref, 40 * MB)  # v2 behind the same tag
            now[0] += 10
            answer: list[str | None] = []
            pulling = threading.Thread(
                target=lambda: answer.append(puller.ensure(ref, "always", 10.0))
            )
            pulling.start()
            try:
                progress = wait_for(
                    lambda: (
                        (p := puller.in_flight().get(ref)) is not None and p.bytes_done > 0 and p
                    ),
                    60,
                    "the first bytes of the v2 pull",
                )
                assert progress.bytes_done < progress.bytes_total, "the layer is still on its way"
                registry.kill()
            finally:
                pulling.join(120)
            assert not pulling.is_alive(), "the pull ended"
            # The start goes on with the image the lane has; the event says what happened.
            assert answer == [None]
            kind, message = events[-1]
            assert kind == "pull_failed"
            assert message.startswith(f"pull of {ref} failed: registry {proxy.host} unreachable")
            assert message.endswith("; starting with the present image")
            after = runtime.image_config(ref)
            assert after is not None and after.image_id == kept.image_id
            assert puller.in_flight() == {}
        finally:
            runtime.close()
            proxy.close()
