"""A real ``gpuci-tui run`` process whose file is broken after it started stays reachable.

Issue 28: with ``count = "three"`` saved in the file, ``status``, ``drain --all``
and ``stop`` printed the config error and exited 4, so a healthy daemon could be
neither watched nor stopped. Now each finds the daemon by the link named after the
file, names the file's error (key and fix) beside when the daemon loaded what it
runs on, and does its work; ``reload`` still changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

NAMED = 'agents.count: must be a whole number from 1 to 64, got "three"'
RUNS_ON = "the daemon runs on the configuration it loaded at "


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=2)


def test_status_drain_and_stop_work_under_a_broken_file_and_name_its_error(rig: Rig) -> None:
    daemon = rig.start_daemon()
    wait_for(rig.all_idle, what="two idle agents")
    text = rig.config_path.read_text()
    rig.config_path.write_text(text.replace("count = 2", 'count = "three"'))

    out = rig.cli("status")
    assert out.returncode == 0, out.stderr
    assert NAMED in out.stderr and RUNS_ON in out.stderr
    assert f"{rig.config.agents.name_prefix}-1" in out.stdout

    out = rig.cli("status", "--json")
    assert out.returncode == 0, out.stderr
    assert any(NAMED in w for w in json.loads(out.stdout)["warnings"])

    out = rig.cli("reload")
    assert out.returncode == 4
    assert NAMED in out.stderr and "nothing was reloaded" in out.stderr

    out = rig.cli("drain", "--all")
    assert out.returncode == 0, out.stderr
    assert NAMED in out.stderr and RUNS_ON in out.stderr
    wait_for(lambda: rig.states() == ["drained", "drained"], what="both slots drained")
    wait_for(lambda: not rig.containers(), what="the drained agents' containers gone")

    out = rig.cli("stop")
    assert out.returncode == 0, out.stderr
    assert NAMED in out.stderr and "supervisor stopping" in out.stdout
    assert daemon.wait(20) == 0, rig.daemon_log()
