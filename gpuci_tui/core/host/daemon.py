"""``gpuci-tui run``: the supervisor in the foreground, with its control socket.

One daemon per agent set (organisation + pool + name prefix): an exclusive
``flock`` on a lock file in the state directory makes a second ``run`` for the
same set refuse at once with a clear message. SIGINT/SIGTERM stop the
supervisor and leave the agent containers running (``gpuci-tui stop --drain``
drains first). With ``[metrics] listen`` set, Prometheus metrics are served
there for the daemon's lifetime (`metrics`, `metrics_server`).
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

from gpuci_tui.core.config.loader import Config, agent_groups, for_group, instance_id
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.control_server import ControlServer
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.host.memory import trim_now_and_then
from gpuci_tui.core.host.metrics import Metrics, follow
from gpuci_tui.core.host.metrics_server import MetricsServer
from gpuci_tui.core.host.token_sweeper import TokenFileRemover, TokenSweeper
from gpuci_tui.core.protocols import AgentPoolApi, ContainerRuntime, GpuSampler, TokenSource
from gpuci_tui.core.store.history import IntentFile, JobHistory

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
        from gpuci_tui.core.config import paths

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


async def serve(
    config: Config,
    *,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    paths: DaemonPaths,
    extra_labels: dict[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    ready: Callable[[Supervised, ControlServer], None] | None = None,
    gpu: GpuSampler | None = None,
) -> int:
    """Run a supervisor with its control socket until stopped; returns an exit code.

    A configuration with ``[groups.NAME]`` tables runs a `GroupSupervisor` (one
    supervisor per group; a lock per group too, so no other daemon runs one of
    them). With a ``gpu`` sampler, the GPUs are sampled every
    ``[gpu] sample_interval`` and each finished job's GPU use is written to the
    history with it.

    Raises:
        AlreadyRunningError: another daemon holds the instance lock (or a group's).
        MetricsListenError: ``[metrics] listen`` cannot be bound (e.g. the port is taken).
    """
    groups = agent_groups(config)
    what = ", ".join(f"pool '{g.pool}' agents '{g.agents.name_prefix}-*'" for g in groups)
    what = f"{config.azure.url} {what}"
    locks = [InstanceLock(paths.lock)]
    if config.groups:
        locks += [
            InstanceLock(DaemonPaths.for_instance(instance_id(for_group(config, g))).lock)
            for g in groups
        ]
    taken: list[InstanceLock] = []
    try:
        for lock in locks:
            lock.acquire(what)
            taken.append(lock)
    except AlreadyRunningError:
        for lock in taken:
            lock.release()
        raise
    history = JobHistory(
        paths.history,
        keep_days=config.history.keep_days,
        max_rows=config.history.max_rows,
    )
    watch_task: asyncio.Task[None] | None = None
    metrics_task: asyncio.Task[None] | None = None
    sweep_task: asyncio.Task[None] | None = None
    trim_task = asyncio.get_running_loop().create_task(trim_now_and_then())
    metrics = Metrics(groups=(g.name for g in groups)) if config.metrics.listen else None
    exporter = MetricsServer(metrics.registry, config.metrics.listen) if metrics else None
    try:
        if exporter is not None:
            exporter.start()  # first: a taken port must fail before anything else starts
        parts = assemble(
            config,
            api=api,
            runtime=runtime,
            tokens=tokens,
            history=history,
            mode="daemon",
            intent_store=intent_stores(config, paths),
            gpu=gpu,
            extra_labels=extra_labels,
            command=command,
            agent_dir_root=str(paths.agents)
            if any(g.agents.docker_socket for g in groups)
            else None,
            on_record=metrics.job_recorded if metrics is not None else None,
            gpu_health_store=paths.intent.with_name(
                paths.intent.name.replace("intent", "gpu-health")
            ),
        )
        supervisor = parts.supervisor
        if metrics is not None:
            _observe_requests(metrics, api)
            if parts.watch is not None:
                watch = parts.watch
                metrics.gpu_frame = lambda: watch.latest
            metrics_task = asyncio.get_running_loop().create_task(follow(supervisor, metrics))
        server = ControlServer(supervisor, paths.socket, logs_tail=runtime.logs_tail)
        await server.start()
        if isinstance(runtime, TokenFileRemover):
            # Whatever the image does, no job can read the PAT once its agent is online.
            sweep_task = asyncio.get_running_loop().create_task(
                TokenSweeper(runtime, supervisor).follow()
            )
        watch_task = parts.start_watch()
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
            for task in (metrics_task, sweep_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await parts.close(watch_task)
            calls = getattr(runtime, "api_call_count", None)
            if isinstance(calls, int):
                # bench/bench_load.py reads this line: Docker API cost per job.
                log.info("docker api calls: %d", calls)
    finally:
        trim_task.cancel()
        if exporter is not None:
            exporter.close()
        history.close()
        for lock in reversed(taken):
            lock.release()
    return 0


def intent_stores(config: Config, paths: DaemonPaths) -> Callable[[str], IntentFile]:
    """Each group's saved intent: ``paths.intent`` without groups, else the group's own file."""
    if not config.groups:
        return lambda name: IntentFile(paths.intent)
    by_group = {g.name: for_group(config, g) for g in agent_groups(config)}
    return lambda name: IntentFile(DaemonPaths.for_instance(instance_id(by_group[name])).intent)


def _observe_requests(metrics: Metrics, api: AgentPoolApi) -> None:
    """Feed ``metrics`` with the Azure DevOps client's HTTP attempts."""
    # Only the real client counts HTTP attempts; a test double simply has no such hook.
    observe = getattr(api, "observe_requests", None)
    if callable(observe):
        observe(metrics.azure_response)
