"""One assembly of the supervisor and its parts: daemon, demo and ``console --foreground``.

Every way of running agents builds the same thing here: a `GroupSupervisor`
(a configuration without ``[groups]`` is one implicit group), a `JobRecorder`
per group writing finished jobs to the history, the saved intent of each group,
and, with a GPU sampler, a `JobAccountant` fed by a `GpuWatch` so busy slots
show their job's GPU use and history rows carry it. Each part gets what it
needs when it is constructed; nothing is patched in afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from gpuci_tui.core.config.loader import Config, agent_groups, for_group, instance_id
from gpuci_tui.core.gpu.accounting import JobAccountant, container_owners
from gpuci_tui.core.host.gpu_gates import GpuGatekeeper
from gpuci_tui.core.host.gpu_watch import GpuWatch
from gpuci_tui.core.host.group_supervisor import GroupSupervisor
from gpuci_tui.core.host.job_recorder import JobRecorder
from gpuci_tui.core.host.pool_observer import PoolObserver
from gpuci_tui.core.host.supervisor import IntentStore, Supervisor
from gpuci_tui.core.protocols import AgentPoolApi, ContainerRuntime, GpuSampler, TokenSource
from gpuci_tui.core.store.history import JobHistory, JobRecord

__all__ = ["Assembly", "assemble"]


@dataclass
class Assembly:
    """A supervisor with its recorders and GPU watch, ready to run."""

    supervisor: GroupSupervisor
    recorders: dict[str, JobRecorder]
    """Each group's job recorder, by group name ("" for the implicit group)."""
    watch: GpuWatch | None
    """Samples the GPUs into per-job accounting (None without a sampler)."""

    @property
    def children(self) -> list[Supervisor]:
        """The per-group supervisors."""
        return list(self.supervisor.children.values())

    def start_watch(self) -> asyncio.Task[None] | None:
        """Start sampling the GPUs in the running loop (None without a sampler)."""
        if self.watch is None:
            return None
        return asyncio.get_running_loop().create_task(self.watch.run())

    async def close(self, watch_task: asyncio.Task[None] | None) -> None:
        """Stop the GPU watch and write the history rows still in flight."""
        if watch_task is not None:
            watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch_task
        for recorder in self.recorders.values():
            await recorder.drain()


def assemble(
    config: Config,
    *,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    history: JobHistory,
    mode: str,
    intent_store: Callable[[str], IntentStore | None] | None = None,
    gpu: GpuSampler | None = None,
    sample_interval: float | None = None,
    extra_labels: Mapping[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    agent_dir_root: str | None = None,
    on_record: Callable[[str, JobRecord], None] | None = None,
    gpu_health_store: Path | None = None,
) -> Assembly:
    """Build the supervisor of ``config`` and its parts.

    Args:
        config: the configuration (with or without ``[groups]``).
        api: Azure DevOps client.
        runtime: container engine.
        tokens: where the PAT comes from.
        history: where finished jobs are written.
        mode: ``daemon`` or ``in-process``, shown to operators.
        intent_store: each group's saved intent, by group name.
        gpu: the GPU sampler; None: no GPU accounting.
        sample_interval: seconds between GPU samples (default ``[gpu] sample_interval``).
        extra_labels: more container labels (tests, demo).
        command: override the image's command (tests).
        agent_dir_root: per-slot agent directories on the host (``agents.docker_socket``).
        on_record: called with the group name and each history row written (metrics).
        gpu_health_store: where latched GPU faults are kept across restarts (None: not kept).
    """
    groups = agent_groups(config)
    by_group = {g.name: for_group(config, g) for g in groups}
    # The implicit group has no name on the outside (metrics, snapshots): "".
    implicit = len(groups) == 1 and groups[0].implicit
    interval = config.gpu.sample_interval if sample_interval is None else sample_interval
    accountant = JobAccountant(min_interval=interval) if gpu is not None else None
    recorders: dict[str, JobRecorder] = {}

    def recorder_for(name: str, pool: PoolObserver) -> JobRecorder:
        label = "" if implicit else name
        recorder = JobRecorder(
            history,
            api,
            instance_id(by_group[name]),
            pool_id=lambda: pool.pool_id,
            accountant=accountant,
            on_record=partial(on_record, label) if on_record is not None else None,
            blocked_until=pool.blocked_until,
        )
        recorders[label] = recorder
        return recorder

    supervisor = GroupSupervisor(
        config,
        api=api,
        runtime=runtime,
        tokens=tokens,
        mode=mode,
        extra_labels=extra_labels,
        command=command,
        intent_store=intent_store,
        on_job_finished=recorder_for,
        agent_dir_root=agent_dir_root,
        # Busy slots show their job's GPU figures of the latest sweep.
        gpu_use=accountant.current if accountant is not None else None,
    )
    watch = None
    if gpu is not None and accountant is not None:
        children = list(supervisor.children.values())
        watch = GpuWatch(
            gpu,
            accountant,
            lambda: {k: v for c in children for k, v in container_owners(c.snapshot()).items()},
            interval=interval,
        )
        # One NVML pass per sample feeds the accounting and every group's GPU gates
        # (admission and health), in the daemon, the demo and --foreground alike.
        gatekeeper = GpuGatekeeper(
            children,
            lambda kind, message: supervisor.reporter.event(kind, message),
            store=gpu_health_store,
        )
        watch.gatekeeper = gatekeeper
        supervisor.gatekeeper = gatekeeper
        for child in children:
            child.gatekeeper = gatekeeper
    return Assembly(supervisor, recorders, watch)
