"""The ssh command line of a fleet channel, and plain words for why one ended.

ssh runs with its own options on top of the operator's configuration, which
stays in charge of keys, agent, user names, jump hosts and known hosts:

* ``BatchMode=yes``: a password or passphrase prompt would hang the console, so
  a key (or ssh-agent) is required and a refused login is reported instead;
* a private connection master (``ControlMaster=auto`` with ``ControlPath`` in a
  directory of this console and ``ControlPersist``), so the stream, the requests
  and the dashboard share one SSH connection per host instead of a handshake each;
* ``ConnectTimeout`` and ``ServerAliveInterval``/``ServerAliveCountMax``, so a
  host that goes away is noticed within seconds even when nothing is sent;
* no forwarding, no local command, no terminal, no escape character.

The destination always follows ``--``: it can never be read as an option.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.config.fleet_host import FleetHost

NO_DAEMON_EXIT = 3
"""The bridge's exit code when no daemon answers (`gpuci_tui.cli.exitcodes.NO_DAEMON`)."""
_NOISE = ("Warning: Permanently added", "Shared connection to", "mux_client_")


@dataclass(frozen=True)
class SshSettings:
    """How this console runs ssh (the same for every host)."""

    control_dir: Path | None
    """Private directory (0700) for the connection masters' sockets; None: no sharing."""
    ssh: str = "ssh"
    ssh_config: str | None = None
    """``ssh -F`` file instead of ``~/.ssh/config``."""
    connect_timeout: float = 10.0
    request_timeout: float = 10.0
    """Seconds a request may wait for its answer."""
    persist: int = 10
    """Seconds an unused connection master stays up (``ControlPersist``): short, so a
    master whose console was killed does not hold its remote sessions for long even
    if the console's janitor (`gpuci_tui.cli.fleet_janitor`) is gone too."""
    alive_interval: int = 5
    alive_count: int = 3
    readonly: bool = False
    """The console was started with ``--readonly``: each bridge refuses commands too.

    The console already refuses them; the bridge's refusal keeps that true for
    anything else that might speak on the channel (defence in depth).
    """


def ssh_options(settings: SshSettings) -> list[str]:
    """Ssh's options for a bridge channel (before the destination)."""
    options = ["-T", "-e", "none"]
    if settings.ssh_config is not None:
        options += ["-F", os.path.expanduser(settings.ssh_config)]
    for option in (
        "BatchMode=yes",
        f"ConnectTimeout={max(1, math.ceil(settings.connect_timeout))}",
        f"ServerAliveInterval={settings.alive_interval}",
        f"ServerAliveCountMax={settings.alive_count}",
        "ClearAllForwardings=yes",
        "ForwardAgent=no",
        "ForwardX11=no",
        "PermitLocalCommand=no",
    ):
        options += ["-o", option]
    if settings.control_dir is not None:
        options += [
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={settings.control_dir / '%C'}",
            "-o", f"ControlPersist={settings.persist}",
        ]  # fmt: skip
    return options


def destination(host: FleetHost) -> list[str]:
    """``-l USER -p PORT -- HOST``: the destination can never be taken for an option."""
    args = ["-l", host.user] if host.user else []
    if host.port is not None:
        args += ["-p", str(host.port)]
    return [*args, "--", host.hostname]


def _remote_word(word: str) -> str:
    # "~/x" must reach the remote shell unquoted to be expanded there.
    if word.startswith("~/"):
        return "~/" + shlex.quote(word[2:])
    return shlex.quote(word)


def remote_command(host: FleetHost, command: str, *, readonly: bool = False) -> str:
    """The host's shell's command line: ``exec gpuci-tui bridge [--config PATH] [--readonly]``."""
    words = [_remote_word(command), "bridge"]
    if host.config is not None:
        words += ["--config", _remote_word(host.config)]
    if readonly:
        words.append("--readonly")
    return "exec " + " ".join(words)


def bridge_argv(host: FleetHost, command: str, settings: SshSettings) -> list[str]:
    """The whole ``ssh … gpuci-tui bridge`` command line for ``host``."""
    remote = remote_command(host, command, readonly=settings.readonly)
    return [settings.ssh, *ssh_options(settings), *destination(host), remote]


SSH_ENDED = "ssh ended without saying why (exit 255)"
"""A channel whose ssh exited 255 without a word: its session was lost (the host or its SSH
server went away) or its shared connection failed. Not a cause: the next attempt says why."""
DAEMON_CLOSED = "the daemon closed the connection (it stopped or restarted)"
"""A channel the daemon's side ended without a word. Not a cause either: the next attempt
finds the daemon back, or says that none runs."""
WITHOUT_CAUSE = (SSH_ENDED, DAEMON_CLOSED)
"""How a channel that ended may read when nothing says why."""
LOCAL_KILLED = "the local ssh client was killed"
BRIDGE_CRASHED = "the bridge crashed on the host"
LOGIN_REFUSED = "login refused"
NO_DAEMON = "no gpuci-tui daemon is running"
_SAID_IN_FULL = (LOCAL_KILLED, BRIDGE_CRASHED, LOGIN_REFUSED, NO_DAEMON)
"""Reasons that say what failed themselves: the host was reached (or may well be up)."""


def down_reason(problem: str) -> str:
    """What an operator reads for a host that is down: what failed, from ``problem``.

    A host is "unreachable" only when ssh could not reach it; a refused login, a
    host without a daemon, a crashed bridge or a local ssh that was killed each
    say so instead (`explain_exit` words them).
    """
    if problem.startswith(_SAID_IN_FULL):
        return problem
    if "Permission denied" in problem:
        return f"{LOGIN_REFUSED}: {problem}"
    return f"unreachable: {problem}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def explain_exit(code: int | None, stderr: str, command: str) -> str:
    """Plain words for a channel that ended: ssh's, the shell's or the bridge's reason."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(_NOISE)]
    last = lines[-1] if lines else ""
    if code is not None and code < 0:
        # The ssh process on this machine ended by a signal: nothing is known of the host.
        return (
            f"{LOCAL_KILLED} ({_signal_name(-code)}); the host itself may well be up, "
            "it is tried again"
        )
    if code not in (0, 255, None) and "Traceback (most recent call last)" in stderr:
        return f"{BRIDGE_CRASHED} (exit {code}): {last}"
    if code == 255:
        if "Permission denied" in last:
            return (
                f"{last}: ssh runs with BatchMode=yes and never asks for a password; "
                "use a key or ssh-agent"
            )
        if "Host key verification failed" in last:
            return f"{last} Connect once with plain ssh to check and accept the host key."
        return last or SSH_ENDED
    if code == 127:
        return (
            f"{command} was not found on the host ({last or 'exit 127'}): install gpuci-tui "
            'there, or set command = "/path/to/gpuci-tui" in [fleet]'
        )
    if code == NO_DAEMON_EXIT and last:
        return last.removeprefix("gpuci-tui: ")
    if code == 0 or code is None:
        return last or DAEMON_CLOSED
    return f"the bridge exited with code {code}: {last}" if last else f"the bridge exited ({code})"
