"""Map a host PID to the Docker container it runs in, through ``/proc``.

NVML reports the *host* PIDs of the processes using a GPU. To show which agent
container holds a GPU, the sampler reads ``/proc/<pid>/cgroup`` and extracts
Docker's 64-hex container id from the cgroup path. Docker writes that id into
the path in every common setup:

- cgroup v1, cgroupfs driver: ``12:memory:/docker/<id>``
- cgroup v1 or v2, systemd driver: ``0::/system.slice/docker-<id>.scope``
- cgroup v2, cgroupfs driver: ``0::/docker/<id>``
- rootless Docker (systemd, v2): ``0::/user.slice/.../docker-<id>.scope``

Nested containers (Docker in Docker) show several ids; the *outermost* one is
returned because that is the container the host's engine knows about.

This only works when gpuci-tui runs in the host's PID namespace (not inside a
container of its own without ``--pid=host``): otherwise NVML's PIDs do not
exist in our ``/proc`` and every lookup returns None.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

PROC_ROOT = Path("/proc")
"""Where procfs is mounted; tests point this elsewhere."""

# One pattern per layout: "/docker/<id>" (cgroupfs driver, v1 and v2) and
# "docker-<id>.scope" (systemd driver). The id must be followed by "/", ".scope"
# or the end of the path so a longer hex string never matches partially.
_CONTAINER_ID = re.compile(r"(?:/docker/|/docker-)([0-9a-f]{64})(?=\.scope\b|/|$)")


def container_id_from_cgroup(text: str) -> str | None:
    """Extract the Docker container id from the text of a ``/proc/<pid>/cgroup`` file.

    Args:
        text: The file's content: one ``hierarchy-id:controllers:path`` line
            per hierarchy (cgroup v1) or a single ``0::path`` line (cgroup v2).

    Returns:
        The 64-hex container id of the outermost Docker container, or None when
        the process is not in a Docker container (a host process, or another
        runtime such as containerd or podman).
    """
    best: tuple[int, str] | None = None
    for line in text.splitlines():
        # The path is everything after the second colon; it may itself contain
        # colons (rare, but legal), so split at most twice.
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        match = _CONTAINER_ID.search(parts[2])
        if match is None:
            continue
        # Outermost = earliest in the path. Hierarchies agree in practice; if
        # they disagree, prefer the match nearest the root of its path.
        candidate = (match.start(), match.group(1))
        if best is None or candidate[0] < best[0]:
            best = candidate
    return best[1] if best else None


def container_id_of_pid(pid: int, proc_root: Path = PROC_ROOT) -> str | None:
    """Return the Docker container id of a host process, or None.

    Args:
        pid: A host PID (as NVML reports it).
        proc_root: The procfs mount point.

    Returns:
        The 64-hex container id, or None when the process has exited, cannot be
        read (permission), or does not run in a Docker container.
    """
    try:
        text = (proc_root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        # The process exited between NVML's report and this read, or /proc is
        # not ours (another PID namespace): both mean "unknown", not an error.
        return None
    return container_id_from_cgroup(text)


def process_name(pid: int, proc_root: Path = PROC_ROOT) -> str | None:
    """Return a process's short command name (``/proc/<pid>/comm``), or None.

    Args:
        pid: A host PID.
        proc_root: The procfs mount point.

    Returns:
        The name (at most 15 characters, as the kernel truncates it), or None
        when the process is gone or unreadable.
    """
    try:
        name = (proc_root / str(pid) / "comm").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return name.strip() or None


NAME_TTL_MISS = 15.0
"""Seconds a failed container-name lookup is remembered (the container may appear later)."""
NAME_CACHE_MAX = 512
"""Names (and misses) kept at most; the cache starts over when full (bounded memory)."""


class ContainerNames:
    """Container id → name through a caller's callable, cached, never raising."""

    def __init__(self, lookup: Callable[[str], str | None] | None) -> None:
        """``lookup`` maps a 64-hex container id to its name (None: unknown; no lookup at all)."""
        self._lookup = lookup
        self._hit: dict[str, str] = {}
        self._miss: dict[str, float] = {}

    def lookup(self, cid: str) -> str | None:
        """The container's name, or None when it is unknown (a miss is retried after a while)."""
        if self._lookup is None:
            return None
        if cid in self._hit:
            return self._hit[cid]
        missed = self._miss.get(cid)
        if missed is not None and time.monotonic() - missed < NAME_TTL_MISS:
            return None
        try:
            name = self._lookup(cid)
        except Exception as exc:  # noqa: BLE001 - a caller's callback must never break sampling
            log.debug("container name lookup for %s failed: %s", cid[:12], exc)
            name = None
        if len(self._hit) >= NAME_CACHE_MAX:
            self._hit.clear()
        if len(self._miss) >= NAME_CACHE_MAX:
            self._miss.clear()
        if name:
            self._hit[cid] = name
            self._miss.pop(cid, None)
        else:
            self._miss[cid] = time.monotonic()
        return name or None
