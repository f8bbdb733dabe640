"""The real ``gpuci-tui --host … --host …`` in a real terminal (tmux), over a real sshd, to real
daemons: overview, fleet-wide drain, drill-down, a host that dies and returns, quit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fleet.sshlab import GPUCI, control_dir_of, ssh_lab, ssh_of
from tests.real.rig import wait_for
from tests.real.test_tmux_demo import BINARY, Tmux

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.tmux, pytest.mark.sshd]


def test_fleet_console_over_ssh_in_a_terminal(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    assert BINARY.exists(), f"console script missing: {BINARY}"
    with ssh_lab(tmp_path, docker_client, emulator_image) as lab:
        a = lab.add_host("gpu-a", tmp_path, count=1)
        b = lab.add_host("gpu-b", tmp_path, count=1)
        a.start_daemon()
        b.start_daemon()
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(
            f'[fleet]\ncommand = "{GPUCI}"\nssh_config = "{lab.ssh_config}"\nconnect_timeout = 5\n'
        )
        marker = tmp_path / "exit-code"
        tmux = Tmux(
            # COLUMNS/LINES from the test process would override the pane size.
            f"env -u COLUMNS -u LINES TERM=xterm-256color {BINARY} --config {fleet} --host {a.target} --host {b.target}; "
            f"echo $? > {marker}; sleep 5",
            width=120,
            height=30,
        )
        try:
            tmux.wait(lambda s: "2/2 hosts up" in s, 60, "both hosts up")
            control = wait_for(lambda: control_dir_of(tmux), 20, "the console's ssh directory")
            tmux.wait(lambda s: "0 busy · 2 idle" in s, 90, "both agents online")
            screen = tmux.screen()
            assert f":{a.port}" in screen and f":{b.port}" in screen  # labels keep the ports

            tmux.keys("D")
            tmux.wait(lambda s: "Drain on 2 hosts?" in s, 20, "fleet drain confirmation")
            screen = tmux.screen()
            assert screen.count("1 idle agent stops now") == 2
            tmux.keys("y")
            wait_for(lambda: a.states() == ["drained"] and b.states() == ["drained"], 60,
                     "both hosts drained")  # fmt: skip
            tmux.wait(lambda s: "0 busy · 0 idle" in s, 30, "the overview shows it")

            tmux.keys("Enter")  # the top row's host
            tmux.wait(lambda s: "back to the fleet" in s and "drained" in s, 30, "a dashboard")
            tmux.keys("q")
            tmux.wait(lambda s: "back to the fleet" not in s and "hosts up" in s, 20, "overview")

            b.kill_daemon()
            tmux.wait(
                lambda s: "1/2 hosts up" in s and "no gpuci-tui daemon" in s,
                30,
                "gpu-b unreachable",
            )
            tmux.keys("U")
            tmux.wait(lambda s: "Resume on 1 host?" in s, 20, "fleet resume confirmation")
            assert "unreachable (no gpuci-tui daemon is running on" in tmux.screen()
            tmux.keys("y")
            wait_for(lambda: a.states() == ["idle"], 60, "gpu-a resumed while gpu-b is down")

            b.start_daemon()
            tmux.wait(lambda s: "2/2 hosts up" in s, 60, "gpu-b back")

            tmux.keys("q")
            tmux.wait(lambda s: "Quit the fleet console?" in s, 20, "quit confirmation")
            tmux.keys("y")
            # The shell creates the file before it writes the code: wait for the code itself.
            code = wait_for(
                lambda: marker.exists() and marker.read_text().strip(),
                20,
                "the console's exit code",
            )
            assert code == "0", tmux.screen()
            wait_for(lambda: not ssh_of(control), 10, "the connection masters to close")
            assert b.states() == ["drained"], "quitting changes nothing on any host"
        finally:
            tmux.kill()  # the lab then kills the sshds, which ends any master left behind


def test_a_closed_terminal_ends_the_console_and_its_ssh_directory() -> None:
    """SIGHUP (the operator's SSH session dropped) must not leave connection state behind."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    tmux = Tmux(f"env -u COLUMNS -u LINES {BINARY} --host nobody@127.0.0.1:1", 100, 30)
    try:
        tmux.wait(lambda s: "0/1 hosts up" in s and "✗ down" in s, 20, "the host down")
        control = wait_for(lambda: control_dir_of(tmux), 20, "the console's ssh directory")
        assert oct(control.stat().st_mode & 0o777) == "0o700", "a private directory"
    finally:
        tmux.kill()  # SIGHUP to the console
    # The console closes its connections for at most 5 s; a loaded CI machine adds to that.
    wait_for(lambda: not control.exists(), 30, "the directory to go")
