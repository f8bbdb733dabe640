"""Drill: a pull that really runs out of space on Docker's data root.

The engine is the test's own (`private_engine.small_root_engine`) with a 96 MiB
tmpfs as its data root; the images come from the test's loopback registry
(tests/real/registry.py), built by the host engine from the emulator or busybox
image plus a layer of random bytes (incompressible: its size on the wire is its
size), never pulled from outside. What the engine really says when the layers
do not fit is what the operator must read as "Docker's disk is full":

* a layer larger than the free space fails its download:
  ``write <data-root>/tmp/GetImageBlob…: no space left on device``;
* a layer whose download fits but whose extraction does not (the download is
  kept while it is unpacked) fails to register:
  ``failed to register layer: Error processing tar file(exit status 1): write
  /blob: no space left on device``.

Both arrive as the pull stream's ``errorDetail``. The engine does not retry
either (a full disk is not a network fault) and removes what it wrote; the next
pull of an image that fits succeeds.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.docker_disk import DockerConfig
from gpuci_tui.core.config.loader import MetricsConfig, save_config
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import ImagePullError
from gpuci_tui.core.host.images.puller import ImagePuller
from tests.drills.private_engine import PrivateEngine, small_root_engine
from tests.real.registry import LoopbackRegistry, free_port, loopback_registry, publish, unique_repo
from tests.real.rig import Rig, make_rig, wait_for
from tests.real.test_metrics_docker import scrape

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.registry, pytest.mark.root]

MIB = 1024**2
TMPFS = 96 * MIB
DISK_FULL = "Docker's disk is full (free space: docker image prune); Docker said: "


@pytest.fixture
def small_engine() -> Iterator[PrivateEngine]:
    with small_root_engine(TMPFS) as engine:
        yield engine


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackRegistry]:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))  # never the machine's
    with loopback_registry(tmp_path / "registry") as started:
        yield started


def free_bytes(engine: PrivateEngine) -> int:
    return shutil.disk_usage(engine.root / "data").free


def cleaned_up(engine: PrivateEngine, before: int) -> bool:
    """The engine gave back what the failed pull wrote (a few KiB of metadata aside)."""
    return free_bytes(engine) >= before - 2 * MIB


def test_a_layer_larger_than_the_free_space_is_a_disk_failure_with_the_fix(
    small_engine: PrivateEngine,
    registry: LoopbackRegistry,
    docker_client: Any,
    busybox_image: str,
) -> None:
    """The puller's own answer for an absent image: the slot's reason, the count, the kind."""
    big = f"{registry.host}/{unique_repo()}:v1"
    publish(docker_client, busybox_image, big, TMPFS + 8 * MIB)
    runtime = DockerRuntime(base_url=small_engine.url)
    try:
        events: list[tuple[str, str]] = []
        puller = ImagePuller(runtime.registry, report=lambda k, m: events.append((k, m)))
        before = free_bytes(small_engine)

        answer = puller.ensure(big, "missing", 10.0)

        # What the lane's slot shows ("waiting for the image: " + this) and the event say.
        said = f"write {small_engine.root / 'data'}/tmp/GetImageBlob"
        assert answer is not None and answer.startswith(f"pull of {big} failed: {DISK_FULL}{said}")
        assert answer.endswith(": no space left on device"), answer
        assert events[-1] == ("pull_failed", answer)
        assert puller.pulls == {"failed": 1}
        assert runtime.registry.local_digests(big) is None
        with pytest.raises(ImagePullError) as raised:
            runtime.registry.pull(big)
        assert raised.value.kind == "disk"
        wait_for(lambda: cleaned_up(small_engine, before), 10, "the partial download removed")

        # The same tag, now an image that fits: the next pull succeeds.
        publish(docker_client, busybox_image, big, 4 * MIB)
        assert puller.pull(big).finished
        assert runtime.registry.local_digests(big)
        assert puller.pulls == {"failed": 1, "ok": 1}
    finally:
        runtime.close()


def running_image(rig: Rig) -> str | None:
    """The image id of the instance's one running agent container (None when none runs)."""
    ids = {c.attrs["ImageID"] for c in rig.containers()}
    return ids.pop() if len(ids) == 1 else None


def logged(rig: Rig, text: str) -> Callable[[], bool]:
    """Whether the daemon has logged ``text`` (every event is logged)."""
    return lambda: text in rig.daemon_log()


def serve_until(rig: Rig, done: Callable[[], bool], what: str, timeout: float = 40.0) -> list[int]:
    """Queue jobs one after another until ``done()``; every job succeeds, its ids.

    Each job ends a ``--once`` agent, so the next start asks the puller again
    (``pull = "always"``, at most every ``pull_check_interval``): the pool keeps
    working while the registry check comes due.
    """
    jobs: list[int] = []

    def served() -> bool:
        if jobs and rig.org.job(jobs[-1]).result is None:
            return False
        if done():
            return True
        if jobs:
            assert rig.org.job(jobs[-1]).result == "succeeded", rig.org.job(jobs[-1]).note
        jobs.append(rig.org.queue_job(rig.pool_id, duration=0.2))
        return False

    wait_for(served, timeout, what)
    return jobs


def test_the_daemon_keeps_the_lane_on_its_image_when_the_new_one_does_not_fit(
    small_engine: PrivateEngine,
    registry: LoopbackRegistry,
    docker_client: Any,
    emulator_image: str,
    tmp_path: Path,
) -> None:
    """`gpuci-tui run` with ``pull = "always"``: v2 does not fit, the lane stays on v1 and
    serves jobs, no slot parks, /metrics counts the failure; v3 fits and is pulled."""
    ref = f"{registry.host}/{unique_repo()}:stable"
    v1 = publish(docker_client, emulator_image, ref, 1 * MIB)
    engine = small_engine.client()
    port = free_port()
    agents = {"standby": False, "pull": "always", "pull_check_interval": 10.0}
    made = make_rig(tmp_path / "rig", engine, ref, count=1, agents=agents)
    rig = next(made)
    try:
        rig.env["DOCKER_HOST"] = small_engine.url
        rig.env["DOCKER_CONFIG"] = str(tmp_path / "docker-config")
        rig.config = dataclasses.replace(
            rig.config,
            metrics=MetricsConfig(f"127.0.0.1:{port}"),
            docker=DockerConfig(hard_floor="1m"),  # the default 2 GiB: no pull would start
        )
        save_config(rig.config, rig.config_path)
        rig.start_daemon()
        wait_for(rig.all_idle, 60, "the agent of v1, pulled at the first start")
        assert f"pulled {ref} ({v1})" in rig.daemon_log()
        kept = running_image(rig)
        assert kept is not None

        # v2 behind the same tag: its 64 MiB layer downloads, but cannot also be unpacked.
        publish(docker_client, emulator_image, ref, 64 * MIB)
        before = free_bytes(small_engine)
        jobs = serve_until(rig, logged(rig, f"pull of {ref} failed"), "the v2 pull")
        log = rig.daemon_log()
        assert f"pull of {ref} failed: {DISK_FULL}failed to register layer: " in log, log
        assert "no space left on device; starting with the present image" in log
        wait_for(rig.all_idle, 30, "the agent back, idle")
        assert running_image(rig) == kept  # the lane runs the image it had
        slot = (rig.snap() or {})["slots"][0]
        assert (slot["state"], slot["failures"]) == ("idle", 0), slot
        assert "parked after" not in rig.daemon_log()
        got = scrape(f"http://127.0.0.1:{port}/metrics")
        pulls = {
            r: got.get(("gpuci_image_pulls_total", frozenset({("result", r)})))
            for r in ("ok", "failed")
        }
        assert pulls == {"ok": 1.0, "failed": 1.0}, pulls
        wait_for(lambda: cleaned_up(small_engine, before), 10, "the partial layer removed")

        # v3 fits: the next check pulls it and the next agent runs it.
        v3 = publish(docker_client, emulator_image, ref, 2 * MIB)
        jobs += serve_until(rig, logged(rig, f"pulled {ref} ({v3})"), "the v3 pull")
        wait_for(lambda: running_image(rig) == engine.images.get(ref).id, 30, "an agent of v3")
        assert running_image(rig) != kept
        for job in jobs:
            assert rig.org.job(job).result == "succeeded", (job, rig.org.job(job).note)
        assert "parked after" not in rig.daemon_log()
    finally:
        next(made, None)  # the rig's cleanup: the daemon, its containers, the organisation
        engine.close()
