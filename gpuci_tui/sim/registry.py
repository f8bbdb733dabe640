"""A simulated registry for the simulated runtime: Docker's pull, for the demo's own image.

The demo's console pulls an agent's image with ``i`` as on a real host
(`screens.image_pull`, `ImagePuller`), and the daemon's puller asks the same
registry before a start. A `SimulatedRuntime` given this registry
(``runtime.registry``) answers as the engine would: the repo digests of a local
image, the digest behind a tag, and a pull told in Docker's own progress lines
(``Pulling fs layer``, ``Downloading`` with growing byte counts at a simulated
rate, ``Pull complete``, ``Digest:``, ``Status:``), so the pull shows layers,
bytes, rate, ETA and the digest. The image a pull brings is what the runtime
starts from afterwards, under a new image id, and its size leaves the simulated
disk.

Only `publish`ed images are served: any other is "not found", as a registry says.
`publish` can leave the runtime an older build of the image (``behind``): its
base layer is the registry's, the others were pushed since, so the first pull
downloads them and later ones find the image up to date.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gpuci_tui.core.errors import ImagePullError
from gpuci_tui.core.protocols import ImageConfig

if TYPE_CHECKING:
    from gpuci_tui.sim.disk import SimDisk


class PulledInto(Protocol):
    """What a pull needs of the simulated engine it adds images to (`SimulatedRuntime`).

    A protocol, not the runtime itself: the runtime holds its registry, so importing it
    back here would tie the two modules in a circle.
    """

    images: set[str]
    image_configs: dict[str, ImageConfig]
    disk: SimDisk

    def image_present(self, image: str) -> bool:
        """The image is present locally."""
        ...

    def image_config(self, image: str) -> ImageConfig | None:
        """What the local image says of itself (None: not present)."""
        ...


__all__ = ["DEMO_LAYERS", "REGISTRY_HEADER", "SimImageRegistry", "no_image_here"]

DEMO_LAYERS = (28_000_000, 640_000_000, 820_000_000)
"""Layer sizes of the demo's image (bytes): a base, the CUDA libraries, the toolchain."""
RATE = 240_000_000
"""Simulated download rate, bytes per second (a pull of the demo's image takes ~6 s)."""
TICK = 0.25
"""Seconds between two ``Downloading`` lines of a layer."""

Line = Mapping[str, Any]

REGISTRY_HEADER = "Docker-Distribution-API-Version"
NOT_SERVED = (
    "this is gpuci-tui's simulated organisation on 127.0.0.1: it serves no image to Docker. "
    "The demo's simulated agents are not in Docker; the demo's console pulls their image "
    "from its simulated registry (the i key), and `gpuci-tui demo --docker` runs a real "
    "registry on 127.0.0.1"
)


def no_image_here(path: str) -> tuple[int, dict[str, Any]]:
    """The simulated organisation's answer to Docker asking it for an image (``/v2/...``).

    The demo names its image on the organisation's port, so a console that asks its
    own Docker engine to pull it reaches 127.0.0.1, never a public registry; this
    answer, in the registry API's error form, is what Docker then says.
    """
    if path.rstrip("/") == "/v2":
        return 200, {}  # "a registry, API v2": Docker goes on to ask for the image
    return 404, {"errors": [{"code": "NAME_UNKNOWN", "message": NOT_SERVED, "detail": None}]}


@dataclass(frozen=True)
class _Build:
    """One build of an image: its layers (id, size) and its manifest digest."""

    layers: tuple[tuple[str, int], ...]

    @property
    def digest(self) -> str:
        """The manifest's digest (``sha256:…``)."""
        return "sha256:" + hashlib.sha256("\n".join(self.ids).encode()).hexdigest()

    @property
    def image_id(self) -> str:
        """The image's id on the engine (its configuration's digest, not the manifest's)."""
        return "sha256:" + hashlib.sha256(f"config\n{self.digest}".encode()).hexdigest()

    @property
    def ids(self) -> tuple[str, ...]:
        """The layers' ids."""
        return tuple(layer for layer, _ in self.layers)


def _layer_id(image: str, index: int, build: str) -> str:
    return hashlib.sha256(f"{image}\n{index}\n{build}".encode()).hexdigest()


def _repository(image: str) -> str:
    """``HOST:PORT/repo/name`` of ``HOST:PORT/repo/name:tag`` (a registry port is no tag)."""
    head, _, last = image.rpartition("/")
    name = last.split("@")[0].split(":")[0]
    return f"{head}/{name}" if head else name


def _path(repository: str) -> str:
    """The repository without its registry host, as Docker's ``Pulling from`` names it."""
    first, _, rest = repository.partition("/")
    return rest if rest and ("." in first or ":" in first or first == "localhost") else repository


class SimImageRegistry:
    """The simulated engine's pulls and digests (`core.host.images.puller.ImageRegistry`)."""

    def __init__(
        self,
        runtime: PulledInto,
        *,
        rate: float = RATE,
        tick: float = TICK,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        """Serve pulls into ``runtime``.

        Args:
            runtime: the simulated engine whose images a pull adds to.
            rate: simulated download rate, bytes per second.
            tick: seconds between two progress lines of a layer.
            sleep: waits that many seconds, True when the registry is closing (tests).
        """
        self.runtime = runtime
        self.rate = rate
        self.tick = tick
        self._closing = threading.Event()
        self._sleep = sleep or self._closing.wait
        self._lock = threading.Lock()
        self._remote: dict[str, _Build] = {}
        self._local: dict[str, _Build] = {}
        self.pulls = 0

    def publish(self, image: str, sizes: Sequence[int] = DEMO_LAYERS, *, behind: bool) -> str:
        """Serve ``image`` with layers of ``sizes``; the registry's digest.

        ``behind``: the runtime holds an older build (only the base layer is the
        registry's); else it holds the registry's build. Either way it is present.
        """
        remote = _Build(tuple((_layer_id(image, i, "new"), s) for i, s in enumerate(sizes)))
        local = remote
        if behind:
            older = ((_layer_id(image, i, "old"), s) for i, s in enumerate(sizes[1:], 1))
            local = _Build((remote.layers[0], *older))
        with self._lock:
            self._remote[image] = remote
            self._local[image] = local
        self._arrived(image, local)
        return remote.digest

    def close(self) -> None:
        """End the pulls in flight at their next line (the demo is ending)."""
        self._closing.set()

    # ------------------------------------------------------------------ ImageRegistry

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        """``REPO@sha256:…`` of the local build; None when the runtime lacks the image."""
        if not self.runtime.image_present(image):
            return None
        with self._lock:
            build = self._local.get(image)
        return (f"{_repository(image)}@{build.digest}",) if build is not None else ()

    def remote_digest(self, image: str) -> str:
        """The digest the registry has behind ``image``'s tag."""
        return self._published(image).digest

    def pull(self, image: str, on_line: Callable[[Line], None] | None = None) -> None:
        """Pull ``image`` into the runtime, telling it in Docker's progress lines."""
        say = on_line or (lambda line: None)
        remote = self._published(image)
        with self._lock:
            self.pulls += 1
            local = self._local.get(image) if self.runtime.image_present(image) else None
        have = set(local.ids) if local is not None else set()
        say({"status": f"Pulling from {_path(_repository(image))}"})
        missing = [(layer, size) for layer, size in remote.layers if layer not in have]
        for layer, _ in remote.layers:
            short = layer[:12]
            say({"status": "Already exists" if layer in have else "Pulling fs layer", "id": short})
        for layer, size in missing:
            self._download(image, layer[:12], size, say)
        say({"status": f"Digest: {remote.digest}"})
        fresh = local is None or local.digest != remote.digest
        if fresh:
            self._arrived(image, remote, downloaded=sum(size for _, size in missing))
        done = "Downloaded newer image for" if fresh else "Image is up to date for"
        say({"status": f"Status: {done} {image}"})

    # ------------------------------------------------------------------ helpers

    def _published(self, image: str) -> _Build:
        with self._lock:
            build = self._remote.get(image)
        if build is None:
            raise ImagePullError(
                f"pull of {image} failed: not found (the demo's simulated registry serves "
                f"only {', '.join(sorted(self._remote)) or 'no image'})",
                "not_found",
            )
        return build

    def _download(self, image: str, short: str, size: int, say: Callable[[Line], None]) -> None:
        step = max(1, int(self.rate * self.tick))
        current = 0
        while current < size:
            if self._sleep(self.tick):
                raise ImagePullError(f"pull of {image} stopped: the demo is ending")
            current = min(size, current + step)
            detail = {"current": current, "total": size}
            say({"status": "Downloading", "id": short, "progressDetail": detail})
        for status in ("Download complete", "Extracting", "Pull complete"):
            say({"status": status, "id": short, "progressDetail": {}})

    def _arrived(self, image: str, build: _Build, downloaded: int = 0) -> None:
        """``build`` is the runtime's ``image`` now: present, under its own id, on the disk."""
        runtime = self.runtime
        labels: Mapping[str, str] = {}
        if runtime.image_present(image):
            known = runtime.image_config(image)
            labels = known.labels if known is not None else {}
        with self._lock:
            self._local[image] = build
        runtime.image_configs[image] = ImageConfig(build.image_id, {}, labels)
        runtime.images.add(image)
        disk = runtime.disk
        disk.sizes[image] = sum(size for _, size in build.layers)
        disk.free = max(0, disk.free - downloaded)
