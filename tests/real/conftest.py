"""Fixtures of the real-engine tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuci_tui.core.docker.runtime import DockerRuntime


@pytest.fixture(scope="session")
def emulator_image(docker_client: Any) -> str:
    """The emulator agent image, built (or found) once per session."""
    from gpuci_tui.sim.image import build_emulator_image

    return build_emulator_image(docker_client)


@pytest.fixture
def runtime(docker_client: Any) -> Iterator[DockerRuntime]:
    rt = DockerRuntime(docker_client)
    yield rt
    rt.close()
