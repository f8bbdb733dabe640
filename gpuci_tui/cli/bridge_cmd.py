"""``gpuci-tui bridge``: standard input and output joined to the local daemon's control socket.

It is what a fleet console runs on each host over ssh (``ssh HOST gpuci-tui
bridge``): bytes go both ways unchanged, so every request of the control
protocol, current or future, passes through without the bridge knowing it.
No port is opened and nothing listens: the bridge lives as long as one ssh
channel. The daemon still checks that the bridge runs as its own user.

It refuses (exit 3, one line on stderr) when no daemon runs for the
configuration, and it ends when either side goes away: the daemon closes the
socket, or the other end of the ssh channel is gone.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
from pathlib import Path

from . import exitcodes
from .common import CliExit, fail, load, socket_for

CHUNK = 65536


def run_bridge(args: argparse.Namespace) -> int:
    """Connect to the daemon of ``--config`` (or ``--socket``) and pump bytes until one side ends."""
    try:
        path = Path(args.socket) if args.socket else socket_for(load(args))
        sock = connect(path)
    except CliExit as exc:
        return fail(exc)
    with sock:
        pump(sock, 0, 1)
    return exitcodes.OK


def connect(path: Path) -> socket.socket:
    """A connected Unix socket to the daemon at ``path``.

    Raises:
        CliExit: code 3 when no daemon answers there, 1 when it is not ours.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        why = "no socket" if isinstance(exc, FileNotFoundError) else "a stale socket"
        raise CliExit(
            exitcodes.NO_DAEMON,
            f"no gpuci-tui daemon is running on this host ({why} at {path}); "
            "start one there with: gpuci-tui run",
        ) from None
    except OSError as exc:
        sock.close()
        raise CliExit(
            exitcodes.FAILED, f"cannot connect to the daemon at {path}: {exc.strerror or exc}"
        ) from None
    return sock


def pump(sock: socket.socket, fd_in: int, fd_out: int) -> None:
    """Copy ``fd_in`` → ``sock`` and ``sock`` → ``fd_out`` until the daemon or the reader is gone.

    End of input is passed on as a half close (the daemon still answers what
    it was sent); the pump ends when the daemon closes, or when ``fd_out``
    reports that nobody reads it any more (the ssh channel closed).
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(fd_in, select.POLLIN)
    poller.register(fd_out, 0)  # only errors and hang-ups: the reader went away
    gone = select.POLLERR | select.POLLHUP | select.POLLNVAL
    reading = True
    while True:
        for fd, events in poller.poll():
            if fd == fd_out and events & gone and not events & select.POLLIN:
                return
            if fd == sock.fileno():
                data = sock.recv(CHUNK)
                if not data or not _write_all(fd_out, data):
                    return
            elif fd == fd_in and reading:
                data = os.read(fd_in, CHUNK)
                if data:
                    try:
                        sock.sendall(data)
                    except OSError:
                        return
                else:
                    reading = False
                    poller.unregister(fd_in)
                    sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # BrokenPipeError: the ssh channel is gone
        return False
    return True
