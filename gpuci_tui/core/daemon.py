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
from functools import partial
from pathlib import Path
from typing import IO

from .accounting import JobAccountant
from .config import Config, agent_groups, for_group, instance_id
from .control_server import ControlServer
from .gpu_gates import GpuGatekeeper
from .gpu_watch import GpuWatch, agent_owners
from .group_supervisor import GroupSupervisor
from .handle import Supervised
from .history import IntentStore, JobHistory
from .job_recorder import JobRecorder
from .memory import trim_now_and_then
from .metrics import Metrics, follow
from .metrics_server import MetricsServer
from .protocols import AgentPoolApi, ContainerRuntime, GpuciError, GpuSampler, TokenSource
from .supervisor import Supervisor
from .token_sweeper import TokenFileRemover, TokenSweeper

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
    accountant = JobAccountant(min_interval=config.gpu.sample_interval) if gpu else None
    watch_task: asyncio.Task[None] | None = None
    metrics_task: asyncio.Task[None] | None = None
    sweep_task: asyncio.Task[None] | None = None
    trim_task = asyncio.get_running_loop().create_task(trim_now_and_then())
    recorders: dict[str, JobRecorder] = {}
    metrics = Metrics(groups=(g.name for g in groups)) if config.metrics.listen else None
    exporter = MetricsServer(metrics.registry, config.metrics.listen) if metrics else None
    try:
        if exporter is not None:
            exporter.start()  # first: a taken port must fail before anything else starts
        supervisor, children = _supervisors(
            config, api=api, runtime=runtime, tokens=tokens, paths=paths, history=history,
            accountant=accountant, extra_labels=extra_labels, command=command,
            recorders=recorders,
        )  # fmt: skip
        if metrics is not None:
            _wire_metrics(metrics, api, recorders)
            metrics_task = asyncio.get_running_loop().create_task(follow(supervisor, metrics))
        server = ControlServer(supervisor, paths.socket)
        await server.start()
        if isinstance(runtime, TokenFileRemover):
            # Whatever the image does, no job can read the PAT once its agent is online.
            sweep_task = asyncio.get_running_loop().create_task(
                TokenSweeper(runtime, supervisor).follow()
            )
        if gpu is not None and accountant is not None:
            watch = GpuWatch(
                gpu,
                accountant,
                lambda: {k: v for c in children for k, v in agent_owners(c.snapshot()).items()},
                interval=config.gpu.sample_interval,
            )
            supervisor.gpu_watch = watch
            # One NVML pass per sample feeds the accounting and every group's GPU gates.
            gatekeeper = GpuGatekeeper(
                children,
                lambda kind, message: supervisor.reporter.event(kind, message),
                store=paths.intent.parent / paths.intent.name.replace("intent", "gpu-health"),
            )
            watch.gatekeeper = gatekeeper
            supervisor.gatekeeper = gatekeeper
            for child in children:
                child.gatekeeper = gatekeeper
            if metrics is not None:
                metrics.gpu_frame = lambda: watch.latest
            watch_task = asyncio.get_running_loop().create_task(watch.run())
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
            for task in (watch_task, metrics_task, sweep_task, trim_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            for recorder in recorders.values():
                await recorder.drain()
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


def _supervisors(
    config: Config,
    *,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    paths: DaemonPaths,
    history: JobHistory,
    accountant: JobAccountant | None,
    extra_labels: dict[str, str] | None,
    command: tuple[str, ...] | None,
    recorders: dict[str, JobRecorder],
) -> tuple[Supervised, list[Supervisor]]:
    """The daemon's supervisor (one, or one per group) and the per-group supervisors.

    ``recorders`` receives each group's job recorder, by group name ("" without groups).
    """

    def recorder_for(group_config: Config, name: str = "") -> JobRecorder:
        recorder = JobRecorder(
            history, api, instance_id(group_config), pool_id=lambda: None, accountant=accountant
        )
        recorders[name] = recorder
        return recorder

    # Busy slots show their job's GPU figures of the latest sweep (when GPUs are sampled).
    gpu_use = accountant.current if accountant is not None else None

    def agent_dir(group_config: Config) -> str | None:
        return str(paths.agents) if group_config.agents.docker_socket else None

    if not config.groups:
        recorder = recorder_for(config)
        single = Supervisor(
            config,
            api=api,
            runtime=runtime,
            tokens=tokens,
            mode="daemon",
            extra_labels=extra_labels,
            command=command,
            intent_store=IntentStore(paths.intent),
            on_job_finished=recorder,
            agent_dir_root=agent_dir(config),
            gpu_use=gpu_use,
        )
        recorder.pool_id = lambda: single.pool.pool_id
        recorder.blocked_until = single.pool.blocked_until
        return single, [single]
    by_group = {g.name: for_group(config, g) for g in agent_groups(config)}
    made: dict[str, JobRecorder] = {}

    def on_job(name: str) -> JobRecorder:
        made[name] = recorder_for(by_group[name], name)
        return made[name]

    group = GroupSupervisor(
        config,
        api=api,
        runtime=runtime,
        tokens=tokens,
        mode="daemon",
        extra_labels=extra_labels,
        command=command,
        intent_store=lambda name: IntentStore(
            DaemonPaths.for_instance(instance_id(by_group[name])).intent
        ),
        on_job_finished=on_job,
        agent_dir_root=str(paths.agents)
        if any(c.agents.docker_socket for c in by_group.values())
        else None,
        gpu_use=gpu_use,
    )
    for name, child in group.children.items():
        made[name].pool_id = _pool_of(child)
        made[name].blocked_until = child.pool.blocked_until
    return group, list(group.children.values())


def _wire_metrics(metrics: Metrics, api: AgentPoolApi, recorders: dict[str, JobRecorder]) -> None:
    """Feed ``metrics`` from the job recorders and the Azure DevOps client."""
    for group, recorder in recorders.items():
        recorder.on_record = partial(metrics.job_recorded, group)
    # Only the real client counts HTTP attempts; a test double simply has no such hook.
    observe = getattr(api, "observe_requests", None)
    if callable(observe):
        observe(metrics.azure_response)


def _pool_of(child: Supervisor) -> Callable[[], int | None]:
    return lambda: child.pool.pool_id
