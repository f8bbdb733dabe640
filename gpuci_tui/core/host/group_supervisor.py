"""Several agent groups under one daemon: one `Supervisor` per group, one read per pool.

A configuration with ``[groups.NAME]`` tables runs one supervisor per group
(its own pool, image, count, GPUs and names), composed here: the groups that
share a pool share one `PoolObserver`, so the pool is read once per cycle
whatever the number of groups; their events go to one `Broadcaster`, tagged
with the group; the snapshot is the groups' snapshots side by side; commands
are routed by their ``group`` (``GROUP/SLOT`` on the command line).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.command_types import (
    Command,
    CommandResult,
    Drain,
    GpuClear,
    Pause,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from gpuci_tui.core.config.loader import Config, agent_groups, daemon_instance, for_group
from gpuci_tui.core.docker.agentspec import LABEL_GROUP
from gpuci_tui.core.engine.disk_gc import pull_refusal
from gpuci_tui.core.engine.preview import CommandPreview, preview
from gpuci_tui.core.engine.snapshots import pools_total, shared_pool
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.host.pool_observer import PoolObserver
from gpuci_tui.core.host.reporter import Broadcaster, GroupTap, Update
from gpuci_tui.core.host.supervisor import IntentStore, Supervisor, clear_gpu
from gpuci_tui.core.models import (
    DiskSnapshot,
    GroupSummary,
    HealthSnapshot,
    HealthState,
    PoolSummary,
    SupervisorSnapshot,
)
from gpuci_tui.core.protocols import AgentPoolApi, ContainerRuntime, TokenSource

if TYPE_CHECKING:
    from gpuci_tui.core.gpu.accounting import JobKey
    from gpuci_tui.core.host.gpu_gates import GpuGatekeeper
    from gpuci_tui.core.protocols import JobGpuNow

#: Worst first: the health shown for several pools is the worst of them.
_SEVERITY = [
    HealthState.AUTH_FAILED,
    HealthState.UNREACHABLE,
    HealthState.ERROR,
    HealthState.RATE_LIMITED,
    HealthState.UNKNOWN,
    HealthState.OK,
]


def worst(healths: list[HealthSnapshot]) -> HealthSnapshot:
    """The least healthy of several."""
    return min(healths, key=lambda h: _SEVERITY.index(h.state), default=HealthSnapshot())


class GroupSupervisor:
    """The supervisors of every agent group of one configuration, as one."""

    def __init__(
        self,
        config: Config,
        *,
        api: AgentPoolApi,
        runtime: ContainerRuntime,
        tokens: TokenSource,
        clock: Callable[[], float] = time.time,
        mode: str = "in-process",
        extra_labels: Mapping[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        intent_store: Callable[[str], IntentStore | None] | None = None,
        on_job_finished: Callable[[str, PoolObserver], Callable[[JobEnded], None] | None]
        | None = None,
        agent_dir_root: str | None = None,
        gpu_use: Callable[[JobKey], JobGpuNow | None] | None = None,
        reporter: Broadcaster | None = None,
        gatekeeper: GpuGatekeeper | None = None,
        disk: Callable[[], DiskSnapshot] | None = None,
    ) -> None:
        """One supervisor per group; ``intent_store``/``on_job_finished`` are per group name.

        ``on_job_finished`` also gets the group's pool observer, so a job recorder
        is built with the pool it reads from (its id, its backoff).
        ``gpu_use`` is shared by every group (see `Supervisor`): jobs are keyed by instance.
        A configuration without ``[groups]`` is one implicit group: its supervisor
        runs untagged (no group label, no group in its snapshots), exactly as a
        lone `Supervisor` would, and every command goes to it.
        ``reporter``: where every group's events go (default: a new `Broadcaster`), given
        when something built before the supervisors reports there too (the gatekeeper).
        ``gatekeeper``: the host's GPU admission and health watch, shared by every group.
        ``disk``: the latest reading of Docker's free space (None: no disk watch).
        """
        self.config = config
        self.api = api
        self.clock = clock
        self.mode = mode
        self.instance = daemon_instance(config)
        self.reporter = reporter or Broadcaster(clock)
        self.reporter.bind(self.snapshot)
        self.gatekeeper = gatekeeper
        """The host's GPU admission and health watch (``gpu clear``, the GPUs' states)."""
        self.disk = disk
        self.pools: dict[str, PoolObserver] = {}
        self.children: dict[str, Supervisor] = {}
        self.started_at: float | None = None
        groups = agent_groups(config)
        self.implicit = len(groups) == 1 and groups[0].implicit
        for group in groups:
            pool = self.pools.get(group.pool)
            if pool is None:
                pool = PoolObserver(
                    api,
                    group.pool,
                    clock=clock,
                    interval=config.supervisor.poll_interval,
                    report=self.reporter.event,
                )
                self.pools[group.pool] = pool
            self.children[group.name] = Supervisor(
                for_group(config, group),
                api=api,
                runtime=runtime,
                tokens=tokens,
                clock=clock,
                mode=mode,
                extra_labels=dict(extra_labels or {})
                if self.implicit
                else {**(extra_labels or {}), LABEL_GROUP: group.name},
                command=command,
                intent_store=intent_store(group.name) if intent_store else None,
                on_job_finished=on_job_finished(group.name, pool) if on_job_finished else None,
                agent_dir_root=agent_dir_root,
                reporter=GroupTap(self.reporter, "" if self.implicit else group.name),
                pool=pool,
                group="" if self.implicit else group.name,
                gpu_use=gpu_use,
                gatekeeper=gatekeeper,
                pull_refusal=self._pull_refusal if disk is not None else None,
            )

    # ------------------------------------------------------------------ running

    @property
    def events(self) -> Any:
        """The recent events of every group."""
        return self.reporter.events

    async def run(self) -> None:
        """Run every group (and read each pool) until they all stop."""
        self.started_at = self.clock()
        readers = [
            asyncio.ensure_future(pool.run(self._fan_out(name)))
            for name, pool in self.pools.items()
        ]
        try:
            await asyncio.gather(*(child.run() for child in self.children.values()))
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.wait(readers, timeout=5.0)
            self.reporter.publish_now()

    def _fan_out(self, pool: str) -> Callable[[Any], None]:
        members = [c for c in self.children.values() if c.config.azure.pool == pool]

        def deliver(obs: Any) -> None:
            for child in members:
                child.deliver(obs)

        return deliver

    def request_stop(self, drain: bool = False) -> None:
        """Stop every group (agents stay running unless ``drain``)."""
        for child in self.children.values():
            child.request_stop(drain)

    def subscribe(self) -> asyncio.Queue[Update]:
        """Events of every group and the merged snapshot after every change."""
        return self.reporter.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        self.reporter.unsubscribe(queue)

    # ------------------------------------------------------------------ state

    def snapshot(self) -> SupervisorSnapshot:
        """Every group's slots side by side, the pools, the worst health, the disk."""
        snap = self._groups_snapshot()
        return snap if self.disk is None else replace(snap, disk=self.disk())

    def _pull_refusal(self) -> str | None:
        """Why no pull may start now (Docker's disk below the hard floor), or None."""
        disk = self.disk() if self.disk is not None else None
        return (
            None
            if disk is None
            else pull_refusal(disk.state, disk.free_bytes, disk.hard_floor_bytes)
        )

    def _groups_snapshot(self) -> SupervisorSnapshot:
        if self.implicit:
            # One implicit group: the lone supervisor's own snapshot, unchanged.
            return next(iter(self.children.values())).snapshot()
        snaps = {name: child.snapshot() for name, child in self.children.items()}
        first = next(iter(snaps.values()))
        by_pool: dict[str, list[PoolSummary]] = {}
        for snap in snaps.values():
            by_pool.setdefault(snap.pool, []).append(snap.pool_summary)
        summaries = [shared_pool(group) for group in by_pool.values()]
        total = pools_total(summaries)
        return SupervisorSnapshot(
            taken_at=self.clock(),
            org_url=self.config.azure.url,
            pool=total.name,
            instance=self.instance,
            desired_count=sum(s.desired_count for s in snaps.values()),
            paused=all(s.paused for s in snaps.values()),
            stopping=any(s.stopping for s in snaps.values()),
            mode=self.mode,
            pid=os.getpid(),
            slots=tuple(slot for snap in snaps.values() for slot in snap.slots),
            pool_summary=total,
            azure=worst([p.health for p in self.pools.values()]),
            docker=worst([s.docker for s in snaps.values()]),
            azure_requests=self.api.request_count,
            started_at=self.started_at,
            standby=any(s.standby for s in snaps.values()),
            groups=tuple(
                GroupSummary(
                    name=name,
                    pool=child.config.azure.pool,
                    name_prefix=child.config.agents.name_prefix,
                    desired_count=snaps[name].desired_count,
                    standby=child.config.agents.standby,
                )
                for name, child in self.children.items()
            ),
            pools=tuple(summaries),
            protocol=first.protocol,
            gpu_accounting=any(s.gpu_accounting for s in snaps.values()),
            gpu_gates=() if self.gatekeeper is None else self.gatekeeper.gates,
            rollouts=tuple(r for snap in snaps.values() for r in snap.rollouts),
        )

    # ------------------------------------------------------------------ commands

    def _route(self, command: Command) -> tuple[list[Supervisor], str | None]:
        """The groups ``command`` is for, or why it cannot be routed."""
        names = ", ".join(self.children)
        if self.implicit:
            return list(self.children.values()), None
        if isinstance(command, Pause | Unpause | Stop):
            return list(self.children.values()), None
        group = getattr(command, "group", None)
        if group is not None:
            child = self.children.get(group)
            if child is None:
                return [], f"no agent group {group!r} (groups are {names})"
            return [child], None
        if isinstance(command, Scale):
            return [], f"scale: name the group to scale (groups are {names})"
        if isinstance(command, Drain | Resume | Restart) and command.slots is not None:
            example = f"{next(iter(self.children))}/{command.slots[0]}"
            return [], f"name the group of the slots, e.g. {example} (groups are {names})"
        return list(self.children.values()), None

    async def execute(self, command: Command) -> CommandResult:
        """Carry out ``command`` on the groups it is for."""
        if isinstance(command, GpuClear):
            result = clear_gpu(self.gatekeeper, command)
            self.reporter.event("command", f"gpu_clear: {result.message}")
            return result
        targets, problem = self._route(command)
        if problem is not None:
            return CommandResult(False, problem)
        results = [await child.execute(command) for child in targets]
        if len(results) == 1:
            return results[0]
        message = "; ".join(
            f"{child.group}: {result.message}"
            for child, result in zip(targets, results, strict=True)
        )
        return CommandResult(all(r.ok for r in results), message)

    def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do, over the groups it is for."""
        name = type(command).__name__.lower()
        if isinstance(command, GpuClear):
            return preview(self.snapshot(), command)
        targets, problem = self._route(command)
        if problem is not None:
            return CommandPreview(name, False, problem)
        answers = [child.preview(command) for child in targets]
        failed = next((a for a in answers if not a.ok), None)
        if failed is not None:
            return failed
        return CommandPreview(name, True, effects=tuple(e for a in answers for e in a.effects))
