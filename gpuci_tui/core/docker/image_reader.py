"""Reading local images through the engine: presence, id, digests, env and labels.

One inspect answers all of it; `ImageReader` keeps each image's RepoDigests by
image id (an image's digests never change under its id), so a listing inspects
each image once, not once per container.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import docker.errors

from gpuci_tui.core.docker.client import EngineConnection
from gpuci_tui.core.docker.errors import ContainerOperationError, api_explanation
from gpuci_tui.core.docker.images import repo_digest_for
from gpuci_tui.core.errors import ContainerStartError, GpuciError
from gpuci_tui.core.protocols import ContainerInfo, ImageConfig

__all__ = ["ImageReader"]

_DIGEST_CACHE_SIZE = 512


class ImageReader:
    """Image inspection on one engine connection (thread-safe)."""

    def __init__(self, conn: EngineConnection) -> None:
        """Read through ``conn`` (the runtime's, so its API calls are counted)."""
        self._conn = conn
        self._lock = threading.Lock()
        self._repo_digests: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def inspect(self, image: str) -> dict[str, Any] | None:
        """``docker image inspect`` of ``image``; None when it is not present (never pulls).

        Raises:
            ContainerStartError: the name is not a valid image reference.
            ContainerOperationError: the engine refused in another way.
        """
        with self._conn.api() as api:
            try:
                data: dict[str, Any] = api.inspect_image(image)
            except docker.errors.NotFound:
                return None
            except docker.errors.APIError as exc:
                if exc.status_code == 400:
                    raise ContainerStartError(
                        f"Image name {image!r} is not valid: {api_explanation(exc)}"
                    ) from exc
                raise ContainerOperationError(
                    f"Docker could not look up image {image}: {api_explanation(exc)}"
                ) from exc
        return data

    def keep(self, data: Mapping[str, Any]) -> str:
        """Remember an inspected image's RepoDigests by its id; returns the id."""
        image_id = str(data.get("Id") or "")
        if image_id:
            digests = tuple(str(d) for d in data.get("RepoDigests") or ())
            with self._lock:
                self._repo_digests[image_id] = digests
                self._repo_digests.move_to_end(image_id)
                while len(self._repo_digests) > _DIGEST_CACHE_SIZE:
                    self._repo_digests.popitem(last=False)
        return image_id

    def with_repo_digest(self, info: ContainerInfo) -> ContainerInfo:
        """``info`` with the repo digest of its image for its reference (one inspect per image)."""
        if not info.image_id or info.repo_digest:
            return info
        with self._lock:
            digests = self._repo_digests.get(info.image_id)
        if digests is None:
            try:
                data = self.inspect(info.image_id)
            except GpuciError:
                return info  # the digest is a detail: the listing stands without it
            if data is None:
                return info
            self.keep(data)
            digests = tuple(str(d) for d in data.get("RepoDigests") or ())
        return replace(info, repo_digest=repo_digest_for(info.image, digests))

    def config(self, image: str) -> ImageConfig | None:
        """The image's id, environment and labels in one inspect (None when not present)."""
        data = self.inspect(image)
        if data is None:
            return None
        config = data.get("Config") or {}
        env = dict(str(item).partition("=")[::2] for item in config.get("Env") or [])
        labels = {str(k): str(v) for k, v in (config.get("Labels") or {}).items()}
        return ImageConfig(str(data.get("Id", "")), env, labels)
