"""The fleet console's janitor: when the console is gone, however it ended, its ssh state goes too.

A console that exits closes its connection masters and removes their private
directory itself. One that is killed (SIGKILL, the OOM killer) cannot, and its
masters would keep their remote sessions up for ``ControlPersist``. So the
console starts this small process beside it, in its own session, joined by a
pipe: the pipe's end of file means the console is gone, whatever the cause.
The janitor then tells every master in the directory to exit (which ends its
remote sessions, and so their bridges) and removes the directory.

It imports nothing of gpuci-tui: it starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Seconds one master has to acknowledge ``-O exit``.
EXIT_TIMEOUT = 5.0


def close_masters(control_dir: Path, ssh: str = "ssh") -> None:
    """Tell every connection master with a socket in ``control_dir`` to exit."""
    with contextlib.suppress(OSError):
        for path in sorted(control_dir.iterdir()):
            if not path.is_socket():
                continue
            # -F /dev/null: only the socket matters, not the operator's settings for a host.
            argv = [ssh, "-F", "/dev/null", "-o", f"ControlPath={path}", "-O", "exit", "janitor"]
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=EXIT_TIMEOUT,
                    check=False,
                )


def main(argv: list[str]) -> int:
    """``python -m gpuci_tui.cli.fleet_janitor CONTROL_DIR [SSH]``: wait for EOF, then clean."""
    control_dir = Path(argv[0])
    ssh = argv[1] if len(argv) > 1 else "ssh"
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass  # the console never writes: only the end of the pipe matters
    close_masters(control_dir, ssh)
    shutil.rmtree(control_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
