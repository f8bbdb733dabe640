"""``gpuci-tui bridge``: standard input and output joined to the local daemon's control socket.

It is what a fleet console runs on each host over ssh (``ssh HOST gpuci-tui
bridge``). No port is opened and nothing listens: the bridge lives as long as
one ssh channel. The daemon still checks that the bridge runs as its own user.

The bridge speaks only the gpuci-tui control protocol, and only to a gpuci-tui
daemon: before anything else it asks the socket's owner for ``hello`` and
refuses (exit 1) unless a daemon of this protocol answers, so ``--socket`` cannot
turn it into a pipe to another service (Docker's socket, say). Each line from
standard input must then be one request of a known op (`control.OPS`);
anything else is answered by the bridge itself with ``{"ok": false, ...}`` and
never reaches the socket. With ``--readonly`` every ``command`` (stop, scale,
drain, …) is refused the same way: the host's owner can force
``gpuci-tui --readonly bridge`` in ``authorized_keys`` and know that consoles
only watch. Answers from the daemon pass back unchanged.

It refuses (exit 3, one line on stderr) when no daemon runs for the
configuration, and it ends when either side goes away: the daemon closes the
socket, or the other end of the ssh channel is gone. Nothing keeps a bridge
whose console is gone: its standard input closing ends a subscription at once
(a stream has no last answer to wait for) and other requests after at most
`DRAIN_TIMEOUT`; a bridge whose parent (sshd's session) went away ends too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import time
from pathlib import Path
from typing import Any

from gpuci_tui.core.host.control.client import MAX_LINE, OPS, line_of, message
from gpuci_tui.core.models import PROTOCOL_VERSION

from . import exitcodes
from .common import CliExit, fail
from .reach import daemon_of

CHUNK = 65536
#: Seconds a daemon has to answer the bridge's ``hello``.
HELLO_TIMEOUT = 10.0
#: Seconds the answers owed still get after standard input closed (none for a stream).
DRAIN_TIMEOUT = 30.0
#: Milliseconds between two looks at whether the bridge's parent is still there.
WATCH_MS = 1000


def run_bridge(args: argparse.Namespace) -> int:
    """Connect to the daemon of ``--config`` (or ``--socket``) and relay requests until one side ends."""
    # The session that ran us, taken now: one that ends while we connect is noticed too.
    parent = os.getppid()
    try:
        # A byte stream: the file's problems are not written into it (the console shows
        # the daemon's state; `gpuci-tui check-config` on the host says them).
        path = Path(args.socket) if args.socket else daemon_of(args, tell=False).socket
        sock = connect(path)
    except CliExit as exc:
        return fail(exc)
    with sock:
        try:
            check_daemon(sock, path)
        except CliExit as exc:
            return fail(exc)
        pump(sock, 0, 1, readonly=bool(getattr(args, "readonly", False)), parent=parent)
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


def check_daemon(sock: socket.socket, path: Path) -> None:
    """Ask the peer for ``hello``; return only if a gpuci-tui daemon of our protocol answers.

    Raises:
        CliExit: code 1, naming what answered instead.
    """
    not_ours = f"{path} is not a gpuci-tui daemon's control socket"
    sock.settimeout(HELLO_TIMEOUT)
    data = b""
    try:
        sock.sendall(line_of(message("hello")))
        while b"\n" not in data and len(data) < CHUNK:
            chunk = sock.recv(CHUNK)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        raise CliExit(exitcodes.FAILED, f"{not_ours}: no answer to hello") from None
    except OSError as exc:
        raise CliExit(exitcodes.FAILED, f"{not_ours}: {exc.strerror or exc}") from None
    finally:
        sock.settimeout(None)
    line, _, rest = data.partition(b"\n")
    try:
        reply = json.loads(line)
    except (ValueError, RecursionError):
        reply = None
    if rest or not isinstance(reply, dict) or not isinstance(reply.get("instance"), str):
        raise CliExit(exitcodes.FAILED, f"{not_ours}: it answered {line[:60]!r}")
    if reply.get("ok") is not True:
        raise CliExit(exitcodes.FAILED, f"the daemon at {path} refused: {reply.get('error')}")
    if reply.get("protocol") != PROTOCOL_VERSION:
        raise CliExit(
            exitcodes.FAILED,
            f"the daemon at {path} speaks control protocol {reply.get('protocol')}, this "
            f"bridge {PROTOCOL_VERSION}: run the same gpuci-tui version on both sides",
        )


def vet(line: bytes, readonly: bool) -> tuple[bytes, bytes]:
    """``(to the daemon, to the client)`` for one request line: one of the two is empty."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return b"", _error("bad request: not a JSON object")
    if not isinstance(request, dict):
        return b"", _error("bad request: a request must be a JSON object")
    op = request.get("op")
    if op not in OPS:
        return b"", _error(f"unknown op {op!r}; expected {', '.join(OPS)}")
    if readonly and op == "command":
        return b"", _error("refused: this bridge is read-only (--readonly); it only watches")
    return json.dumps(request, separators=(",", ":")).encode() + b"\n", b""


def _error(message: str) -> bytes:
    reply: dict[str, Any] = {"ok": False, "error": message}
    return json.dumps(reply).encode() + b"\n"


def pump(
    sock: socket.socket,
    fd_in: int,
    fd_out: int,
    *,
    readonly: bool = False,
    parent: int | None = None,
) -> None:
    """Relay requests ``fd_in`` → ``sock`` and answers ``sock`` → ``fd_out`` until one side ends.

    Requests are vetted line by line (`vet`); the bridge's own refusals keep
    their place among the daemon's answers. End of input is passed on as a half
    close (the daemon still answers what it was sent, for `DRAIN_TIMEOUT` at
    most); the pump ends when the daemon closes, when ``fd_out`` reports that
    nobody reads it any more (the ssh channel closed), at end of input once a
    subscription was made (the stream's reader is gone: nothing more is owed),
    or when the bridge's parent is gone (the session that ran it ended): ``parent``, the
    pid it had when the bridge started (default: its parent now).
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(fd_in, select.POLLIN)
    poller.register(fd_out, 0)  # only errors and hang-ups: the reader went away
    gone = select.POLLERR | select.POLLHUP | select.POLLNVAL
    # Requests go out without blocking: a bridge blocked in sendall stops reading the
    # daemon's answers, and a daemon blocked writing them stops reading requests.
    sock.setblocking(False)
    relay = _Relay(sock, fd_out, readonly)
    pending = b""
    reading = True  # fd_in still open
    parent = os.getppid() if parent is None else parent
    deadline: float | None = None  # set when fd_in closed: the answers owed get this long
    while True:
        ready = poller.poll(WATCH_MS)
        if os.getppid() != parent:
            return  # re-parented: the ssh session that ran the bridge is gone
        if deadline is not None and time.monotonic() > deadline:
            return
        for fd, events in ready:
            if fd == fd_out and events & gone and not events & select.POLLIN:
                return
            if fd == sock.fileno():
                if events & select.POLLOUT and not relay.send_some():
                    return
                if events & (select.POLLIN | gone):
                    try:
                        data = sock.recv(CHUNK)
                    except BlockingIOError:
                        continue
                    except OSError:
                        return
                    if not data or not relay.answers(data):
                        return
            elif fd == fd_in:
                data = os.read(fd_in, CHUNK)
                pending += data
                *lines, pending = pending.split(b"\n")
                if not data and pending:
                    lines.append(pending)  # the last request, without its newline
                    pending = b""
                elif len(pending) > MAX_LINE:
                    lines.append(b"\x00")  # too long: refused like any non-request
                    pending = b""
                if not relay.requests(lines):
                    return
                if not data:
                    if relay.streaming:
                        return  # whoever read the stream is gone: nothing more is owed
                    poller.unregister(fd_in)
                    reading = False
                    deadline = time.monotonic() + DRAIN_TIMEOUT
        if not reading and not relay.outgoing and not relay.half_closed:
            with contextlib.suppress(OSError):  # every request is out: pass the end on
                sock.shutdown(socket.SHUT_WR)
            relay.half_closed = True
        poller.modify(sock, select.POLLIN | (select.POLLOUT if relay.outgoing else 0))
        if reading:
            # Back-pressure: read no more requests while a megabyte waits to go out.
            poller.modify(fd_in, select.POLLIN if len(relay.outgoing) < MAX_LINE else 0)


class _Relay:
    """Keeps answers in request order: a refusal waits for the daemon's earlier answers."""

    def __init__(self, sock: socket.socket, fd_out: int, readonly: bool) -> None:
        self.sock = sock
        self.fd_out = fd_out
        self.readonly = readonly
        self.queue: list[bytes | None] = []  # None: an answer the daemon owes
        self.partial = b""
        self.streaming = False  # after subscribe, the daemon only streams
        self.outgoing = b""  # requests not yet written to the daemon
        self.half_closed = False

    def requests(self, lines: list[bytes]) -> bool:
        for line in lines:
            if not line.strip():
                continue
            forward, answer = vet(line, self.readonly)
            if forward:
                self.outgoing += forward
                self.queue.append(None)
                self.streaming |= forward.startswith(b'{"op":"subscribe"')
            else:
                self.queue.append(answer)
        return self._flush()

    def send_some(self) -> bool:
        """Write what the daemon's socket takes now; False when it is gone."""
        try:
            sent = self.sock.send(self.outgoing)
        except BlockingIOError:
            return True
        except OSError:
            return False
        self.outgoing = self.outgoing[sent:]
        return True

    def answers(self, data: bytes) -> bool:
        """Pass the daemon's answers on, each followed by the refusals queued behind it.

        Answer by answer, not chunk by chunk: on a busy host one read can bring
        several answers, and a refusal owed between two of them goes between them.
        """
        if self.streaming:
            data, self.partial = self.partial + data, b""
            return _write_all(self.fd_out, data)
        self.partial += data
        *lines, self.partial = self.partial.split(b"\n")
        for line in lines:
            if not _write_all(self.fd_out, line + b"\n"):
                return False
            if self.queue and self.queue[0] is None:
                self.queue.pop(0)
            if not self._flush():
                return False
        return True

    def _flush(self) -> bool:
        while self.queue and self.queue[0] is not None:
            answer = self.queue.pop(0)
            if answer is not None and not _write_all(self.fd_out, answer):
                return False
        return True


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # BrokenPipeError: the ssh channel is gone
        return False
    return True
