"""A fleet console killed outright (SIGKILL: no cleanup of its own) leaves nothing behind.

The real ``gpuci-tui --host …`` in tmux, over a real sshd to a real daemon:
once it is killed, its janitor closes the connection masters (which ends their
remote sessions), every bridge on the host ends, and the console's private
ssh directory goes, all within 5 s.
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.fleet.sshlab import GPUCI, Host, control_dir_of, ssh_lab, ssh_of
from tests.real.rig import wait_for
from tests.real.test_tmux_demo import BINARY, Tmux

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.tmux, pytest.mark.sshd]


def console_of(config: Path) -> psutil.Process | None:
    """The console process started with ``--config config`` (not the shell around it)."""
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(str(BINARY) in w for w in cmdline[:2]) and str(config) in cmdline:
            return proc
    return None


def bridges_on(host: Host) -> list[list[str]]:
    """``gpuci-tui bridge`` processes under the host's sshd (its sessions)."""
    assert host.sshd is not None
    found = []
    for proc in psutil.Process(host.sshd.pid).children(recursive=True):
        try:
            cmdline = proc.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "bridge" in cmdline:
            found.append(cmdline)
    return found


def test_a_killed_console_leaves_no_bridge_master_or_directory(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    with ssh_lab(tmp_path, docker_client, emulator_image) as lab:
        a = lab.add_host("gpu-a", tmp_path, count=1)
        a.start_daemon()
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(
            f'[fleet]\ncommand = "{GPUCI}"\nssh_config = "{lab.ssh_config}"\nconnect_timeout = 5\n'
        )
        tmux = Tmux(
            f"env -u COLUMNS -u LINES TERM=xterm-256color {BINARY} --config {fleet} "
            f"--host {a.target}; sleep 30",
            width=100,
            height=30,
        )
        try:
            tmux.wait(lambda s: "1/1 hosts up" in s, 60, "the host up")
            control = wait_for(lambda: control_dir_of(tmux), 20, "the console's ssh directory")
            # The stream and the request channel: two bridges, one master.
            wait_for(lambda: len(bridges_on(a)) >= 1, 20, "a bridge on the host")
            assert ssh_of(control), "no ssh process of this console"
            console = console_of(fleet)
            assert console is not None, "the console process was not found"

            console.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            console.wait(5)
            wait_for(
                lambda: not bridges_on(a) and not ssh_of(control) and not control.exists(),
                5,
                "bridges, ssh masters and the ssh directory gone",
            )
            took = time.monotonic() - killed_at
            assert took < 5, took
            assert a.status() is not None, "the daemon is untouched: it still answers"
        finally:
            tmux.kill()
