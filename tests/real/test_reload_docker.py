"""``gpuci-tui reload`` and SIGHUP on a real ``gpuci-tui run`` process, on the real Docker engine.

Only changes that call no roll-out here (a value that needs a restart, a bad
file): the roll-out inside a group has its own tests. What is checked is the
real process's path: the CLI's dry run, the signal, the log, and that nothing
the daemon runs is touched.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1)


def test_sighup_and_reload_name_a_restart_and_a_bad_file_changes_nothing(rig: Rig) -> None:
    daemon = rig.start_daemon()
    wait_for(rig.all_idle, what="an idle agent")
    before = rig.container_ids()
    text = rig.config_path.read_text()
    assert "[history]" not in text
    rig.config_path.write_text(text + "\n[history]\nkeep_days = 7\n")

    out = rig.cli("reload", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "history.keep_days: 90 -> 7: a restart is needed (the history is opened" in out.stdout

    daemon.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload on SIGHUP" in rig.daemon_log(), what="the reload in the log")
    assert "history.keep_days: 90 -> 7: a restart is needed" in rig.daemon_log()

    rig.config_path.write_text(text.replace("count = 1", "count = 0"))
    daemon.send_signal(signal.SIGHUP)
    wait_for(
        lambda: "the file has problems, nothing changed" in rig.daemon_log(),
        what="the bad file in the log",
    )
    out = rig.cli("reload")
    assert out.returncode == 4
    assert "nothing was reloaded: the daemon runs on the configuration it loaded" in out.stderr
    assert daemon.poll() is None, rig.daemon_log()
    assert rig.container_ids() == before and rig.all_idle()
