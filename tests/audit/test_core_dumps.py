"""A process that holds the PAT leaves no core dump and cannot be attached to."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import Rig, make_rig, wait_for


def test_forbid_core_dumps_sets_no_core_size_and_not_dumpable() -> None:
    code = (
        "import resource\n"
        "from gpuci_tui.core.secrets.no_core_dumps import dumpable, forbid_core_dumps\n"
        "assert dumpable() is True\n"
        "assert forbid_core_dumps()\n"
        "print(resource.getrlimit(resource.RLIMIT_CORE), dumpable())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "(0, 0) False"


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1)


@pytest.mark.daemon
@pytest.mark.docker
def test_the_running_daemon_has_no_core_size(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(lambda: rig.snap(), 30, "the daemon answering")
    (proc,) = rig.procs
    limits = Path(f"/proc/{proc.pid}/limits").read_text()
    core = next(line for line in limits.splitlines() if line.startswith("Max core file size"))
    assert core.split()[4:6] == ["0", "0"], core
