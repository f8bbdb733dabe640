"""Turning docker-py and socket failures into plain messages for the operator.

docker-py reports an unreachable engine as a chain of wrapped exceptions
(`DockerException` → `requests.ConnectionError` → urllib3 `ProtocolError` /
`MaxRetryError` → `FileNotFoundError`, `PermissionError`, …), and a refused
request as `APIError` with Docker's own explanation. The functions here walk
that chain once and say what happened and what to do, so that no caller has to
show a traceback for an expected failure.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import docker.errors
import requests.exceptions
import urllib3.exceptions

from gpuci_tui.core.errors import (
    ContainerNameConflictError,
    ContainerStartError,
    GpuciError,
    RuntimeUnavailableError,
)

DEFAULT_SOCKET = "/var/run/docker.sock"
DEFAULT_URL = f"unix://{DEFAULT_SOCKET}"

NO_GPU_RUNTIME = (
    "No GPU runtime: Docker could not give GPUs to the container. Install the NVIDIA "
    "Container Toolkit (nvidia-ctk runtime configure --runtime=docker, then restart Docker) "
    'or set agents.gpus = "none".'
)


class ContainerOperationError(GpuciError):
    """A stop/remove/inspect call was refused by the engine for a reason other than "gone"."""


@dataclass(frozen=True)
class Endpoint:
    """Where the Docker engine is expected, as the operator configured it."""

    url: str
    """The address as given (``unix:///var/run/docker.sock``, ``tcp://host:2376``, …)."""
    from_env: bool = False
    """True when the address came from ``DOCKER_HOST``."""

    @property
    def socket_path(self) -> str | None:
        """The Unix socket path, or None for a remote (tcp/ssh) engine."""
        if self.url.startswith("unix://"):
            return self.url[len("unix://") :] or DEFAULT_SOCKET
        if self.url.startswith("/"):
            return self.url
        return None

    def describe(self) -> str:
        """How to name the endpoint in a message."""
        where = self.socket_path or self.url
        return f"{where} (DOCKER_HOST)" if self.from_env else where


def resolve_endpoint(base_url: str | None) -> Endpoint:
    """The endpoint docker-py will use for ``base_url`` (else ``DOCKER_HOST``, else the socket)."""
    if base_url:
        return Endpoint(base_url)
    from_env = os.environ.get("DOCKER_HOST", "").strip()
    if from_env:
        return Endpoint(from_env, from_env=True)
    return Endpoint(DEFAULT_URL)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it wraps: ``__cause__``, ``__context__``, urllib3 ``reason``, args."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        linked: list[object] = [current.__cause__, current.__context__]
        linked.append(getattr(current, "reason", None))
        linked.extend(current.args)
        todo.extend(item for item in linked if isinstance(item, BaseException))


#: errno values of a process (or system) out of file descriptors.
_NOFILE = (errno.EMFILE, errno.ENFILE)


def is_engine_failure(exc: BaseException) -> bool:
    """Whether ``exc`` means the engine could not be talked to (as opposed to a refusal).

    An `APIError` is an answer from the engine, so it is never an engine failure.
    """
    if isinstance(exc, docker.errors.APIError):
        return False
    for cause in _causes(exc):
        if isinstance(cause, requests.exceptions.HTTPError):
            return False
        if isinstance(cause, OSError) and cause.errno in _NOFILE:
            return True  # out of file descriptors: no call can reach the engine for now
        if isinstance(
            cause,
            requests.exceptions.RequestException
            | urllib3.exceptions.HTTPError
            | ConnectionError
            | FileNotFoundError
            | PermissionError
            | TimeoutError
            | socket.gaierror,
        ):
            return True
    return False


def _connection_kind(exc: BaseException) -> str:
    """Classify a connection failure: missing, permission, refused, timeout, dns, tls, other."""
    kinds: list[str] = []
    for cause in _causes(exc):
        if isinstance(cause, FileNotFoundError):
            kinds.append("missing")
        elif isinstance(cause, PermissionError):
            kinds.append("permission")
        elif isinstance(cause, ConnectionRefusedError):
            kinds.append("refused")
        elif isinstance(cause, socket.gaierror | urllib3.exceptions.NameResolutionError):
            kinds.append("dns")
        elif isinstance(cause, ssl.SSLError | requests.exceptions.SSLError):
            kinds.append("tls")
        elif isinstance(cause, urllib3.exceptions.NewConnectionError):
            # A subclass of urllib3's ConnectTimeoutError, but it means "connect
            # failed" (refused, unreachable…); the OSError inside says which.
            continue
        elif isinstance(
            cause,
            TimeoutError | requests.exceptions.Timeout | urllib3.exceptions.TimeoutError,
        ):
            kinds.append("timeout")
    # The most specific finding wins: a "permission" deep in the chain explains a
    # generic timeout or connection error wrapped around it.
    for kind in ("missing", "permission", "refused", "dns", "tls", "timeout"):
        if kind in kinds:
            return kind
    return "other"


def _short_reason(exc: BaseException) -> str:
    """The innermost readable message of a chain, without urllib3's pool noise."""
    text = str(exc)
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        text = str(cause) or text
    return text.strip() or exc.__class__.__name__


def engine_unavailable(
    exc: BaseException, endpoint: Endpoint, timeout: float | None = None
) -> RuntimeUnavailableError:
    """A `RuntimeUnavailableError` that says why ``endpoint`` could not be used and what to do."""
    if isinstance(exc, RuntimeUnavailableError):
        return exc
    if any(isinstance(c, OSError) and c.errno in _NOFILE for c in _causes(exc)):
        return RuntimeUnavailableError(
            "Cannot reach the Docker engine: this process is out of file descriptors (too many "
            "open files). Raise its limit (LimitNOFILE= in the systemd unit) if this persists."
        )
    kind = _connection_kind(exc)
    path = endpoint.socket_path
    if path is not None:
        if kind == "missing":
            return RuntimeUnavailableError(
                f"Docker engine not reachable: {path} does not exist. "
                "Is Docker installed and running? (systemctl start docker)"
            )
        if kind == "permission":
            return RuntimeUnavailableError(
                f"Permission denied on {path}: add your user to the 'docker' group "
                "(sudo usermod -aG docker $USER, then log in again) or run as root"
            )
        if kind == "refused":
            return RuntimeUnavailableError(
                f"Docker engine not running: {path} exists but nothing answers on it. "
                "Start Docker (systemctl start docker) and check it with: systemctl status docker"
            )
    if kind == "timeout":
        within = f" within {timeout:g} s" if timeout else ""
        return RuntimeUnavailableError(
            f"Docker engine at {endpoint.describe()} did not answer{within}. It may be "
            "overloaded or hung: check `docker info` and `systemctl status docker`."
        )
    reasons = {
        "refused": "connection refused",
        "dns": "the host name could not be resolved",
        "tls": "the TLS handshake failed (check DOCKER_CERT_PATH and DOCKER_TLS_VERIFY)",
        "missing": "the socket does not exist",
        "permission": "permission denied",
    }
    reason = reasons.get(kind) or _short_reason(exc)
    advice = "Check that the engine runs there and that the address is right"
    if endpoint.from_env:
        advice += ", or unset DOCKER_HOST to use the local socket"
    return RuntimeUnavailableError(
        f"Docker engine at {endpoint.describe()} cannot be reached: {reason}. {advice}."
    )


def invalid_endpoint(exc: BaseException, endpoint: Endpoint) -> RuntimeUnavailableError:
    """docker-py rejected the address itself (e.g. a malformed ``DOCKER_HOST``)."""
    source = "DOCKER_HOST" if endpoint.from_env else "The Docker address"
    return RuntimeUnavailableError(
        f"{source} {endpoint.url!r} is not usable: {exc}. "
        f"Use e.g. {DEFAULT_URL} or tcp://HOST:2376."
    )


def api_explanation(exc: docker.errors.APIError) -> str:
    """Docker's own words for a refused request (its ``message`` field)."""
    explanation = exc.explanation
    if isinstance(explanation, bytes):
        explanation = explanation.decode("utf-8", "replace")
    text = str(explanation or "").strip()
    return text or str(exc)


def image_missing(image: str) -> ContainerStartError:
    """The image is not on this host when a container is made of it.

    The daemon's puller pulls a missing image before the start (``[agents] pull``,
    default ``missing``), so this is reached with ``pull = "never"``, or when a pull
    left nothing: the fix names both ways.
    """
    return ContainerStartError(
        f"Image {image} is not present locally. Pull or build it first: gpuci-tui image pull "
        f'or docker pull {image} (with [agents] pull = "never" gpuci-tui does not pull it)'
    )


_BIND_MISSING = re.compile(r"bind source path does not exist: (\S+)")
_NETWORK_MISSING = re.compile(r"network (\S+) not found")
_CUDA_REQUIREMENT = re.compile(r"unsatisfied condition: ([^,]+)")


def start_failure(
    exc: docker.errors.APIError, *, name: str, image: str, stage: str
) -> ContainerStartError:
    """Map the engine's refusal to create/start ``name`` to a plain `ContainerStartError`.

    Args:
        exc: What docker-py raised.
        name: The container's name.
        image: The image it was created from.
        stage: ``create``, ``copy`` (the token file) or ``start``.
    """
    explanation = api_explanation(exc)
    lowered = explanation.lower()
    if stage == "create" and exc.status_code == 409:
        return ContainerNameConflictError(
            f"Container name {name} is still in use (the slot's previous container is "
            f"being removed). It is retried automatically; if it stays, remove it: "
            f"docker rm -f {name}"
        )
    if "could not select device driver" in lowered:
        return ContainerStartError(NO_GPU_RUNTIME)
    if stage == "create" and (exc.status_code == 404 or "no such image" in lowered):
        return image_missing(image)
    if match := _BIND_MISSING.search(explanation):
        return ContainerStartError(
            f"Cannot create {name}: the host path {match.group(1)} of a volume does not exist. "
            "Create it or fix agents.volumes in the config."
        )
    if match := _NETWORK_MISSING.search(explanation):
        return ContainerStartError(
            f"Cannot create {name}: Docker network {match.group(1)} does not exist. Create it "
            '(docker network create NAME) or set agents.network = "host" or "bridge".'
        )
    if "requirement error" in lowered and (match := _CUDA_REQUIREMENT.search(explanation)):
        return ContainerStartError(
            f"Cannot start {name}: image {image} needs a newer NVIDIA driver "
            f"({match.group(1).strip()}). Use an image built for an older CUDA or update "
            "the driver (NVIDIA_DISABLE_REQUIRE=1 in the image skips the check at your risk)."
        )
    doing = {"create": "create", "copy": "copy the token file into", "start": "start"}
    return ContainerStartError(
        f"Docker could not {doing.get(stage, stage)} container {name}: {explanation}"
    )
