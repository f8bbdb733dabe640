"""The connection to the Docker engine: a lazily created docker-py client, counted.

`EngineConnection` creates the docker-py client on first use (so that building
a runtime never fails), counts every HTTP request made through it (benchmarks
report Docker API calls per job) and maps "the engine cannot be talked to" to
`RuntimeUnavailableError` for whatever call is in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import docker
import docker.errors

from gpuci_tui.core.docker.errors import (
    engine_unavailable,
    invalid_endpoint,
    is_engine_failure,
    resolve_endpoint,
)
from gpuci_tui.core.errors import RuntimeUnavailableError


class _CallCounter:
    """Counts HTTP requests made through docker-py `APIClient`s (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @property
    def value(self) -> int:
        with self._lock:
            return self._count

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._count += n

    def instrument(self, api: Any) -> Callable[[], None]:
        """Wrap ``api.request`` and return the undo.

        `APIClient` is a `requests.Session`: its ``_get/_post/_put/_delete`` and
        the few direct ``self.post`` calls all end in ``request``, so one wrapper
        on the instance sees every call.
        """
        original = api.request

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.add()
            return original(*args, **kwargs)

        api.request = counted

        def undo() -> None:
            if api.__dict__.get("request") is counted:
                del api.request

        return undo


def _address_of(client: Any) -> str | None:
    """The address an existing docker-py client talks to (for messages), if it can be told."""
    api = getattr(client, "api", None)
    socket_path = getattr(getattr(api, "_custom_adapter", None), "socket_path", None)
    if isinstance(socket_path, str) and socket_path:
        return f"unix://{socket_path}"
    base_url = getattr(api, "base_url", None)
    if isinstance(base_url, str) and base_url.startswith(("http://", "https://")):
        return base_url
    return None


class EngineConnection:
    """One docker-py client for one engine address, created on first use.

    Args:
        client: A docker-py `DockerClient` to use instead of creating one (its
            calls are counted from now on; `close` stops that but leaves it open).
        base_url: The engine's address; default ``DOCKER_HOST``, else the local socket.
        timeout: Seconds to wait for the engine's answer to one call.
    """

    def __init__(self, client: Any = None, *, base_url: str | None, timeout: float) -> None:
        self.endpoint = resolve_endpoint(base_url or _address_of(client))
        self.timeout = timeout
        self._base_url = base_url
        self._lock = threading.Lock()
        self._counter = _CallCounter()
        self._owns_client = client is None
        self._client: Any = None
        self._undo: Callable[[], None] | None = None
        if client is not None:
            self._adopt(client)

    @property
    def call_count(self) -> int:
        """How many HTTP requests went to the engine through this connection."""
        return self._counter.value

    def _adopt(self, client: Any) -> None:
        api = getattr(client, "api", None)
        if api is not None and hasattr(api, "request"):
            self._undo = self._counter.instrument(api)
        self._client = client

    def client(self) -> Any:
        """The docker-py `DockerClient`, created on first use.

        Raises:
            RuntimeUnavailableError: the engine cannot be reached (docker-py asks it
                for its API version when the client is created) or the address is
                malformed.
        """
        with self._lock:
            if self._client is None:
                try:
                    if self._base_url:
                        client = docker.DockerClient(base_url=self._base_url, timeout=self.timeout)
                    else:
                        client = docker.DockerClient.from_env(timeout=self.timeout)
                except docker.errors.DockerException as exc:
                    if is_engine_failure(exc):
                        raise self.unavailable(exc) from exc
                    raise invalid_endpoint(exc, self.endpoint) from exc
                self._adopt(client)
                # docker-py asked the engine for its API version while being
                # created, before the counter was in place.
                self._counter.add()
            return self._client

    def unavailable(self, exc: BaseException) -> RuntimeUnavailableError:
        """The plain message for a failure to talk to this engine."""
        return engine_unavailable(exc, self.endpoint, self.timeout)

    @contextmanager
    def api(self) -> Iterator[Any]:
        """Yield the low-level `APIClient`; map engine failures to RuntimeUnavailableError."""
        api = self.client().api
        try:
            yield api
        except RuntimeUnavailableError:
            raise
        except Exception as exc:
            if is_engine_failure(exc):
                raise self.unavailable(exc) from exc
            raise

    def close(self) -> None:
        """Stop counting on an injected client; close a client created here."""
        with self._lock:
            if self._undo is not None:
                self._undo()
                self._undo = None
            if self._owns_client and self._client is not None:
                self._client.close()
                self._client = None
