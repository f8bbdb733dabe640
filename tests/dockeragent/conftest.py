"""The ``agent`` fixture of the start.sh tests: a stub agent tree around dockeragent/start.sh."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dockeragent.start_sh_harness import Agent


@pytest.fixture
def agent() -> Iterator[Agent]:
    # Not pytest's tmp_path: its parents are 0700, closed to the run-as user.
    root = Path(tempfile.mkdtemp(prefix="gpuci-start-sh-"))
    a = Agent(root)
    try:
        yield a
    finally:
        a.cleanup()
        shutil.rmtree(root, ignore_errors=True)
