"""Fleet test fixtures: the console tests' pinned time zone, and the agent emulator image."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ui.conftest import _utc  # noqa: F401 - autouse: times render in local time


@pytest.fixture(scope="session")
def emulator_image(docker_client: Any) -> str:
    """The agent emulator image (busybox + the simulated agent), built locally."""
    from gpuci_tui.sim.image import build_emulator_image

    return build_emulator_image(docker_client)
