"""One supervisor per agent set: the instance's files and its lock.

Whatever supervises an agent set (``gpuci-tui run``, ``console --foreground``,
the demo on its own temporary instance) keeps the same files, named here by
`DaemonPaths`, and holds the same exclusive ``flock``s (`InstanceLocks`): the
instance's, and with ``[groups]`` each group's, so no two supervisors ever
enable, disable or replace the same agents.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gpuci_tui.core.config.loader import Config, agent_groups, for_group, instance_id
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.store.intent import IntentFile

__all__ = [
    "AlreadyRunningError",
    "DaemonPaths",
    "agent_set",
    "InstanceLock",
    "InstanceLocks",
    "group_lock",
    "intent_stores",
    "lock_instance",
]


class AlreadyRunningError(GpuciError):
    """Another supervisor supervises the same agent set."""

    def __init__(self, message: str, holder_mode: str = "daemon") -> None:
        """``holder_mode``: what holds the lock (``daemon`` or ``in-process``)."""
        super().__init__(message)
        self.holder_mode = holder_mode


@dataclass
class DaemonPaths:
    """Where a supervisor keeps its socket, lock, intent and history."""

    socket: Path
    lock: Path
    intent: Path
    history: Path
    agents: Path
    """Per-slot agent directories shared with the host (container jobs)."""

    @classmethod
    def for_instance(cls, instance: str) -> DaemonPaths:
        """The standard XDG locations for ``instance``."""
        from gpuci_tui.core.config import paths

        state = paths.state_dir()
        return cls(
            socket=paths.socket_path(instance),
            lock=paths.lock_path(instance),
            intent=state / f"{instance}.intent.json",
            history=paths.history_db_path(),
            agents=state / "agents",
        )

    @property
    def agent_cache(self) -> Path:
        """The host's cache of verified agent packages (next to the agents' directories)."""
        return self.agents.with_name("agent-cache")

    @property
    def gpu_health(self) -> Path:
        """Where latched GPU faults are kept across restarts (next to the intent)."""
        return self.intent.with_name(self.intent.name.replace("intent", "gpu-health"))


class InstanceLock:
    """An exclusive, non-blocking ``flock`` that dies with the process (even on SIGKILL)."""

    def __init__(self, path: Path) -> None:
        """Lock file at ``path`` (created 0600)."""
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self, what: str, mode: str = "daemon") -> None:
        """Take the lock or raise `AlreadyRunningError` naming the holder.

        The file holds the holder's pid and ``mode`` (``daemon`` or ``in-process``), so a refusal says what to do about it: a daemon is talked to with
        ``status``/``stop``, a ``--foreground`` console is closed in its terminal.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = open(self.path, "a+")  # noqa: SIM115 - held for the supervisor's lifetime
        os.chmod(self.path, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().split()
            handle.close()
            mode = holder[1] if len(holder) > 1 else "daemon"
            raise AlreadyRunningError(_refusal(holder, what), mode) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} {mode}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Release the lock."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class InstanceLocks:
    """The locks of one agent set, all held (see `lock_instance`)."""

    def __init__(self, held: list[InstanceLock]) -> None:
        """Own ``held`` (already acquired)."""
        self.held = held

    def release(self) -> None:
        """Release every lock (last taken first); idempotent."""
        while self.held:
            self.held.pop().release()


def agent_set(config: Config) -> str:
    """The agent set of ``config`` in words: its organisation, pools and agent names."""
    groups = agent_groups(config)
    what = ", ".join(f"pool '{g.pool}' agents '{g.agents.name_prefix}-*'" for g in groups)
    return f"{config.azure.url} {what}"


def _refusal(holder: list[str], what: str) -> str:
    """Why the lock is refused, from what its holder wrote (``PID MODE``; older: ``PID``)."""
    pid = holder[0] if holder else "unknown"
    mode = holder[1] if len(holder) > 1 else "daemon"
    if mode == "in-process":
        return (
            f"a gpuci-tui console with --foreground (pid {pid}) already supervises {what}. "
            "Quit that console first (it has no control socket to talk to)."
        )
    return (
        f"another gpuci-tui run (pid {pid}) already supervises {what}. "
        "Use `gpuci-tui status` to talk to it, or stop it first with `gpuci-tui stop`."
    )


def lock_instance(config: Config, paths: DaemonPaths, mode: str = "daemon") -> InstanceLocks:
    """Take the lock of ``config``'s agent set, and with ``[groups]`` each group's.

    ``mode`` is who takes it (``daemon`` or ``in-process``), for the
    refusal another supervisor then gets. A group's lock keeps another configuration that runs the same group alone
    (its own instance) from supervising it too.

    Raises:
        AlreadyRunningError: one of the locks is held (none is kept then).
    """
    groups = agent_groups(config)
    what = agent_set(config)
    locks = [InstanceLock(paths.lock)]
    if config.groups:
        locks += [
            InstanceLock(DaemonPaths.for_instance(instance_id(for_group(config, g))).lock)
            for g in groups
        ]
    taken = InstanceLocks([])
    try:
        for lock in locks:
            lock.acquire(what, mode)
            taken.held.append(lock)
    except AlreadyRunningError:
        taken.release()
        raise
    return taken


def intent_stores(config: Config, paths: DaemonPaths) -> Callable[[str, Config], IntentFile]:
    """Each group's saved intent (by name and its own configuration): ``paths.intent``
    without groups, else the group's own file (also for a group a reload adds).
    """
    if not config.groups:
        return lambda name, group: IntentFile(paths.intent)
    return lambda name, group: IntentFile(DaemonPaths.for_instance(instance_id(group)).intent)


def group_lock(
    mode: str = "daemon", held: InstanceLocks | None = None
) -> Callable[[Config], Callable[[], None]]:
    """Take the lock of a group a reload adds (its configuration as `for_group` makes it).

    The same lock `lock_instance` takes for the groups of the start, so no other
    supervisor runs the group while this one does; returns its release. A lock
    among ``held`` (the start's, kept until the daemon stops) is ours already:
    a group removed and added again is not refused by its own daemon.

    Raises:
        AlreadyRunningError: another supervisor holds it.
    """

    def claim(group: Config) -> Callable[[], None]:
        path = DaemonPaths.for_instance(instance_id(group)).lock
        if held is not None and any(lock.path == path for lock in held.held):
            return lambda: None
        lock = InstanceLock(path)
        lock.acquire(agent_set(group), mode)
        return lock.release

    return claim
