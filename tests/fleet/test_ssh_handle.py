"""`SshHandle` without sshd: its ssh command line, its error words, and its behaviour through the
real bridge behind a stand-in ``ssh`` (a script that runs the remote command locally).

The same handle against a real sshd and real daemons: test_fleet_ssh.py.
"""

from __future__ import annotations

import asyncio
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from gpuci_tui.core.command_types import Drain, Resume
from gpuci_tui.core.config.fleet_host import parse_target, validate_host_entry
from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import instance_id
from gpuci_tui.core.fleet.ssh_command import (
    SshSettings,
    bridge_argv,
    down_reason,
    explain_exit,
    remote_command,
)
from gpuci_tui.core.fleet.ssh_handle import SshHandle
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.models import SupervisorSnapshot
from tests.fleet.fakes import healthy_snapshot
from tests.fleet.protocol_daemon import ProtocolDaemon
from tests.ui.scenarios import sample_config

GPUCI = str(Path(sys.executable).parent / "gpuci-tui")

FAKE_SSH = """#!/bin/sh
# Stand-in for ssh: skip the options up to "--" and the host, run the remote command here.
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; break; fi
  shift
done
shift
[ $# -eq 0 ] && exit 0
exec sh -c "$1"
"""


def test_the_ssh_command_line() -> None:
    host = validate_host_entry(
        {"host": "ci@gpu2:2222", "config": "~/cfg/gpu 2.toml"}, "fleet.hosts[0]"
    )
    settings = SshSettings(control_dir=Path("/tmp/gpuci-ssh-x"), ssh_config="/etc/fleet_ssh")
    assert bridge_argv(host, "~/.local/bin/gpuci-tui", settings) == [
        "ssh", "-T", "-e", "none", "-F", "/etc/fleet_ssh",
        "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
        "-o", "ClearAllForwardings=yes", "-o", "ForwardAgent=no", "-o", "ForwardX11=no",
        "-o", "PermitLocalCommand=no",
        "-o", "ControlMaster=auto", "-o", "ControlPath=/tmp/gpuci-ssh-x/%C",
        "-o", "ControlPersist=10",
        "-l", "ci", "-p", "2222", "--", "gpu2",
        "exec ~/.local/bin/gpuci-tui bridge --config ~/'cfg/gpu 2.toml'",
    ]  # fmt: skip


def test_without_sharing_or_user_or_port_nothing_extra_is_passed() -> None:
    argv = bridge_argv(parse_target("gpu3", "x"), "gpuci-tui", SshSettings(control_dir=None))
    assert not any("Control" in word for word in argv)
    assert argv[-3:] == ["--", "gpu3", "exec gpuci-tui bridge"]
    assert "-l" not in argv and "-p" not in argv and "-F" not in argv


def test_a_readonly_console_asks_each_bridge_to_refuse_commands_too() -> None:
    settings = SshSettings(control_dir=None, readonly=True)
    argv = bridge_argv(parse_target("gpu3", "x"), "gpuci-tui", settings)
    assert argv[-1] == "exec gpuci-tui bridge --readonly"
    host = validate_host_entry({"host": "gpu2", "config": "/etc/g.toml"}, "x")
    assert remote_command(host, "gpuci-tui", readonly=True) == (
        "exec gpuci-tui bridge --config /etc/g.toml --readonly"
    )


def test_remote_words_are_quoted_for_the_remote_shell() -> None:
    host = validate_host_entry({"host": "gpu2", "config": "/etc/g;rm -rf ~.toml"}, "x")
    assert remote_command(host, "/opt/my tools/gpuci-tui") == (
        "exec '/opt/my tools/gpuci-tui' bridge --config '/etc/g;rm -rf ~.toml'"
    )


@pytest.mark.parametrize(
    ("code", "stderr", "expected"),
    [
        (255, "ssh: connect to host gpu2 port 22: Connection refused\n",
         "ssh: connect to host gpu2 port 22: Connection refused"),
        (255, "Warning: Permanently added 'gpu2' (ED25519) to the list of known hosts.\n"
              "ci@gpu2: Permission denied (publickey,password).\n",
         "ci@gpu2: Permission denied (publickey,password).: ssh runs with BatchMode=yes and "
         "never asks for a password; use a key or ssh-agent"),
        (255, "Host key verification failed.\n",
         "Host key verification failed. Connect once with plain ssh to check and accept the "
         "host key."),
        (255, "", "ssh ended without saying why (exit 255)"),
        (255, "Shared connection to gpu3 closed.\n", "ssh ended without saying why (exit 255)"),
        (127, "sh: 1: exec: gpuci-tui: not found\n",
         "gpuci-tui was not found on the host (sh: 1: exec: gpuci-tui: not found): install "
         'gpuci-tui there, or set command = "/path/to/gpuci-tui" in [fleet]'),
        (3, "gpuci-tui: no gpuci-tui daemon is running on this host (no socket at /run/x.sock); "
            "start one there with: gpuci-tui run\n",
         "no gpuci-tui daemon is running on this host (no socket at /run/x.sock); start one "
         "there with: gpuci-tui run"),
        (0, "", "the daemon closed the connection (it stopped or restarted)"),
        (4, "gpuci-tui: /etc/g.toml: agents.count: must be …\n",
         "the bridge exited with code 4: gpuci-tui: /etc/g.toml: agents.count: must be …"),
        (-9, "", "the local ssh client was killed (SIGKILL); the host itself may well be up, "
                 "it is tried again"),
        (1, "Traceback (most recent call last):\n  File \"x\", line 1\nRuntimeError: boom\n",
         "the bridge crashed on the host (exit 1): RuntimeError: boom"),
    ],
)  # fmt: skip
def test_why_a_channel_ended_in_plain_words(code: int, stderr: str, expected: str) -> None:
    assert explain_exit(code, stderr, "gpuci-tui") == expected


@pytest.mark.parametrize(
    ("problem", "shown"),
    [
        ("ssh: connect to host gpu2 port 22: Connection refused",
         "unreachable: ssh: connect to host gpu2 port 22: Connection refused"),
        ("ci@gpu2: Permission denied (publickey).: ssh runs with BatchMode=yes",
         "login refused: ci@gpu2: Permission denied (publickey).: ssh runs with BatchMode=yes"),
        ("the local ssh client was killed (SIGKILL); the host itself may well be up",
         "the local ssh client was killed (SIGKILL); the host itself may well be up"),
        ("the bridge crashed on the host (exit 1): RuntimeError: boom",
         "the bridge crashed on the host (exit 1): RuntimeError: boom"),
        ("no gpuci-tui daemon is running on this host (no socket at /x)",
         "no gpuci-tui daemon is running on this host (no socket at /x)"),
    ],
)  # fmt: skip
def test_a_down_host_names_what_failed(problem: str, shown: str) -> None:
    assert down_reason(problem) == shown


# --------------------------------------------------------------------------- through the bridge


@pytest.fixture
def fake_ssh(tmp_path: Path) -> str:
    path = tmp_path / "ssh"
    path.write_text(FAKE_SSH)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[ProtocolDaemon, Path]]:
    """A stand-in daemon at the socket of a saved configuration."""
    config = sample_config()
    path = tmp_path / "host.toml"
    save_config(config, path)
    server = ProtocolDaemon(socket_path(instance_id(config)), healthy_snapshot())
    await server.start()
    yield server, path
    await server.stop()


def handle_for(config: Path, ssh: str, command: str = GPUCI, timeout: float = 10.0) -> SshHandle:
    host = validate_host_entry({"host": "ci@gpu3", "config": str(config)}, "x")
    settings = SshSettings(control_dir=None, ssh=ssh, connect_timeout=timeout,
                           request_timeout=timeout)  # fmt: skip
    return SshHandle(host, command, settings)


async def test_requests_and_updates_pass_through_the_bridge(
    daemon: tuple[ProtocolDaemon, Path], fake_ssh: str
) -> None:
    server, config = daemon
    handle = handle_for(config, fake_ssh)
    try:
        snapshot = await handle.snapshot()
        assert snapshot == healthy_snapshot()
        assert handle.info["pid"] == 4242
        preview = await handle.preview(Drain(slots=None))
        assert [e.effect for e in preview.effects] == ["after_job", "after_job", "stop_now",
                                                       "stop_now"]  # fmt: skip
        result = await handle.send(Drain(slots=None))
        assert (result.ok, result.message, result.affected) == (True, "drain: done", (0, 1))
        stream = handle.updates()
        first = await anext(stream)
        assert isinstance(first, SupervisorSnapshot) and first.pid == 4321
        await server.publish(healthy_snapshot(paused=True))
        second = await asyncio.wait_for(anext(stream), 10)
        assert isinstance(second, SupervisorSnapshot) and second.paused
        await stream.aclose()
    finally:
        await handle.close()
    # One persistent channel carried the requests: one hello for it, one for the stream,
    # each after the bridge's own (it checks that a gpuci-tui daemon answers first).
    ops = [r["op"] for r in server.requests]
    assert ops == ["hello", "hello", "status", "preview", "hello", "command",
                   "hello", "hello", "subscribe"]  # fmt: skip


async def test_a_daemon_that_goes_away_ends_the_stream_with_the_reason(
    daemon: tuple[ProtocolDaemon, Path], fake_ssh: str
) -> None:
    server, config = daemon
    handle = handle_for(config, fake_ssh)
    stream = handle.updates()
    try:
        await anext(stream)
        await server.stop()
        with pytest.raises(ControlError, match=r"the daemon closed the connection"):
            await asyncio.wait_for(anext(stream), 10)
        with pytest.raises(ControlError, match=r"no gpuci-tui daemon is running on this host"):
            await handle.snapshot()
    finally:
        await handle.close()


async def test_a_command_is_never_sent_twice_and_reads_are_retried(
    daemon: tuple[ProtocolDaemon, Path], fake_ssh: str
) -> None:
    server, config = daemon
    handle = handle_for(config, fake_ssh)
    try:
        await handle.snapshot()
        server.hang_up_after_answer = True  # every channel dies after one answer
        assert (await handle.snapshot()).pid == 4321  # dead channel: read again on a new one
        assert (await handle.send(Resume(slots=None))).ok
        assert len(server.commands) == 1
    finally:
        await handle.close()


async def test_a_host_that_never_answers_times_out_instead_of_hanging(
    tmp_path: Path, fake_ssh: str
) -> None:
    hang = tmp_path / "gpuci-tui"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    handle = handle_for(tmp_path / "none.toml", fake_ssh, command=str(hang), timeout=0.3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ControlError, match=r"no answer from the host within 1 s"):
        await handle.snapshot()
    with pytest.raises(ControlError, match=r"no answer from the host within 1 s"):
        await anext(handle.updates())
    assert loop.time() - started < 8
    await handle.close()
    leftovers = [p.cmdline() for p in psutil.Process().children(recursive=True)]
    assert leftovers == [], "the timed-out channels' processes were left running"


async def test_a_missing_program_is_named(tmp_path: Path, fake_ssh: str) -> None:
    handle = handle_for(tmp_path / "none.toml", fake_ssh, command="/nonexistent/gpuci-tui")
    with pytest.raises(ControlError, match=r"/nonexistent/gpuci-tui was not found on the host"):
        await handle.snapshot()
    await handle.close()


async def test_ssh_that_cannot_run_is_reported(tmp_path: Path) -> None:
    handle = handle_for(tmp_path / "none.toml", str(tmp_path / "no-ssh-here"))
    with pytest.raises(ControlError, match=r"cannot run .*no-ssh-here"):
        await handle.snapshot()


async def test_a_killed_local_ssh_is_not_reported_as_an_unreachable_host(
    daemon: tuple[ProtocolDaemon, Path], fake_ssh: str
) -> None:
    """The ssh process of a stream dies by a signal here: the host was fine."""
    _, config = daemon
    handle = handle_for(config, fake_ssh)
    stream = handle.updates()
    try:
        await asyncio.wait_for(anext(stream), 10)
        (channel,) = handle._streams  # noqa: SLF001 - the stream's own ssh process
        channel.process.kill()
        with pytest.raises(ControlError) as caught:
            await asyncio.wait_for(anext(stream), 10)
    finally:
        await stream.aclose()
        await handle.close()
    assert str(caught.value).startswith("the local ssh client was killed (SIGKILL)")
    assert down_reason(str(caught.value)) == str(caught.value), "not 'unreachable'"
