"""``gpuci-tui run``: the supervisor in the foreground, with its control socket.

One daemon per agent set (organisation + pool + name prefix): an exclusive
``flock`` on a lock file in the state directory makes a second ``run`` for the
same set refuse at once with a clear message. SIGINT/SIGTERM stop the
supervisor and leave the agent containers running (``gpuci-tui stop --drain``
drains first).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .agentspec import instance_id
from .config import Config
from .control import ControlServer
from .history import IntentStore, JobHistory, JobRecord
from .models import ExitInfo
from .protocols import AgentPoolApi, ContainerRuntime, GpuciError, TokenSource
from .slots import SlotRecord
from .supervisor import Supervisor

log = logging.getLogger("gpuci_tui.daemon")


class AlreadyRunningError(GpuciError):
    """Another daemon supervises the same agent set."""


@dataclass
class DaemonPaths:
    """Where a daemon keeps its socket, lock, intent and history."""

    socket: Path
    lock: Path
    intent: Path
    history: Path
    agents: Path
    """Per-slot agent directories shared with the host (container jobs)."""

    @classmethod
    def for_instance(cls, instance: str) -> DaemonPaths:
        """The standard XDG locations for ``instance``."""
        from . import paths

        state = paths.state_dir()
        return cls(
            socket=paths.socket_path(instance),
            lock=paths.lock_path(instance),
            intent=state / f"{instance}.intent.json",
            history=paths.history_db_path(),
            agents=state / "agents",
        )


class InstanceLock:
    """An exclusive, non-blocking ``flock`` that dies with the process (even on SIGKILL)."""

    def __init__(self, path: Path) -> None:
        """Lock file at ``path`` (created 0600)."""
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self, what: str) -> None:
        """Take the lock or raise `AlreadyRunningError` naming the holder's pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = open(self.path, "a+")  # noqa: SIM115 - held for the daemon's lifetime
        os.chmod(self.path, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise AlreadyRunningError(
                f"another gpuci-tui run (pid {holder}) already supervises {what}. "
                "Use `gpuci-tui status` to talk to it, or stop it first with `gpuci-tui stop`."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Release the lock."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def history_recorder(history: JobHistory, instance: str) -> Callable[[SlotRecord, ExitInfo], None]:
    """A supervisor ``on_job_finished`` callback that writes to ``history``."""

    def record(rec: SlotRecord, info: ExitInfo) -> None:
        job = rec.last_job
        history.add(
            JobRecord(
                instance=instance,
                slot=rec.slot,
                agent=rec.name,
                request_id=job.request_id if job else None,
                pipeline=job.pipeline if job else None,
                run=job.run if job else None,
                started_at=rec.last_started_at,
                ended_at=info.at,
                exit_code=info.code,
                oom=info.oom,
                reason=info.reason,
            )
        )

    return record


async def serve(
    config: Config,
    *,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    paths: DaemonPaths,
    extra_labels: dict[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    ready: Callable[[Supervisor, ControlServer], None] | None = None,
) -> int:
    """Run a supervisor with its control socket until stopped; returns an exit code.

    Raises:
        AlreadyRunningError: another daemon holds the instance lock.
    """
    instance = instance_id(config)
    what = f"{config.azure.url} pool '{config.azure.pool}' agents '{config.agents.name_prefix}-*'"
    lock = InstanceLock(paths.lock)
    lock.acquire(what)
    history = JobHistory(paths.history)
    try:
        supervisor = Supervisor(
            config,
            api=api,
            runtime=runtime,
            tokens=tokens,
            mode="daemon",
            extra_labels=extra_labels,
            command=command,
            intent_store=IntentStore(paths.intent),
            on_job_finished=history_recorder(history, instance),
            agent_dir_root=str(paths.agents) if config.agents.docker_socket else None,
        )
        server = ControlServer(supervisor, paths.socket)
        await server.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Default: leave the agents running, so a restart of the daemon
            # (or of the whole host's service manager) never kills a job.
            loop.add_signal_handler(sig, supervisor.request_stop, False)
        log.info("supervising %s; control socket %s", what, paths.socket)
        if ready is not None:
            ready(supervisor, server)
        try:
            await supervisor.run()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
            await server.close()
            calls = getattr(runtime, "api_call_count", None)
            if isinstance(calls, int):
                # bench/bench_load.py reads this line: Docker API cost per job.
                log.info("docker api calls: %d", calls)
    finally:
        history.close()
        lock.release()
    return 0
