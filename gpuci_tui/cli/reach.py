"""Which daemon a command talks to: the one of this configuration file, even when the file is broken.

A daemon is named by its configuration's instance (`socket_for`), which needs a
file that parses. A bad edit must not lock the operator out of a daemon that runs
well on what it loaded, so the daemon started from a file also keeps a link
named after the file itself (`socket_links.config_link`, derived from the path
alone). `daemon_of` tries the file's instance, then that link; with a file that
no longer parses or validates it finds the daemon by the link only, says the
file's problems (file, key, fix) beside "the daemon runs on the configuration it
loaded at HH:MM", and the command goes ahead. No daemon and a broken file: exit 4,
the file's problems, as before.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.loader import Config, load_config, parse_config
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.formatting import clock_time
from gpuci_tui.core.host.control.client import ControlClient, ControlError
from gpuci_tui.core.host.control.socket_links import config_link

from . import exitcodes
from .common import CliExit, config_path, socket_for

__all__ = ["Reached", "daemon_of", "daemon_config"]


@dataclass(frozen=True)
class Reached:
    """The daemon a command talks to, and what is wrong with the file (if anything)."""

    socket: Path
    """Its control socket (or the link to it)."""
    config: Config | None
    """The file's configuration; None when the file has problems (``problem``)."""
    problem: ConfigError | None = None
    """Why the file does not load, while the daemon runs on what it loaded before."""
    loaded_at: float | None = None
    """When the daemon read the configuration it runs on (with ``problem``; None: not said)."""

    def runs_on(self) -> str:
        """``the daemon runs on the configuration it loaded at 10:02``."""
        when = f" at {clock_time(self.loaded_at, time.time())}" if self.loaded_at else ""
        return f"the daemon runs on the configuration it loaded{when}"

    def notice(self) -> str:
        """The file's problems and what the daemon runs on instead (for stderr)."""
        return (
            f"{self.problem}\n{self.runs_on()}; this file is not applied: fix it, then "
            "`gpuci-tui reload` (or `gpuci-tui check-config` to check it first)"
        )


def daemon_of(args: argparse.Namespace, *, tell: bool = True) -> Reached:
    """The daemon of the configuration file ``args`` names, with or without a valid file.

    ``tell``: print the file's problems and what the daemon runs on to stderr (a
    command that prints them itself, or a byte stream like the bridge, says False).

    Raises:
        CliExit: code 4 when the file has problems and no daemon of it answers, or
            when its path cannot be worked out.
    """
    try:
        path = config_path(args)
    except GpuciError as exc:
        raise CliExit(exitcodes.CONFIG, str(exc)) from None
    try:
        config = load_config(path)
    except ConfigError as problem:
        reached = _by_file(path, problem)
        if reached is None:
            raise CliExit(exitcodes.CONFIG, str(problem)) from None
        if tell:
            print(f"gpuci-tui: {reached.notice()}", file=sys.stderr)
        return reached
    sock = socket_for(config)
    if not sock.exists():
        # An edit that adds or removes a group changes the instance the file names: the
        # daemon started from this file still answers on the link named after the file.
        linked = _link(path)
        if linked is not None and linked.exists():
            sock = linked
    return Reached(sock, config)


def daemon_config(reached: Reached) -> Config:
    """The configuration the reached daemon runs on (the console opens on it).

    Raises:
        CliExit: code 4 with the file's problems when the daemon cannot say it (an older
            daemon) or what it says does not load here.
    """
    if reached.config is not None:
        return reached.config
    try:
        loaded = ControlClient(reached.socket).loaded_config()
        return parse_config(loaded.toml, Path(loaded.path) if loaded.path else None)
    except (ControlError, ConfigError) as exc:
        raise CliExit(
            exitcodes.CONFIG, f"{reached.problem}\n(the daemon's own configuration: {exc})"
        ) from None


def _link(path: Path) -> Path | None:
    try:
        return config_link(path)
    except GpuciError:  # an unusable runtime directory: no link to look at
        return None


def _by_file(path: Path, problem: ConfigError) -> Reached | None:
    """The daemon started from ``path``, found by the link named after the file; None: none."""
    linked = _link(path)
    if linked is None or not linked.exists():
        return None
    client = ControlClient(linked, timeout=5.0)
    try:
        return Reached(linked, None, problem, client.loaded_config().loaded_at)
    except ControlError:
        pass
    try:  # an older daemon knows no ``config``: it runs, it just cannot say since when
        return Reached(linked, None, problem) if client.hello().get("ok") else None
    except ControlError:
        return None  # a link left by a daemon that is gone
