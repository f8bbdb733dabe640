"""What the test processes of one machine share, one at a time.

A run's pytest-xdist workers, and other runs on the machine, share the Docker
engine, /etc/passwd and /tmp. What two of them must not do at once (make one image
under one tag, add or remove an account) is done under a machine-wide lock.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Hold the lock ``name`` of every test process on this machine (an flock on a file)."""
    # /tmp, not $TMPDIR: every process must find the same file.
    path = Path("/tmp") / f"gpuci-tests-{name}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
