"""``gpuci-tui run``: the supervisor in the foreground, with its control socket.

One daemon per agent set (organisation + pool + name prefix): an exclusive
``flock`` on a lock file in the state directory makes a second ``run`` for the
same set refuse at once with a clear message. SIGINT/SIGTERM stop the
supervisor and leave the agent containers running (``gpuci-tui stop --drain``
drains first). SIGHUP is ``gpuci-tui reload`` (systemd's ``ExecReload=kill -HUP
$MAINPID``): the file is read again and what can change live does. With ``[metrics] listen`` set, Prometheus metrics are served
there for the daemon's lifetime (`metrics`, `metrics_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from gpuci_tui.core.command_types import Reload
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.host.assemble import open_assembly
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.host.control.socket_links import SocketLinks
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.host.instance import (
    AlreadyRunningError,
    DaemonPaths,
    InstanceLock,
    agent_set,
    intent_stores,
)
from gpuci_tui.core.host.memory import trim_now_and_then
from gpuci_tui.core.host.metrics.server import MetricsServer
from gpuci_tui.core.host.observers.token_sweeper import TokenFileRemover, TokenSweeper
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.protocols import AgentPoolApi, ContainerRuntime, GpuSampler, TokenSource

__all__ = ["AlreadyRunningError", "DaemonPaths", "InstanceLock", "intent_stores", "serve"]

log = logging.getLogger("gpuci_tui.daemon")


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
    signals: bool = True,
) -> int:
    """Run a supervisor with its control socket until stopped; returns an exit code.

    A configuration with ``[groups.NAME]`` tables runs a `GroupSupervisor` (one
    supervisor per group; a lock per group too, so no other daemon runs one of
    them). With a ``gpu`` sampler, the GPUs are sampled every
    ``[gpu] sample_interval`` and each finished job's GPU use is written to the
    history with it. ``signals`` False leaves SIGINT, SIGTERM and SIGHUP to the
    caller (the demo serves in a thread beside its console: only the main thread
    can take signals, and its handlers end the console and then the daemon).

    Raises:
        AlreadyRunningError: another supervisor (a daemon, or a console --foreground)
            holds the instance lock (or a group's).
        MetricsListenError: ``[metrics] listen`` cannot be bound (e.g. the port is taken).
    """
    # The instance's lock(s) first: a second supervisor must refuse before it binds anything.
    parts = open_assembly(
        config,
        paths=paths,
        api=api,
        runtime=runtime,
        tokens=tokens,
        mode="daemon",
        gpu=gpu,
        extra_labels=extra_labels,
        command=command,
        metrics=bool(config.metrics.listen),
    )
    supervisor = parts.supervisor
    sweep_task: asyncio.Task[None] | None = None
    trim_task = asyncio.get_running_loop().create_task(trim_now_and_then())
    exporter = (
        MetricsServer(parts.metrics.registry, config.metrics.listen)
        if parts.metrics is not None
        else None
    )
    try:
        if exporter is not None:
            exporter.start()  # before anything runs: a taken port fails the start
        server = ControlServer(
            supervisor, paths.socket, logs_tail=runtime.logs_tail, history_path=paths.history
        )
        await server.start()
        # The CLI finds the daemon from the file: after an edit and a reload, too.
        links = SocketLinks(paths.socket)
        links.at_start(config)
        supervisor.on_reload(lambda: links.follow(supervisor.config))
        if isinstance(runtime, TokenFileRemover):
            # Whatever the image does, no job can read the PAT once its agent is online.
            sweep_task = asyncio.get_running_loop().create_task(
                TokenSweeper(runtime, supervisor).follow()
            )
        loop = asyncio.get_running_loop()
        reloads: set[asyncio.Task[None]] = set()

        def hangup() -> None:
            task = loop.create_task(_reload(supervisor))
            reloads.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(reloads.discard)

        if signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                # Default: leave the agents running, so a restart of the daemon
                # (or of the whole host's service manager) never kills a job.
                loop.add_signal_handler(sig, supervisor.request_stop, False)
            loop.add_signal_handler(signal.SIGHUP, hangup)
        log.info("supervising %s; control socket %s", agent_set(config), paths.socket)
        parts.start()
        if ready is not None:
            ready(supervisor, server)
        try:
            await parts.stopped()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signals else ():
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
            links.close()
            await server.close()
            if sweep_task is not None:
                sweep_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweep_task
    finally:
        await parts.close()  # the history rows in flight, then the history and the locks
        calls = getattr(runtime, "api_call_count", None)
        if isinstance(calls, int):
            # bench/bench_load.py reads this line: Docker API cost per job.
            log.info("docker api calls: %d", calls)
        trim_task.cancel()
        if exporter is not None:
            exporter.close()
    return 0


async def _reload(supervisor: GroupSupervisor) -> None:
    """SIGHUP: the same reload as ``gpuci-tui reload`` (its answer goes to the log and events)."""
    supervisor.reporter.event("reload", f"SIGHUP: reading {supervisor.config.path} again")
    try:
        result = await supervisor.execute(Reload())
    except Exception:  # a signal has no one to answer: the log says it, the daemon goes on
        log.exception("reload on SIGHUP failed")
        return
    (log.info if result.ok else log.warning)("reload on SIGHUP: %s", result.message)
