"""Several agent groups under one daemon: one `Supervisor` per group, one read per pool.

A configuration with ``[groups.NAME]`` tables runs one supervisor per group
(its own pool, image, count, GPUs and names), composed here: the groups that
share a pool share one `PoolObserver`, so the pool is read once per cycle
whatever the number of groups; their events go to one `Broadcaster`, tagged
with the group; the snapshot is the groups' snapshots side by side; commands
are routed by their ``group`` (``GROUP/SLOT`` on the command line; `group_commands`).
``reload`` (`group_reload`) changes the groups while they run: every group's
supervisor, from the start or added by a reload, is built by one factory
(`GroupSupervisor.add_group`); a removed group drains and is forgotten once empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.command_types import Command, CommandResult, GpuClear, Prune, Reload
from gpuci_tui.core.config.loader import (
    AgentGroup,
    Config,
    agent_groups,
    daemon_instance,
    for_group,
)
from gpuci_tui.core.docker.agentspec import LABEL_GROUP
from gpuci_tui.core.engine.disk_gc import pull_refusal
from gpuci_tui.core.engine.preview import CommandPreview, preview
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.host.gpus.gates import clear_gpu
from gpuci_tui.core.host.images.agent_updates import AgentUpdates
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.stale_watch import StaleWatch
from gpuci_tui.core.host.reporter import Broadcaster, GroupTap, Update
from gpuci_tui.core.host.supervision.group_commands import execute_routed, preview_routed
from gpuci_tui.core.host.supervision.group_reload import preview_reload, reload
from gpuci_tui.core.host.supervision.group_snapshot import merged_snapshot
from gpuci_tui.core.host.supervision.group_stale import pool_scope, pool_stale_watch, prune_pools
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import (
    DiskSnapshot,
    SupervisorSnapshot,
)
from gpuci_tui.core.protocols import (
    AgentPoolApi,
    ContainerRuntime,
    TokenSource,
    UsageReporting,
)
from gpuci_tui.core.store.intent import IntentStore

if TYPE_CHECKING:
    from gpuci_tui.core.gpu.accounting import JobKey
    from gpuci_tui.core.gpu_readings import JobGpuNow
    from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
    from gpuci_tui.core.host.images.puller import ImagePuller


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
        intent_store: Callable[[str, Config], IntentStore | None] | None = None,
        on_job_finished: Callable[[str, PoolObserver, Config], Callable[[JobEnded], None] | None]
        | None = None,
        agent_dir_root: str | None = None,
        gpu_use: Callable[[JobKey], JobGpuNow | None] | None = None,
        reporter: Broadcaster | None = None,
        gatekeeper: GpuGatekeeper | None = None,
        disk: Callable[[], DiskSnapshot] | None = None,
        claim_group: Callable[[Config], Callable[[], None]] | None = None,
        puller: ImagePuller | None = None,
        agent_versions: AgentUpdates | None = None,
    ) -> None:
        """One supervisor per group; ``intent_store``/``on_job_finished`` are per group
        (its name and its configuration, as `for_group` makes it).

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
        ``claim_group``: takes the lock of a group a reload adds (see `add_group`).
        ``puller``: the host's image puller, one for every group (None: never pulls); a
        running pull's progress is the reason of the slots waiting for it.
        ``agent_versions``: the agent versions and package cache (None: not watched).
        """
        self.config = config
        self.config_loaded_at = clock()
        """When ``config`` was read from its file: at start, then at each applied reload."""
        self.api = api
        self.clock = clock
        self.mode = mode
        self.instance = daemon_instance(config)
        self.reporter = reporter or Broadcaster(clock)
        self.reporter.bind(self.snapshot)
        self.gatekeeper = gatekeeper
        """The host's GPU admission and health watch (``gpu clear``, the GPUs' states)."""
        self.disk = disk
        self.puller = puller
        self.agent_versions = agent_versions
        self.pools: dict[str, PoolObserver] = {}
        self.stale: dict[str, StaleWatch] = {}
        """Each pool's stale registrations (`host.stale_watch`)."""
        self.children: dict[str, Supervisor] = {}
        self.started_at: float | None = None
        groups = agent_groups(config)
        self.implicit = len(groups) == 1 and groups[0].implicit
        self.claim_group = claim_group
        """Takes a group's lock when a reload adds it (returns its release); None: no locks."""
        self.retiring: set[str] = set()
        """Groups a reload removed: they drain, and are forgotten once empty."""
        self._releases: dict[str, Callable[[], None]] = {}
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._grown = asyncio.Event()
        self._running = False
        self._reload_listeners: list[Callable[[], None]] = []
        self.cuda_refusal: Callable[[Config], str] | None = None
        """Why a group's image cannot run on the driver (`CudaGuard.refusal_now`): a reload
        refuses such an image before any container starts. None: no CUDA check."""
        self._capabilities: Callable[[Config, int], Mapping[str, str]] | None = None
        # One factory for the groups of the start and those a reload adds.
        self._build: Callable[[Config, AgentGroup, PoolObserver], Supervisor] = partial(
            self._new_child,
            runtime=runtime,
            tokens=tokens,
            extra_labels=extra_labels,
            command=command,
            intent_store=intent_store,
            on_job_finished=on_job_finished,
            agent_dir_root=agent_dir_root,
            gpu_use=gpu_use,
        )
        for group in groups:
            self.add_group(config, group)
        if agent_versions is not None:
            agent_versions.listeners.append(self._tell_packages)

    def _new_child(
        self,
        config: Config,
        group: AgentGroup,
        pool: PoolObserver,
        *,
        runtime: ContainerRuntime,
        tokens: TokenSource,
        extra_labels: Mapping[str, str] | None,
        command: tuple[str, ...] | None,
        intent_store: Callable[[str, Config], IntentStore | None] | None,
        on_job_finished: Callable[[str, PoolObserver, Config], Callable[[JobEnded], None] | None]
        | None,
        agent_dir_root: str | None,
        gpu_use: Callable[[JobKey], JobGpuNow | None] | None,
    ) -> Supervisor:
        own = for_group(config, group)
        child = Supervisor(
            own,
            api=self.api,
            runtime=runtime,
            tokens=tokens,
            clock=self.clock,
            mode=self.mode,
            extra_labels=dict(extra_labels or {})
            if self.implicit
            else {**(extra_labels or {}), LABEL_GROUP: group.name},
            command=command,
            intent_store=intent_store(group.name, own) if intent_store else None,
            on_job_finished=on_job_finished(group.name, pool, own) if on_job_finished else None,
            agent_dir_root=agent_dir_root,
            reporter=GroupTap(self.reporter, "" if self.implicit else group.name),
            pool=pool,
            group="" if self.implicit else group.name,
            gpu_use=gpu_use,
            gatekeeper=self.gatekeeper,
            pull_refusal=self._pull_refusal if self.disk is not None else None,
            puller=self.puller,
            agent_package=self.agent_versions.mount_for_start if self.agent_versions else None,
        )
        child.executor.capabilities = self._capabilities
        return child

    def add_group(self, config: Config, group: AgentGroup) -> Supervisor:
        """Build the supervisor of ``group`` of ``config`` (and its pool's reader if new).

        While running (a reload added the group), it starts at once. Raises what
        `claim_group` raises (`AlreadyRunningError`) when it cannot take the group's lock.
        """
        if self._running and self.claim_group is not None:
            self._releases[group.name] = self.claim_group(for_group(config, group))
        pool = self.pools.get(group.pool)
        if pool is None:
            pool = PoolObserver(
                self.api,
                group.pool,
                clock=self.clock,
                interval=config.supervisor.poll_interval,
                report=self.reporter.event,
                # The groups in the pool at each read: a reload adds and removes them.
                scope=partial(pool_scope, self, group.pool),
                role_retry=config.supervisor.role_retry,
            )
            self.pools[group.pool] = pool
            self.stale[group.pool] = pool_stale_watch(self, group.pool, pool)
        child = self._build(config, group, pool)
        self.children[group.name] = child
        if self._running:
            # At start the first check tells them (before it, the images' agents are not read).
            self._tell_packages()
            self._start(group.name, child)
        return child

    def _tell_packages(self) -> None:
        """Each group's engine learns the agent package its new containers get (after every
        check, a reload, a group added): containers without it are then outdated.
        """
        for child in list(self.children.values()):
            if self.agent_versions is not None:
                child.deliver(self.agent_versions.cached_for(child.config.agents.image))

    def retire_group(self, name: str) -> None:
        """Drain the group ``name`` (no job is killed) and forget it once empty."""
        child = self.children.get(name)
        if child is None or name in self.retiring:
            return
        self.retiring.add(name)
        # Stop(drain) is not saved as intent: the group comes back as it was if re-added.
        child.request_stop(drain=True)

    def advertise(self, capabilities: Callable[[Config, int], Mapping[str, str]]) -> None:
        """Give every group's agents their slot's GPU capabilities (now and after a reload)."""
        self._capabilities = capabilities
        for child in self.children.values():
            child.executor.capabilities = capabilities

    def on_reload(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every applied reload (e.g. the CUDA check of the new images)."""
        self._reload_listeners.append(listener)

    def reloaded(self) -> None:
        """Tell the listeners a reload was applied (`group_reload` calls it)."""
        self._tell_packages()  # a new image may bake another agent
        for listener in self._reload_listeners:
            listener()

    def _start(self, name: str, child: Supervisor) -> None:
        """Run ``child`` (and its pool's reader when the pool has none yet)."""
        pool = child.config.azure.pool
        if pool not in self._readers:
            self._readers[pool] = asyncio.ensure_future(self.pools[pool].run(self._fan_out(pool)))
        self._runs[name] = asyncio.ensure_future(child.run())
        self._grown.set()

    def _forget(self, name: str) -> None:
        """A retired group is empty and stopped: drop it, its pool's reader if unused, its lock."""
        child = self.children.pop(name)
        self.retiring.discard(name)
        pool = child.config.azure.pool
        if not any(c.config.azure.pool == pool for c in self.children.values()):
            reader = self._readers.pop(pool, None)
            if reader is not None:
                reader.cancel()
            self.pools.pop(pool, None)
            watch = self.stale.pop(pool, None)
            if watch is not None:
                watch.close()
        release = self._releases.pop(name, None)
        if release is not None:
            release()
        if child.state.stop_drain:
            self.reporter.event("group_removed", f"group {name} drained and removed")
        else:  # the daemon stopped before the group was empty: its agents stay, as on any stop
            self.reporter.event("group_removed", f"group {name} removed before it drained")
        self.reporter.changed()

    # ------------------------------------------------------------------ running

    @property
    def events(self) -> Any:
        """The recent events of every group."""
        return self.reporter.events

    async def run(self) -> None:
        """Run every group (and read each pool) until they all stop.

        Groups a reload adds join while it runs; a retired group's end is not the end.
        """
        self.started_at = self.clock()
        self._running = True
        for name, child in self.children.items():
            self._start(name, child)
        try:
            while self._runs:
                grown = asyncio.ensure_future(self._grown.wait())
                done, _ = await asyncio.wait(
                    {grown, *self._runs.values()}, return_when=asyncio.FIRST_COMPLETED
                )
                grown.cancel()
                self._grown.clear()
                for name, task in list(self._runs.items()):
                    if task in done:
                        del self._runs[name]
                        task.result()  # what made a group fail ends the whole (as before)
                        if name in self.retiring:
                            self._forget(name)
        finally:
            self._running = False
            readers = list(self._readers.values())
            for reader in readers:
                reader.cancel()
            for watch in self.stale.values():
                watch.close()
            if readers:
                await asyncio.wait(readers, timeout=5.0)
            self._readers.clear()
            self.reporter.publish_now()

    def _fan_out(self, pool: str) -> Callable[[Any], None]:
        def deliver(obs: Any) -> None:
            # The members at each read: a reload adds and removes groups.
            for child in list(self.children.values()):
                if child.config.azure.pool == pool:
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
        snap = merged_snapshot(self)
        stale = tuple(s for watch in self.stale.values() for s in watch.stale)
        if stale:
            snap = replace(snap, stale=stale)
        snap = snap if self.puller is None else self.puller.overlay(snap)
        if self.agent_versions is not None:
            snap = replace(snap, agent_versions=self.agent_versions.reading)
        if isinstance(self.api, UsageReporting):
            snap = replace(snap, azure_usage=self.api.usage())
        return snap if self.disk is None else replace(snap, disk=self.disk())

    def _pull_refusal(self) -> str | None:
        """Why no pull may start now (Docker's disk below the hard floor), or None."""
        disk = self.disk() if self.disk is not None else None
        return (
            None
            if disk is None
            else pull_refusal(disk.state, disk.free_bytes, disk.hard_floor_bytes)
        )

    # ------------------------------------------------------------------ commands

    async def execute(self, command: Command) -> CommandResult:
        """Carry out ``command`` on the groups it is for."""
        if isinstance(command, GpuClear):
            result = clear_gpu(self.gatekeeper, command)
            self.reporter.event("command", f"gpu_clear: {result.message}")
            return result
        if isinstance(command, Reload):  # the whole configuration, every group at once
            return await reload(self, command)
        if isinstance(command, Prune):
            return await prune_pools(self.stale, command, self.reporter.event)
        return await execute_routed(self.children, self.implicit, command)

    def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do, over the groups it is for."""
        if isinstance(command, GpuClear):
            return preview(self.snapshot(), command)
        if isinstance(command, Reload):
            return preview_reload(self, command)
        return preview_routed(self.children, self.implicit, command)
