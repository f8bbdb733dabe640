"""`EngineDisk`: the free space is read only where the data root is visible from here."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuci_tui.core.docker.disk import EngineDisk
from gpuci_tui.core.docker.errors import Endpoint


class FakeApi:
    def __init__(self, root: str) -> None:
        self.root = root
        self.info_calls = 0

    def info(self) -> dict[str, Any]:
        self.info_calls += 1
        return {"DockerRootDir": self.root}

    def images(self) -> list[dict[str, Any]]:
        return [
            {"Id": "sha256:a", "RepoTags": ["r/a:1", "r/a:latest"], "Created": 10, "Size": 5},
            {"Id": "sha256:b", "RepoTags": ["<none>:<none>"], "Created": 20, "Size": 7},
            {"Id": "sha256:c", "RepoTags": None, "Created": 30, "Size": 9},
        ]

    def containers(self, all: bool) -> list[dict[str, Any]]:  # noqa: A002 - docker-py's name
        assert all, "stopped containers hold their images too"
        return [{"ImageID": "sha256:a"}, {"ImageID": ""}]

    def remove_image(self, ref: str, force: bool) -> list[dict[str, str]]:
        assert not force, "never forced"
        if ref == "r/base:1":
            return [{"Untagged": ref}]
        return [{"Untagged": ref}, {"Deleted": "sha256:a"}]

    def prune_builds(self) -> dict[str, Any]:
        return {"CachesDeleted": None, "SpaceReclaimed": 123}


class FakeConn:
    def __init__(self, url: str, root: str) -> None:
        self.endpoint = Endpoint(url)
        self.fake = FakeApi(root)

    @contextlib.contextmanager
    def api(self) -> Iterator[FakeApi]:
        yield self.fake


def disk(url: str, root: str) -> tuple[EngineDisk, FakeConn]:
    conn = FakeConn(url, root)
    return EngineDisk(conn), conn  # type: ignore[arg-type]


def test_a_local_engine_root_is_read_with_statvfs_and_asked_once(tmp_path: Path) -> None:
    reader, conn = disk("unix:///var/run/docker.sock", str(tmp_path))
    usage = reader.disk_usage()
    stat = os.statvfs(tmp_path)
    assert usage.root == str(tmp_path)
    assert usage.total_bytes == stat.f_blocks * stat.f_frsize
    assert usage.free_bytes is not None
    assert abs(usage.free_bytes - stat.f_bavail * stat.f_frsize) < 64 * 1024**2
    reader.disk_usage()
    assert conn.fake.info_calls == 1


def test_a_remote_engine_or_an_invisible_root_is_unknown(tmp_path: Path) -> None:
    remote, _ = disk("tcp://gpu-host:2376", str(tmp_path))
    assert remote.disk_usage().free_bytes is None
    hidden, _ = disk("unix:///var/run/docker.sock", str(tmp_path / "not-here"))
    usage = hidden.disk_usage()
    assert (usage.root, usage.free_bytes) == (str(tmp_path / "not-here"), None)


def test_images_containers_and_build_cache_as_the_engine_says() -> None:
    reader, _ = disk("unix:///var/run/docker.sock", "/x")
    images = reader.list_images()
    assert [(i.id, i.tags, i.created, i.size) for i in images] == [
        ("sha256:a", ("r/a:1", "r/a:latest"), 10.0, 5),
        ("sha256:b", (), 20.0, 7),
        ("sha256:c", (), 30.0, 9),
    ]
    assert reader.image_ids_in_use() == {"sha256:a"}
    assert reader.prune_build_cache() == 123


def test_a_removal_says_whether_the_image_was_deleted_or_only_untagged() -> None:
    reader, _ = disk("unix:///var/run/docker.sock", "/x")
    assert reader.remove_image("r/a:1") is True
    assert reader.remove_image("r/base:1") is False
