"""A real ``gpuci-tui demo`` process, on a terminal of its own (a pty), for the demo's tests.

The demo runs with ``TMPDIR`` pointed at a folder of the test: its instance
folder is made there, and so is anything else it might leave behind, so "nothing
left in /tmp" is checked as "the test's TMPDIR is empty again". Its output is
read all along (a pty that nobody reads fills up and blocks the writer); the
instance folder is taken from the lines it prints before the console starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from tests.real.rig import wait_for

BINARY = Path(sys.executable).parent / "gpuci-tui"
_FOLDER = re.compile(r"The demo's instance is (\S+) \(")
_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b[\]P][^\x07\x1b]*(\x07|\x1b\\)|\x1b.")


def demo_environment(tmp: Path, home: Path) -> dict[str, str]:
    """The demo's environment: its own TMPDIR and HOME, none of the caller's gpuci-tui settings."""
    tmp.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUCI_", "XDG_", "PYTHON_KEYRING")) and k != "TMPDIR"
    }
    env.update(TMPDIR=str(tmp), HOME=str(home), TERM="xterm-256color", COLUMNS="120")
    return env


class DemoProcess:
    """``gpuci-tui demo ARGS`` on a pty: its output, its instance folder, its end."""

    def __init__(self, *args: str, environment: dict[str, str]) -> None:
        """Start it (the pty is 120x36)."""
        self.args = args
        pid, fd = pty.fork()
        if pid == 0:  # the child: the demo, with the pty as its controlling terminal
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
            os.execve(str(BINARY), [str(BINARY), "demo", *args], environment)
        self.pid, self.fd = pid, fd
        self._output = bytearray()
        self._lock = threading.Lock()
        self.returncode: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return  # the pty closed: the demo and its terminal are gone
            if not chunk:
                return
            with self._lock:
                self._output += chunk

    @property
    def output(self) -> str:
        """What it printed so far, without the terminal's escape sequences."""
        with self._lock:
            raw = bytes(self._output)
        return _ESCAPES.sub(b"", raw).decode(errors="replace")

    def folder(self, timeout: float = 60.0) -> Path:
        """The demo's instance folder, once it printed how to reach it (its daemon answers)."""
        found = wait_for(
            lambda: _FOLDER.search(self.output) or self._died(), timeout, "the demo to start"
        )
        return Path(found.group(1))

    def _died(self) -> None:
        if self.poll() is not None:
            raise AssertionError(f"the demo exited ({self.returncode}):\n{self.output[-3000:]}")

    def poll(self) -> int | None:
        """Its exit code as a shell says it (128 + a signal), None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                if self.returncode < 0:
                    self.returncode = 128 - self.returncode
        return self.returncode

    def wait(self, timeout: float = 60.0) -> int:
        """Its exit code, once it exited."""
        wait_for(lambda: self.poll() is not None, timeout, f"the demo to exit:\n{self.output}")
        assert self.returncode is not None
        return self.returncode

    def send(self, sig: int) -> None:
        """Send ``sig`` to the demo's process."""
        os.kill(self.pid, sig)

    def hang_up(self) -> None:
        """Close its terminal (the kernel sends SIGHUP, as when an SSH session drops)."""
        os.close(self.fd)

    def kill(self) -> None:
        """End it without a word (the test's own clean-up)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


def cli(
    config: Path, *args: str, environment: dict[str, str], stdin: str = "", exported: bool = False
) -> subprocess.CompletedProcess[str]:
    """``gpuci-tui --config CONFIG ARGS`` from "another shell" (the demo's is not entered);
    ``exported``: ``GPUCI_CONFIG=CONFIG gpuci-tui ARGS`` instead."""
    named = [] if exported else ["--config", str(config)]
    return subprocess.run(
        [str(BINARY), *named, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**environment, "GPUCI_CONFIG": str(config)} if exported else environment,
        timeout=180,
    )


def leftovers(tmp: Path) -> list[str]:
    """What is left in the demo's TMPDIR."""
    return sorted(p.name for p in tmp.iterdir())


def settle(seconds: float) -> None:
    """Let a real process run for a while (never to wait for a state: `wait_for` does)."""
    time.sleep(seconds)
