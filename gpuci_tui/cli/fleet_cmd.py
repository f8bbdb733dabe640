"""``gpuci-tui --host …`` (or ``[fleet] hosts``): one console over the daemons of several hosts.

Each host is reached with the operator's own ``ssh`` running ``gpuci-tui
bridge`` there (see `gpuci_tui.core.fleet.ssh_handle`): no port is opened and
nothing new listens. The connection masters live in a private directory made
for this console and are closed when it exits, or by its janitor
(`fleet_janitor`) when it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gpuci_tui.core.config.file import ConfigError, read_toml
from gpuci_tui.core.config.fleet import FleetConfig, load_fleet, parse_cli_hosts
from gpuci_tui.core.config.paths import SHORT_SOCKET_BASE
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.fleet.link import Fleet, FleetMember, RemoteGpus
from gpuci_tui.core.fleet.ssh_command import SshSettings
from gpuci_tui.core.fleet.ssh_handle import SshHandle

from . import exitcodes
from .common import CliExit, config_path, fail

#: Seconds a console whose terminal hung up has to end cleanly before it is ended.
HANGUP_GRACE = 10.0


def start_janitor(control_dir: Path, ssh: str = "ssh") -> subprocess.Popen[bytes] | None:
    """The process that closes ``control_dir``'s masters once this console is gone.

    Its standard input is a pipe whose only writer is this process: when the
    console ends in any way (SIGKILL included) the pipe closes and the janitor
    cleans up. Own session: the terminal's signals do not reach it. None when it
    cannot start (the console still cleans up after itself when it can).
    """
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "gpuci_tui.cli.fleet_janitor", str(control_dir), ssh],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def stop_janitor(janitor: subprocess.Popen[bytes] | None) -> None:
    """Close the janitor's pipe (its signal to clean up) and reap it, briefly."""
    if janitor is None:
        return
    if janitor.stdin is not None:
        with contextlib.suppress(OSError):
            janitor.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        janitor.wait(5.0)


def fleet_requested(args: argparse.Namespace) -> bool:
    """Whether the console is the fleet's: ``--host`` given, or hosts listed in ``[fleet]``."""
    if args.host:
        return True
    if args.command == "setup":
        return False
    try:
        tables = read_toml(config_path(args))
    except GpuciError:
        return False  # the ordinary console reports a missing or broken file
    fleet = tables.get("fleet")
    return isinstance(fleet, dict) and bool(fleet.get("hosts"))


def fleet_config(args: argparse.Namespace) -> tuple[FleetConfig, dict[str, str], Path]:
    """``[fleet]`` and ``[keys]`` of the configuration, with ``--host`` replacing the hosts.

    Raises:
        CliExit: a bad ``--host`` (code 2) or configuration (code 4), or no host at all.
    """
    try:
        path = config_path(args)
        fleet, keys = load_fleet(path) if path.exists() else (FleetConfig(), {})
    except GpuciError as exc:
        raise CliExit(exitcodes.CONFIG, str(exc)) from None
    if args.host:
        try:
            fleet = dataclasses.replace(fleet, hosts=parse_cli_hosts(args.host))
        except ConfigError as exc:
            raise CliExit(exitcodes.USAGE, str(exc)) from None
    if not fleet.hosts:
        raise CliExit(exitcodes.USAGE, "no host to watch: give --host USER@HOST or [fleet] hosts")
    if fleet.ssh_config is not None and not Path(fleet.ssh_config).expanduser().is_file():
        raise CliExit(
            exitcodes.CONFIG,
            f"{path}: fleet.ssh_config: {fleet.ssh_config} is not a file; give an ssh "
            "configuration file (ssh -F), or leave ssh_config out to use ~/.ssh/config",
        )
    return fleet, keys, path


def members(fleet: FleetConfig, settings: SshSettings) -> tuple[FleetMember, ...]:
    """One `SshHandle` per host, labelled."""
    return tuple(
        FleetMember(label, host, SshHandle(host, fleet.command_of(host), settings))
        for host, label in zip(fleet.hosts, fleet.labels(), strict=True)
    )


def run_fleet_console(args: argparse.Namespace) -> int:
    """Open the fleet console; close every ssh connection it made on the way out."""
    from gpuci_tui.app import make_app
    from gpuci_tui.services import Services

    if args.foreground:
        return fail(CliExit(exitcodes.USAGE, "--foreground does not apply to the fleet console"))
    try:
        fleet, keys, path = fleet_config(args)
    except CliExit as exc:
        return fail(exc)
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print(
            "gpuci-tui: the console needs a terminal; for one host in a script use "
            "`ssh HOST gpuci-tui status`",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    if shutil.which("ssh") is None:
        return fail(
            CliExit(exitcodes.FAILED, "ssh is not installed (apt-get install openssh-client)")
        )
    control_dir = Path(tempfile.mkdtemp(prefix="gpuci-ssh-", dir=SHORT_SOCKET_BASE))
    janitor = start_janitor(control_dir)
    settings = SshSettings(
        control_dir=control_dir,
        ssh_config=fleet.ssh_config,
        connect_timeout=fleet.connect_timeout,
        readonly=bool(args.readonly),
    )
    hosts = members(fleet, settings)
    services = Services(
        config=None,
        config_path=path,
        gpu=RemoteGpus("each host", time.time),
        readonly=bool(args.readonly),
        fleet=Fleet(hosts, keys=keys),
    )

    def last_resort() -> None:
        # The console did not end within the grace time (e.g. stuck writing to a terminal
        # that is gone): leave no connection state behind, and go.
        shutil.rmtree(control_dir, ignore_errors=True)
        os._exit(exitcodes.FAILED)

    async def console() -> None:
        app = make_app(services)

        def hang_up() -> None:
            # The terminal went away (SSH session closed): end cleanly, closing the connections.
            app.exit()
            timer = threading.Timer(HANGUP_GRACE, last_resort)
            timer.daemon = True  # a clean exit does not wait for it
            timer.start()

        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hang_up)
        try:
            await app.run_async()
        finally:
            # Bounded: a host mid-connect must not keep a console whose terminal is gone alive.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await asyncio.gather(*(m.handle.close() for m in hosts), return_exceptions=True)

    try:
        asyncio.run(console())
    finally:
        shutil.rmtree(control_dir, ignore_errors=True)
        stop_janitor(janitor)
    return exitcodes.OK
