"""The disk watch against a fake engine disk: readings, removals below min_free, the pull gate."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.images.disk_watch import DiskWatch
from gpuci_tui.core.protocols import DiskUsage, DockerDisk, ImageInfo
from gpuci_tui.core.store.history import JobHistory
from gpuci_tui.core.wire import snapshot_from_dict, to_dict
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until

GIB = 1024**3


@dataclass
class FakeDisk:
    """An engine's data root: images by id (tags, created, size), containers' image ids."""

    free: int | None
    images: dict[str, ImageInfo] = field(default_factory=dict)
    in_use: set[str] = field(default_factory=set)
    build_cache: int = 0
    calls: list[str] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    parents: set[str] = field(default_factory=set)

    def add(self, image_id: str, tag: str, created: float, size_gib: int) -> None:
        self.images[image_id] = ImageInfo(image_id, (tag,) if tag else (), created, size_gib * GIB)

    def disk_usage(self) -> DiskUsage:
        return DiskUsage("/var/lib/docker", self.free, 100 * GIB)

    def list_images(self) -> list[ImageInfo]:
        return list(self.images.values())

    def image_ids_in_use(self) -> set[str]:
        return set(self.in_use)

    def image_id(self, ref: str) -> str | None:
        return next((i.id for i in self.images.values() if ref in i.tags or ref == i.id), None)

    def remove_image(self, ref: str) -> bool:
        self.calls.append(ref)
        image_id = self.image_id(ref)
        assert image_id is not None, f"no such image {ref}"
        if image_id in self.in_use or ref in self.refuse:
            raise RuntimeError(f"conflict: unable to remove {ref}: image is being used")
        image = self.images[image_id]
        tags = tuple(t for t in image.tags if t != ref)
        if tags:
            self.images[image_id] = ImageInfo(image.id, tags, image.created, image.size)
            return False
        if image_id in self.parents:
            del self.images[image_id]  # off the list, its layers stay (child images)
            return False
        del self.images[image_id]
        assert self.free is not None
        self.free += image.size
        return True

    def prune_build_cache(self) -> int:
        freed, self.build_cache = self.build_cache, 0
        if self.free is not None:
            self.free += freed
        return freed


def watch(
    disk: FakeDisk, *, min_free: int | None = 20 * GIB, configured: tuple[str, ...] = ()
) -> tuple[DiskWatch, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    w = DiskWatch(
        disk,
        min_free=min_free,
        hard_floor=2 * GIB,
        interval=60.0,
        configured=lambda: configured,
        report=lambda kind, message: events.append((kind, message)),
        clock=lambda: 1000.0,
    )
    return w, events


def test_the_fake_is_a_docker_disk() -> None:
    assert isinstance(FakeDisk(0), DockerDisk)


def test_above_min_free_nothing_is_removed() -> None:
    disk = FakeDisk(free=30 * GIB)
    disk.add("sha256:old", "r/old:1", 1.0, 5)
    w, events = watch(disk)
    reading = w.check()
    assert (reading.state, reading.free_bytes, reading.root) == ("ok", 30 * GIB, "/var/lib/docker")
    assert reading.message == "30.0 GiB free on /var/lib/docker"
    assert disk.calls == [] and events == []
    assert w.may_pull() is None


def test_below_min_free_unused_images_go_lru_first_until_enough() -> None:
    disk = FakeDisk(free=12 * GIB, build_cache=1 * GIB)
    disk.add("sha256:lane", "r/lane:1", 1.0, 5)  # a container uses it
    disk.add("sha256:conf", "r/conf:2", 2.0, 5)  # configured, no container yet
    disk.add("sha256:oldest", "r/oldest:1", 3.0, 4)
    disk.add("sha256:older", "", 4.0, 4)  # dangling: removed by id
    disk.add("sha256:newer", "r/newer:1", 9.0, 4)
    disk.in_use = {"sha256:lane"}
    w, events = watch(disk, configured=("r/conf:2", "r/absent:3"))
    reading = w.check()
    # 12 + 1 (build cache) + 4 + 4 = 21 GiB >= 20: the newest unused one stays.
    assert disk.calls == ["r/oldest:1", "sha256:older"]
    assert set(disk.images) == {"sha256:lane", "sha256:conf", "sha256:newer"}
    assert (reading.state, reading.free_bytes, reading.images_removed) == ("ok", 21 * GIB, 2)
    assert [kind for kind, _ in events] == [
        "cache_pruned",
        "image_removed",
        "image_removed",
    ]
    assert events[1][1] == "removed unused image r/oldest:1 (4.0 GiB) to free Docker disk space"
    assert events[2][1].startswith("removed unused image sha256:older")


def test_an_image_a_container_used_recently_outlives_an_older_unused_one() -> None:
    disk = FakeDisk(free=25 * GIB)
    disk.add("sha256:ran", "r/ran:1", 1.0, 4)
    disk.add("sha256:idle", "r/idle:1", 5.0, 4)
    disk.in_use = {"sha256:ran"}
    w, _ = watch(disk)
    w.check()  # seen in use at t=1000 (above min_free: nothing removed)
    disk.in_use = set()  # its container is gone
    disk.free = 17 * GIB
    w.check()
    assert disk.calls == ["r/idle:1"]


def test_never_an_image_in_use_and_a_refusal_is_an_event() -> None:
    disk = FakeDisk(free=5 * GIB)
    disk.add("sha256:lane", "r/lane:1", 1.0, 5)
    disk.add("sha256:other", "r/other:1", 2.0, 1)
    disk.in_use = {"sha256:lane"}
    disk.refuse = {"r/other:1"}  # e.g. a container created between the list and the removal
    w, events = watch(disk)
    reading = w.check()
    assert disk.calls == ["r/other:1"]
    assert "sha256:lane" in disk.images
    assert reading.state == "low" and reading.images_removed == 0
    assert events == [
        (
            "image_kept",
            "could not remove image r/other:1: conflict: unable to remove r/other:1: image is being used",
        ),
        ("disk", "Docker disk low: 5.0 GiB free on /var/lib/docker, below min_free 20.0 GiB"),
    ]


def test_without_min_free_nothing_is_removed_even_below_the_floor() -> None:
    disk = FakeDisk(free=1 * GIB, build_cache=GIB)
    disk.add("sha256:old", "r/old:1", 1.0, 5)
    w, _ = watch(disk, min_free=None)
    reading = w.check()
    assert disk.calls == [] and disk.build_cache == GIB
    assert reading.state == "critical"
    assert reading.message == (
        "1.0 GiB free on /var/lib/docker, below the hard floor 2.0 GiB: no pull starts"
    )
    refusal = w.may_pull()
    assert refusal is not None and refusal.startswith(
        "no pull starts: Docker's data root has 1.0 GiB"
    )


def test_a_state_change_is_an_event() -> None:
    disk = FakeDisk(free=30 * GIB)
    w, events = watch(disk, min_free=None)
    w.check()
    disk.free = GIB
    w.check()
    assert events == [
        (
            "disk",
            "Docker disk critical: 1.0 GiB free on /var/lib/docker, below the hard floor 2.0 GiB: no pull starts",
        )
    ]


def test_an_invisible_root_is_unknown_and_removes_nothing() -> None:
    disk = FakeDisk(free=None)
    disk.add("sha256:old", "r/old:1", 1.0, 5)
    w, _ = watch(disk)
    reading = w.check()
    assert reading.state == "unknown" and reading.free_bytes is None
    assert reading.message == "free space of /var/lib/docker not visible from this host"
    assert disk.calls == [] and w.may_pull() is None


def test_an_engine_failure_is_a_reading() -> None:
    class Broken(FakeDisk):
        def disk_usage(self) -> DiskUsage:
            raise RuntimeError("Cannot connect to the Docker daemon")

    w, _ = watch(Broken(free=0))
    reading = w.check()
    assert reading.state == "unknown"
    assert reading.message == "cannot read: Cannot connect to the Docker daemon"


async def test_the_assembly_frees_the_simulated_disk_and_shows_it(tmp_path: Path) -> None:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    path = tmp_path / "config.toml"
    path.write_text(
        f'[azure]\nurl = "http://127.0.0.1:9"\npool = "gpu"\n\n'
        f'[agents]\nimage = "{DEFAULT_IMAGE}"\nname_prefix = "box"\ncount = 1\ngpus = "none"\n\n'
        '[docker]\nmin_free = "20g"\nhard_floor = "1g"\ncheck_interval = 1\n'
    )
    config = load_config(path)
    runtime = SimulatedRuntime(org, images=(DEFAULT_IMAGE, "old/a:1", "old/b:1"))
    runtime.disk.free = 15 * GIB
    runtime.disk.sizes = {DEFAULT_IMAGE: 30 * GIB, "old/a:1": 8 * GIB, "old/b:1": 8 * GIB}
    runtime.disk.created = {"old/a:1": 1.0, "old/b:1": 2.0}
    parts = assemble(
        config,
        api=SimPoolApi(org, PAT),
        runtime=runtime,
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="in-process",
    )
    assert parts.disk_watch is not None
    parts.start()
    try:
        await wait_until(
            lambda: parts.supervisor.snapshot().disk.images_removed == 1, 20, "one image removed"
        )
        snap = parts.supervisor.snapshot()
        assert runtime.disk.removed == ["old/a:1"]
        assert (snap.disk.state, snap.disk.free_bytes) == ("ok", 23 * GIB)
        assert snap.disk.min_free_bytes == 20 * GIB and snap.disk.hard_floor_bytes == GIB
        assert snapshot_from_dict(json.loads(json.dumps(to_dict(snap)))).disk == snap.disk
        kinds = [e.kind for e in parts.supervisor.events]
        assert "image_removed" in kinds
        runtime.disk.free = 5 * GIB  # the other unused one goes; still low after it
        await wait_until(lambda: runtime.disk.removed == ["old/a:1", "old/b:1"], 20, "b removed")
        await wait_until(lambda: parts.supervisor.snapshot().disk.state == "low", 20, "low")
        assert parts.disk_watch.may_pull() is None
        runtime.disk.free = GIB // 2  # below the floor: nothing left to remove
        await wait_until(
            lambda: parts.supervisor.snapshot().disk.state == "critical", 20, "critical"
        )
        assert parts.disk_watch.may_pull() is not None
        assert DEFAULT_IMAGE in runtime.images  # configured and used: kept
    finally:
        await parts.close()
        runtime.close()


async def test_below_the_hard_floor_a_slot_missing_its_image_says_no_pull_starts(
    tmp_path: Path,
) -> None:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    path = tmp_path / "config.toml"
    path.write_text(
        '[azure]\nurl = "http://127.0.0.1:9"\npool = "gpu"\n\n'
        '[agents]\nimage = "absent/agent:2"\nname_prefix = "box"\ncount = 1\ngpus = "none"\n\n'
        "[supervisor]\nbackoff_base = 0.2\nbackoff_max = 0.5\npark_after = 100\n\n"
        '[docker]\nhard_floor = "1g"\ncheck_interval = 1\n'
    )
    runtime = SimulatedRuntime(org)
    runtime.disk.free = GIB // 2
    parts = assemble(
        load_config(path),
        api=SimPoolApi(org, PAT),
        runtime=runtime,
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="in-process",
    )
    parts.start()

    def message() -> str:
        slot = parts.supervisor.snapshot().slot(0)
        return "" if slot is None else slot.message

    try:
        await wait_until(lambda: "no pull starts" in message(), 20, "the slot says why")
        assert "absent/agent:2 is not present" in message()
        assert "below the hard floor of 1.0 GiB" in message()
        runtime.disk.free = 10 * GIB  # room again: the reason goes with the next failure
        await wait_until(lambda: "not present" in message() and "no pull" not in message(), 20)
    finally:
        await parts.close()
        runtime.close()


def test_a_parent_image_only_loses_its_tag_and_is_not_counted() -> None:
    disk = FakeDisk(free=10 * GIB)
    disk.add("sha256:base", "r/base:1", 1.0, 3)
    disk.parents = {"sha256:base"}
    w, events = watch(disk)
    reading = w.check()
    assert disk.calls == ["r/base:1"]
    assert reading.images_removed == 0 and reading.free_bytes == 10 * GIB
    assert ("image_kept", "untagged unused image r/base:1; its layers are shared") in events
