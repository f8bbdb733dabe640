"""On the real engine: each lane says which image it runs, and the history says what each job ran on.

The image id shown must be Docker's own (``docker image inspect``'s ``Id``), for the
slot's row and for every lane, in ``status --json``, in the text ``status`` and in
the history row of a finished job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.wording import plural
from tests.real.docker_runtime_helpers import make_spec, secret
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1)


def test_status_and_history_name_the_image_id_docker_runs(
    rig: Rig, docker_client: Any, emulator_image: str
) -> None:
    image_id = docker_client.images.get(emulator_image).id
    assert image_id.startswith("sha256:")
    rig.start_daemon()
    wait_for(rig.all_idle, what="an idle agent")
    status = rig.status()
    assert status is not None
    slot = status["slots"][0]
    assert (slot["image"], slot["image_id"]) == (emulator_image, image_id)
    lanes = [a for a in slot["agents"] if a["container_id"]]
    assert len(lanes) == rig.lanes
    assert all((a["image"], a["image_id"]) == (emulator_image, image_id) for a in lanes)
    # Docker agrees, container by container.
    for lane in lanes:
        assert docker_client.api.inspect_container(lane["container_id"])["Image"] == image_id
    text = rig.cli("status").stdout
    assert f"image: {emulator_image} (id {image_id[7:19]}) on {plural(rig.lanes, 'lane')}," in text

    job = rig.org.queue_job(rig.pool_id, duration=0.3)
    wait_for(lambda: rig.org.job(job).result == "succeeded", what="the job")

    def row() -> dict[str, Any] | None:
        out = rig.cli("history", "--json")
        rows = json.loads(out.stdout) if out.returncode == 0 else []
        return next((r for r in rows if r["request_id"] == job), None)

    found = wait_for(row, what="the job's history row")
    assert (found["image"], found["image_id"]) == (emulator_image, image_id)
    assert found["repo_digest"] is None, "built here, never pushed: no registry digest"


def test_the_runtime_reads_the_image_id_without_extra_calls(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    image_id = docker_client.images.get(busybox_image).id
    before = runtime.api_call_count
    info = runtime.start(make_spec(run_label, "image", busybox_image), secret())
    # The start's own image check gives the id: still four calls per start.
    assert runtime.api_call_count - before == 4
    assert (info.image, info.image_id, info.repo_digest) == (busybox_image, image_id, "")
    listed = {c.id: c for c in runtime.list_containers({"gpuci.test": run_label})}
    assert listed[info.id].image_id == image_id
    before = runtime.api_call_count
    runtime.list_containers({"gpuci.test": run_label})
    assert runtime.api_call_count - before == 1, "known container, known image: one list call"

    # A daemon that restarts knows neither: one inspect of the container and one of the
    # image, then the listing is one call again.
    fresh = DockerRuntime(docker_client)
    try:
        first = {c.id: c for c in fresh.list_containers({"gpuci.test": run_label})}
        assert (first[info.id].image, first[info.id].image_id) == (busybox_image, image_id)
        assert fresh.api_call_count == 3
        fresh.list_containers({"gpuci.test": run_label})
        assert fresh.api_call_count == 4
    finally:
        fresh.close()
