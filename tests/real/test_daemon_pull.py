"""`gpuci-tui run` with images from a registry on loopback: pulled before the first start, or waited for.

The whole chain as an operator runs it: the daemon's puller (assembled with the
real Docker runtime), the executor's hook, the engine's wait and ``status``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.registry import LoopbackRegistry, loopback_registry, remove_local, unique_repo
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.registry]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRegistry]:
    with loopback_registry(tmp_path_factory.mktemp("registry")) as started:
        yield started


def pushed(client: Any, image: str, ref: str) -> None:
    """``image`` pushed as ``ref``, whose local tag is then removed (its layers stay)."""
    repo, _, tag = ref.rpartition(":")
    client.images.get(image).tag(repo, tag)
    for line in client.api.push(repo, tag, stream=True, decode=True):
        assert "error" not in line, line
    client.images.remove(ref)


@contextlib.contextmanager
def rig_for(tmp_path: Path, client: Any, ref: str) -> Iterator[Rig]:
    made = make_rig(tmp_path, client, ref, count=1)
    rig = next(made)
    rig.env["DOCKER_CONFIG"] = str(tmp_path / "docker-config")  # never the machine's own
    try:
        yield rig
    finally:
        next(made, None)  # the rig's cleanup: daemons, containers, the organisation


def test_the_daemon_pulls_a_missing_image_then_starts_its_agents(
    tmp_path: Path, docker_client: Any, emulator_image: str, registry: LoopbackRegistry
) -> None:
    ref = f"{registry.host}/{unique_repo()}:v1"
    pushed(docker_client, emulator_image, ref)
    try:
        with rig_for(tmp_path, docker_client, ref) as rig:
            rig.start_daemon()
            wait_for(rig.all_idle, 60, "the agents of the pulled image")
            assert f"pulled {ref} (sha256:" in rig.daemon_log()
            assert {c.attrs["Image"] for c in rig.containers()} == {ref}
    finally:
        remove_local(docker_client, ref)  # untag only: the image is the emulator's


def test_an_image_the_registry_lacks_keeps_the_slot_waiting_not_parked(
    tmp_path: Path, docker_client: Any, registry: LoopbackRegistry
) -> None:
    ref = f"{registry.host}/{unique_repo()}:v1"
    with rig_for(tmp_path, docker_client, ref) as rig:
        rig.start_daemon()
        waiting = f"waiting for the image: pull of {ref} failed: not found in {registry.host}"

        def slot0() -> dict[str, Any]:
            status = rig.status() or {"slots": [{}]}
            return dict(status["slots"][0])

        wait_for(lambda: slot0().get("message", "").startswith(waiting), 30, "the waiting slot")
        slot = slot0()
        assert (slot["state"], slot["failures"]) == ("empty", 0), slot
        assert rig.containers() == []
