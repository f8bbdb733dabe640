"""`DockerDisk` on a Docker engine: its data root's free space, its images, their removal.

Docker's API has no free-space call (``docker system df`` is usage, not room),
so the free space is ``statvfs`` of the data root (``DockerRootDir`` from
``docker info``), read only when the engine is reached through a local Unix
socket and the root is visible here; otherwise it is unknown, never a guess.
"""

from __future__ import annotations

import os
from typing import Any

import docker.errors

from gpuci_tui.core.docker.client import EngineConnection
from gpuci_tui.core.protocols import DiskUsage, ImageInfo


class EngineDisk:
    """`DockerDisk` through an `EngineConnection` (see `DockerRuntime.disk`)."""

    def __init__(self, conn: EngineConnection) -> None:
        """Use ``conn`` (shared with the runtime: one client, one call count)."""
        self._conn = conn
        self._root: str | None = None

    def disk_usage(self) -> DiskUsage:
        """The data root and, when visible from here, its free and total bytes."""
        if self._root is None:
            # The root does not change while the engine runs: asked once.
            with self._conn.api() as api:
                self._root = str(api.info().get("DockerRootDir") or "")
        root = self._root
        if not root or self._conn.endpoint.socket_path is None or not os.path.isdir(root):
            return DiskUsage(root, None)
        stat = os.statvfs(root)
        # f_bavail: what an unprivileged writer may use (dockerd runs as root, but the
        # reserved blocks are the last resort of the host, not room for images).
        return DiskUsage(root, stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize)

    def list_images(self) -> list[ImageInfo]:
        """Every local image (top level, tagged or dangling)."""
        with self._conn.api() as api:
            rows: list[dict[str, Any]] = api.images()
        return [
            ImageInfo(
                id=str(row["Id"]),
                tags=tuple(t for t in row.get("RepoTags") or () if t and t != "<none>:<none>"),
                created=float(row.get("Created") or 0),
                size=int(row.get("Size") or 0),
            )
            for row in rows
        ]

    def image_ids_in_use(self) -> set[str]:
        """The image id of every container, running or not, whoever started it."""
        with self._conn.api() as api:
            rows: list[dict[str, Any]] = api.containers(all=True)
        return {str(row["ImageID"]) for row in rows if row.get("ImageID")}

    def image_id(self, ref: str) -> str | None:
        """The local id of ``ref`` (None: not present)."""
        with self._conn.api() as api:
            try:
                return str(api.inspect_image(ref)["Id"])
            except docker.errors.ImageNotFound:
                return None

    def remove_image(self, ref: str) -> bool:
        """Remove a tag or a dangling image, never forced; whether the image was deleted."""
        with self._conn.api() as api:
            answer = api.remove_image(ref, force=False)
        # Docker answers [{"Untagged": …}, {"Deleted": "sha256:…"}, …]; no "Deleted"
        # when the image stays (another tag, or child images share its layers).
        return any("Deleted" in item for item in answer or () if isinstance(item, dict))

    def prune_build_cache(self) -> int:
        """Remove the dangling build cache (``/build/prune``); the bytes freed."""
        with self._conn.api() as api:
            answer: dict[str, Any] = api.prune_builds()
        return int(answer.get("SpaceReclaimed") or 0)
