"""Fixtures of the fault drills (issue 5 §1): the real daemon, Docker engine and emulator image.

Every drill runs `gpuci-tui run` as a real process (tests/real/rig.py) and
checks the three promises of the issue: no job is abandoned or canceled
because of the manager, a slot never has two live containers, and the slots
are filled again afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.real.rig import build_broken_image


@pytest.fixture(scope="session")
def emulator_image(docker_client: Any) -> str:
    """The busybox Azure Pipelines agent emulator (built locally; no registry here)."""
    from gpuci_tui.sim.image import build_emulator_image

    return build_emulator_image(docker_client)


@pytest.fixture(scope="session")
def broken_image(docker_client: Any, busybox_image: str) -> str:
    """An image whose container exits 1 at once."""
    return build_broken_image(docker_client, busybox_image)
