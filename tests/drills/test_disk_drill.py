"""Drill: the disk watermark on a private engine whose data root is a small tmpfs.

The engine is the test's own (`private_engine.PrivateEngine`) with a 300 MiB tmpfs
as its data root, so "free space" is small and real: images are built there
(``COPY`` of a random blob, no container, no pull), one is used by a container,
one is configured, the others are not needed; below ``min_free`` the disk watch
must remove exactly the unneeded ones, an event each, and the engine must refuse
to remove an image a container uses. The host's engine is never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.host.images.disk_watch import DiskWatch
from tests.drills.private_engine import PrivateEngine, small_root_engine
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.root]

MIB = 1024**2
TMPFS = 300 * MIB


@pytest.fixture
def small_engine(docker_client: Any, busybox_image: str) -> Iterator[PrivateEngine]:
    """A private engine whose data root is a 300 MiB tmpfs, with busybox copied in."""
    with small_root_engine(TMPFS) as engine:
        engine.copy_image(docker_client, busybox_image)
        yield engine


def build(client: Any, tag: str, base: str, context: Path, blob_mib: int = 20) -> str:
    """An image of ``base`` plus a random blob (its own layer); returns its id."""
    context.mkdir(parents=True, exist_ok=True)
    (context / "blob").write_bytes(os.urandom(blob_mib * MIB))
    (context / "Dockerfile").write_text(f"FROM {base}\nCOPY blob /blob\n")
    image, _ = client.images.build(path=str(context), tag=tag, rm=True)
    return str(image.id)


def tags_of(client: Any) -> set[str]:
    return {t for image in client.images.list() for t in image.tags}


def test_below_min_free_only_unneeded_images_go_and_a_used_one_is_refused(
    small_engine: PrivateEngine, busybox_image: str, tmp_path: Path
) -> None:
    client = small_engine.client()
    runtime = DockerRuntime(base_url=small_engine.url)
    try:
        build(client, "t/lane:1", busybox_image, tmp_path / "lane")
        build(client, "t/conf:1", busybox_image, tmp_path / "conf")
        build(client, "t/old:1", busybox_image, tmp_path / "old")
        dangling = build(client, "t/new:1", busybox_image, tmp_path / "new1")
        build(client, "t/new:1", busybox_image, tmp_path / "new2")  # the first is now dangling
        assert any(i.id == dangling and not i.tags for i in client.images.list(all=False))
        used = client.containers.create("t/lane:1", command=["true"], network_mode="none")

        events: list[tuple[str, str]] = []
        disk = runtime.disk
        usage = disk.disk_usage()
        assert usage.root == str(small_engine.root / "data")
        assert usage.total_bytes is not None and usage.total_bytes <= TMPFS
        assert usage.free_bytes is not None and 0 < usage.free_bytes < TMPFS
        watch = DiskWatch(
            disk,
            # Out of reach: every image that may go goes.
            min_free=usage.free_bytes + TMPFS,
            hard_floor=0,
            interval=60.0,
            configured=lambda: ["t/conf:1", busybox_image, "t/never-pulled:9"],
            report=lambda kind, message: events.append((kind, message)),
        )
        reading = watch.check()

        removed = [m for k, m in events if k == "image_removed"]
        assert len(removed) == 3, events
        assert any("t/old:1" in m for m in removed)
        assert any("t/new:1" in m for m in removed)
        assert any(dangling[:19] in m for m in removed)
        assert not [e for e in events if e[0] in ("image_kept", "disk_gc_failed")], events
        assert tags_of(client) == {"t/lane:1", "t/conf:1", busybox_image}
        assert client.containers.get(used.id).image.tags == ["t/lane:1"]
        assert reading.images_removed == 3 and reading.state == "low"
        assert reading.free_bytes is not None and reading.free_bytes > usage.free_bytes + 40 * MIB

        # Never forced: the engine itself refuses an image a container uses.
        with pytest.raises(Exception, match="(?i)conflict|being used|must force"):
            disk.remove_image("t/lane:1")
        assert "t/lane:1" in tags_of(client)

        # Below the hard floor no pull may start, and the reason says why.
        floor = DiskWatch(
            disk,
            min_free=None,
            hard_floor=TMPFS,
            interval=60.0,
            configured=lambda: [],
            report=lambda kind, message: events.append((kind, message)),
        )
        assert floor.check().state == "critical"
        refusal = floor.may_pull()
        assert refusal is not None and "below the hard floor of 300 MiB" in refusal
        assert tags_of(client) == {"t/lane:1", "t/conf:1", busybox_image}  # nothing removed
    finally:
        runtime.close()
        client.close()


def test_the_daemon_shows_the_small_root_and_frees_it_with_agents_running(
    small_engine: PrivateEngine,
    docker_client: Any,
    busybox_image: str,
    emulator_image: str,
    tmp_path: Path,
) -> None:
    """`gpuci-tui run` on the small engine: status shows its root; an unused image goes,
    the running agents' image stays, and the agents stay idle throughout."""
    small_engine.copy_image(docker_client, emulator_image)
    client = small_engine.client()
    try:
        build(client, "t/old:1", busybox_image, tmp_path / "old")
        for rig in make_rig(tmp_path / "rig", client, emulator_image, count=1):
            rig.env["DOCKER_HOST"] = small_engine.url
            with rig.config_path.open("a") as config:
                # min_free out of reach: everything that may go goes; the floor below the free space.
                config.write(f'\n[docker]\nmin_free = "{TMPFS * 2}"\nhard_floor = "1m"\n')
                config.write("check_interval = 1\n")
            rig.start_daemon()
            wait_for(rig.all_idle, 30, "one idle agent")

            def disk(made: Rig = rig) -> dict[str, Any]:
                return dict((made.snap() or {}).get("disk") or {})

            wait_for(lambda: disk().get("images_removed", 0) >= 1, 30, "an image removed")
            assert "t/old:1" not in tags_of(client)
            assert emulator_image in tags_of(client)  # configured and used by the agents
            status = rig.status()
            assert status is not None
            assert status["disk"]["root"] == str(small_engine.root / "data")
            assert status["disk"]["state"] == "low"
            assert 0 < status["disk"]["free_bytes"] < TMPFS
            assert rig.all_idle(), "the agents kept running"
            assert "removed unused image t/old:1" in rig.daemon_log()
    finally:
        client.close()
