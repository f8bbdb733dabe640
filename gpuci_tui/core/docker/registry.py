"""Pulls and registry digests through the engine (docker-py), and what is here already.

`EngineRegistry` is the Docker side of the image puller (`host.image_puller`):
it asks the registry for the digest behind a tag without downloading a layer
(``GET /distribution/{name}/json``, docker-py's ``inspect_distribution``),
pulls with Docker's progress stream (``api.pull(..., stream=True, decode=True)``)
and reads the local image's repo digests.

Credentials: gpuci-tui stores none. With no ``auth_config``, docker-py sends the
credentials of Docker's own ``config.json`` (``$DOCKER_CONFIG``, else
``~/.docker``), asking its credential helpers (``credsStore``/``credHelpers``)
when it names them. The configuration is read again before every call, so a
``docker login`` made while the daemon runs is used by the next pull.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import docker.errors

from gpuci_tui.core.docker.client import EngineConnection
from gpuci_tui.core.docker.errors import api_explanation
from gpuci_tui.core.docker.image_reader import ImageReader
from gpuci_tui.core.docker.pull_errors import pull_failure
from gpuci_tui.core.docker.pull_progress import PullError

__all__ = ["EngineRegistry"]

Line = Mapping[str, Any]


class EngineRegistry:
    """Registry digests and pulls on one engine connection (blocking, thread-safe)."""

    def __init__(self, conn: EngineConnection, images: ImageReader) -> None:
        """Work through ``conn`` (the runtime's: its calls are counted) and ``images``."""
        self._conn = conn
        self._images = images

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        """The repo digests (``REPO@sha256:…``) of the local ``image``; None when absent.

        Raises:
            ContainerStartError: not a valid reference.
            ContainerOperationError: the engine refused the inspect.
            RuntimeUnavailableError: the engine cannot be reached.
        """
        data = self._images.inspect(image)
        if data is None:
            return None
        return tuple(str(d) for d in data.get("RepoDigests") or ())

    def remote_digest(self, image: str) -> str:
        """The manifest digest (``sha256:…``) the registry has behind ``image``'s tag.

        Raises:
            ImagePullError: the registry refused or could not be reached (with the kind).
            RuntimeUnavailableError: the engine cannot be reached.
        """
        with self._conn.api() as api:
            api.reload_config()  # a `docker login` since the last call counts
            try:
                data = api.inspect_distribution(image)
            except docker.errors.APIError as exc:
                raise pull_failure(
                    image, api_explanation(exc), status=exc.status_code, doing="registry check"
                ) from exc
        return str((data.get("Descriptor") or {}).get("digest") or "")

    def pull(self, image: str, on_line: Callable[[Line], None] | None = None) -> None:
        """Pull ``image``, handing every line of Docker's progress stream to ``on_line``.

        ``on_line`` runs in this (the pulling) thread; it may raise `PullError` for
        an error line (`PullTracker.feed` does), or the error line raises it here.

        Raises:
            ImagePullError: the pull failed (auth, not found, unreachable, disk, other).
            RuntimeUnavailableError: the engine cannot be reached.
        """
        with self._conn.api() as api:
            api.reload_config()
            try:
                stream = api.pull(image, stream=True, decode=True)
                try:
                    for line in stream:
                        if on_line is not None:
                            on_line(line)
                        if "error" in line or "errorDetail" in line:
                            detail = line.get("errorDetail") or {}
                            raise PullError(str(detail.get("message") or line.get("error") or ""))
                finally:
                    stream.close()  # left early: the connection goes, Docker cancels the pull
            except docker.errors.APIError as exc:
                raise pull_failure(image, api_explanation(exc), status=exc.status_code) from exc
            except PullError as exc:
                raise pull_failure(image, str(exc)) from exc
