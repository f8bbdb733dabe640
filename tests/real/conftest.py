"""Fixtures of the real-engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuci_tui.core.docker.runtime import DockerRuntime


@pytest.fixture
def runtime(docker_client: Any) -> Iterator[DockerRuntime]:
    rt = DockerRuntime(docker_client)
    yield rt
    rt.close()
