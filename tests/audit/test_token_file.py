"""No job can read the PAT: the token file is gone from every agent container once online,
whatever the image does (here an emulator that, like some third-party images, keeps it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from tests.fixture_images import derived_image
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture(scope="module")
def keeping_image(docker_client: Any, emulator_image: str) -> str:
    return derived_image(
        docker_client,
        emulator_image,
        "gpuci-fixture/keeps-token:1",
        ["ENV GPUCI_EMULATOR_KEEP_TOKEN=1"],
    )


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, keeping_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, keeping_image, count=2)


def token_present(docker_client: Any, cid: str) -> bool:
    """Whether the container still holds the token file (a container gone holds none)."""
    try:
        result = docker_client.containers.get(cid).exec_run(["test", "-e", TOKEN_PATH])
    except (docker.errors.NotFound, docker.errors.APIError):
        # Removed (or stopping: exec refused) between the listing and this call.
        return bool(_running(docker_client, cid))
    return result.exit_code == 0


def _running(docker_client: Any, cid: str) -> bool:
    try:
        return bool(docker_client.containers.get(cid).status == "running")
    except docker.errors.NotFound:
        return False


def test_the_daemon_removes_a_token_file_the_image_keeps(rig: Rig, docker_client: Any) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "both slots idle with ready standbys")
    containers = rig.containers()
    assert len(containers) == 4
    wait_for(
        lambda: not any(token_present(docker_client, c.id) for c in containers),
        15,
        "the token file gone from every online agent's container",
    )
    # And after a job, the fresh container's file goes too.
    job = rig.org.queue_job(rig.pool_id, duration=0.3)
    wait_for(lambda: rig.org.job(job).result, 30, "a job")
    wait_for(rig.all_idle, 60, "refilled")
    fresh = rig.containers()  # sparse: no inspect that races with a removal
    wait_for(
        lambda: not any(token_present(docker_client, c.id) for c in fresh),
        15,
        "the token file gone from the new container too",
    )
    assert "token_file_kept" not in rig.daemon_log()
