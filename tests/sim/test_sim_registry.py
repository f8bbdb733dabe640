"""The simulated registry: Docker's pull for the simulated runtime (the demo's ``i`` key)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpuci_tui.core.errors import ImagePullError
from gpuci_tui.core.host.images.puller import ImagePuller
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.registry import SimImageRegistry
from gpuci_tui.sim.runtime import SimulatedRuntime

IMAGE = "127.0.0.1:5000/gpuci-sim/agent:1"
SIZES = (10, 300, 500)


def make(*, behind: bool = True) -> tuple[SimulatedRuntime, SimImageRegistry, str]:
    runtime = SimulatedRuntime(SimOrg("o"), images=(IMAGE,))
    # 100 bytes per progress line, and no real waiting between lines.
    registry = SimImageRegistry(runtime, rate=100, tick=1.0, sleep=lambda seconds: False)
    digest = registry.publish(IMAGE, SIZES, behind=behind)
    runtime.registry = registry
    return runtime, registry, digest


def test_a_pull_brings_the_build_pushed_since_and_the_runtime_runs_it_from_then_on() -> None:
    runtime, registry, digest = make()
    local = registry.local_digests(IMAGE)
    assert local and not local[0].endswith(digest), "the runtime starts with an older build"
    before = runtime.image_config(IMAGE)
    assert before is not None
    free = runtime.disk.free
    seen = []
    final = ImagePuller(registry).pull(IMAGE, on_progress=seen.append)
    assert (final.digest, final.finished) == (digest, True)
    assert (final.layers_done, final.layers_total) == (3, 3)
    # The base layer "already exists": only the two layers pushed since are downloaded.
    assert final.bytes_total == 800
    assert any(0 < p.bytes_done < p.bytes_total for p in seen), "progress while it downloads"
    assert registry.local_digests(IMAGE) == (f"127.0.0.1:5000/gpuci-sim/agent@{digest}",)
    after = runtime.image_config(IMAGE)
    assert after is not None and after.image_id != before.image_id
    assert after.labels == before.labels, "the agent version the image declares stays"
    assert runtime.disk.free == free - 800


def test_a_second_pull_finds_the_image_up_to_date_and_downloads_nothing() -> None:
    _, registry, digest = make()
    registry.pull(IMAGE)
    lines: list[Mapping[str, Any]] = []
    registry.pull(IMAGE, lines.append)
    assert {"status": f"Digest: {digest}"} in lines
    assert lines[-1] == {"status": f"Status: Image is up to date for {IMAGE}"}
    assert not [line for line in lines if line.get("status") == "Downloading"]
    assert registry.pulls == 2


def test_the_pull_policy_finds_the_image_present_and_pulls_nothing_by_itself() -> None:
    _, registry, _ = make()
    puller = ImagePuller(registry)
    assert puller.ensure(IMAGE, "missing", 300.0) is None
    assert registry.pulls == 0


def test_an_image_it_does_not_serve_is_not_found_as_a_registry_says() -> None:
    _, registry, _ = make()
    other = "127.0.0.1:5000/someone/else:2"
    with pytest.raises(ImagePullError) as refused:
        registry.pull(other)
    assert refused.value.kind == "not_found"
    assert f"pull of {other} failed: not found" in str(refused.value)
    assert IMAGE in str(refused.value), "it says what it serves"
    with pytest.raises(ImagePullError):
        registry.remote_digest(other)


def test_closing_ends_a_pull_in_flight_at_its_next_line() -> None:
    runtime, _, _ = make()
    closing = SimImageRegistry(runtime, rate=100, tick=1.0, sleep=lambda seconds: True)
    closing.publish(IMAGE, SIZES, behind=True)
    with pytest.raises(ImagePullError, match="stopped: the demo is ending"):
        closing.pull(IMAGE)


def test_the_organisation_tells_docker_plainly_that_it_serves_no_image() -> None:
    import requests

    from gpuci_tui.sim.server import SimServer

    with SimServer(SimOrg("demo-org")) as server:
        ping = requests.get(f"{server.url}/v2/", timeout=10)
        assert ping.status_code == 200
        assert ping.headers["Docker-Distribution-API-Version"] == "registry/2.0"
        asked = requests.get(f"{server.url}/v2/gpuci-sim/agent/manifests/1", timeout=10)
    assert asked.status_code == 404
    (error,) = asked.json()["errors"]
    assert error["code"] == "NAME_UNKNOWN"
    assert "serves no image to Docker" in error["message"]
    assert "the i key" in error["message"]
