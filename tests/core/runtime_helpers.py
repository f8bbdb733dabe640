"""Helpers shared by the runtime_unit tests."""

from __future__ import annotations

from typing import Any

import docker
import docker.errors
import requests
import urllib3.exceptions

from gpuci_tui.core.docker.errors import (
    Endpoint,
)
from gpuci_tui.core.protocols import (
    ContainerSpec,
)
from tests.waiting import wait_until  # noqa: F401 - its tests import it from here

TOKEN = "patUNIT0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
SOCKET = Endpoint("unix:///var/run/docker.sock")


def docker_py_failure(cause: BaseException) -> docker.errors.DockerException:
    """The exception chain docker-py 7.2 raises when creating a client fails to connect."""
    try:
        try:
            raise cause
        except OSError as os_error:
            raise requests.exceptions.ConnectionError(
                urllib3.exceptions.ProtocolError("Connection aborted.", os_error)
            ) from os_error
    except requests.exceptions.ConnectionError as conn_error:
        try:
            raise docker.errors.DockerException(
                f"Error while fetching server API version: {conn_error}"
            ) from conn_error
        except docker.errors.DockerException as final:
            return final
    raise AssertionError("unreachable")


def api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(f"{status} Server Error", response, explanation=explanation)


def spec(**overrides: Any) -> ContainerSpec:
    values: dict[str, Any] = {
        "name": "gpu-agent-1",
        "image": "example/agent:1",
        "labels": {"io.gpuci-tui.slot": "1"},
        "environment": {"AZP_TOKEN_FILE": "/run/azp/token"},
        "network": "host",
    }
    values.update(overrides)
    return ContainerSpec(**values)
