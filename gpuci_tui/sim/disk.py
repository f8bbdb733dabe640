"""A simulated Docker data root for the demo and the tests: a free-space figure and image sizes.

Image ids are the image names (as in `SimulatedRuntime`); removing an image frees
its size and takes it off the runtime's images, and an image a container of the
runtime uses is refused, as the engine refuses it. What the disk needs of the
runtime is `LocalImages` (the runtime, which holds the disk, is not imported here).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from gpuci_tui.core.protocols import DiskUsage, ImageInfo

GIB = 1024**3


class LocalImages(Protocol):
    """The simulated engine's images, as its data root sees them (`SimulatedRuntime`)."""

    def image_names(self) -> set[str]:
        """Every local image."""
        ...

    def images_in_use(self) -> set[str]:
        """The images of the current containers (running or not)."""
        ...

    def image_present(self, image: str) -> bool:
        """Whether ``image`` is local."""
        ...

    def drop_image(self, ref: str) -> bool:
        """Take ``ref`` off the local images; False when it was not there."""
        ...


class SimDisk:
    """`DockerDisk` over a `SimulatedRuntime`; ``free`` may be set by a test at any time."""

    def __init__(
        self,
        runtime: LocalImages,
        *,
        total: int = 500 * GIB,
        free: int = 200 * GIB,
        sizes: Mapping[str, int] | None = None,
        created: Mapping[str, float] | None = None,
        root: str = "/var/lib/docker",
    ) -> None:
        """A data root of ``total`` bytes with ``free`` left; ``sizes`` by image name."""
        self.runtime = runtime
        self.total = total
        self.free = free
        self.root = root
        self.sizes = dict(sizes or {})
        self.created = dict(created or {})
        self.build_cache = 0
        """Bytes of dangling build cache (freed by `prune_build_cache`)."""
        self.removed: list[str] = []
        self._lock = threading.Lock()

    def disk_usage(self) -> DiskUsage:
        """The simulated root and its free space."""
        with self._lock:
            return DiskUsage(self.root, self.free, self.total)

    def list_images(self) -> list[ImageInfo]:
        """The runtime's images with their sizes (default 1 GiB)."""
        names = sorted(self.runtime.image_names())
        return [ImageInfo(n, (n,), self.created.get(n, 0.0), self.sizes.get(n, GIB)) for n in names]

    def image_ids_in_use(self) -> set[str]:
        """The images of the runtime's current containers (running or not)."""
        return self.runtime.images_in_use()

    def image_id(self, ref: str) -> str | None:
        """``ref`` itself when present."""
        return ref if self.runtime.image_present(ref) else None

    def remove_image(self, ref: str) -> bool:
        """Remove ``ref``; refused (ValueError) when a container uses it or it is absent."""
        if ref in self.image_ids_in_use():
            raise ValueError(
                f"conflict: unable to remove {ref}: image is being used by a container"
            )
        if not self.runtime.drop_image(ref):
            raise ValueError(f"No such image: {ref}")
        with self._lock:
            self.free += self.sizes.get(ref, GIB)
            self.removed.append(ref)
        return True

    def prune_build_cache(self) -> int:
        """Free the simulated build cache."""
        with self._lock:
            freed, self.build_cache = self.build_cache, 0
            self.free += freed
            return freed
