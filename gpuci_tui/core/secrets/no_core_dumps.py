"""Keep the PAT out of core dumps and out of other processes' reach.

A process that holds the PAT in memory (the daemon, the console that set it up)
must not leave it in a core file that lands in a world-readable crash directory
(systemd-coredump, apport, ``/var/crash``) or let another process of the same
user attach to it. ``RLIMIT_CORE`` 0 stops the kernel writing a core file;
``prctl(PR_SET_DUMPABLE, 0)`` also stops a core dump helper and ptrace by the
same user, and makes ``/proc/PID/*`` root's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import resource

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def forbid_core_dumps() -> bool:
    """Make this process non-dumpable with no core size; True when both took effect."""
    ok = True
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (OSError, ValueError) as exc:
        log.warning("could not set the core file size to 0: %s", exc)
        ok = False
    libc = _libc()
    if libc is None or libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("could not mark the process non-dumpable (prctl PR_SET_DUMPABLE)")
        ok = False
    return ok


def dumpable() -> bool | None:
    """Whether this process may dump core (None: cannot tell on this system)."""
    libc = _libc()
    if libc is None:
        return None
    return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None
