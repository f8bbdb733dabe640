"""One assembly of the supervisor and its parts: daemon, demo and ``console --foreground``.

Every way of running agents builds the same thing here: a `GroupSupervisor`
(a configuration without ``[groups]`` is one implicit group), a `JobRecorder`
per group writing finished jobs to the history, the saved intent of each group,
and, with a GPU sampler, a `JobAccountant` fed by a `GpuWatch` whose frames
also go to the `GpuGatekeeper` (GPU admission and health), so busy slots show
their job's GPU use and history rows carry it, and to the `CudaGuard` (can the
driver run each group's image? checked once before the first plan too). Each part gets what it needs
when it is constructed; nothing is patched in afterwards: the gatekeeper is
built first (it asks for the groups' supervisors at each frame) and handed to
the supervisors and the watch.

`open_assembly` is the one way to supervise an instance: it takes the
instance's lock(s) (`instance.lock_instance`), so the daemon, ``console
--foreground`` and the demo (on its own temporary instance) never run two
supervisors of the same agents, and it keeps the intent and the GPU faults in
the instance's files (`DaemonPaths`), whichever of them runs.
`Assembly.start` runs it in the running loop and `Assembly.close` stops it and
releases what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from gpuci_tui.core.config.loader import Config, agent_groups, instance_id
from gpuci_tui.core.engine.agent_versions import newest
from gpuci_tui.core.gpu.accounting import JobAccountant, container_owners
from gpuci_tui.core.host.gpus.caps import SlotCapabilities, facts_reader
from gpuci_tui.core.host.gpus.cuda_guard import CudaGuard, inspector
from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
from gpuci_tui.core.host.gpus.watch import GpuWatch
from gpuci_tui.core.host.images.agent_cache import AgentPackageCache
from gpuci_tui.core.host.images.agent_updates import AgentUpdates
from gpuci_tui.core.host.images.disk_watch import DiskWatch
from gpuci_tui.core.host.images.puller import ImagePuller, ImageRegistry
from gpuci_tui.core.host.instance import DaemonPaths, group_lock, intent_stores, lock_instance
from gpuci_tui.core.host.metrics.registry import Metrics, follow
from gpuci_tui.core.host.observers.history_rows import history_seed
from gpuci_tui.core.host.observers.job_recorder import JobRecorder
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.pool_scope import lane_names
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.host.supervision.slot_layout import prepare_shapes
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.packages import AgentPackagesApi
from gpuci_tui.core.protocols import (
    AgentPoolApi,
    ContainerRuntime,
    DockerDisk,
    GpuSampler,
    TokenSource,
    UsageReporting,
)
from gpuci_tui.core.store.history import JobHistory
from gpuci_tui.core.store.intent import IntentStore

__all__ = ["Assembly", "assemble", "open_assembly"]


@dataclass
class Assembly:
    """A supervisor with its recorders, GPU watch and metrics, ready to run."""

    supervisor: GroupSupervisor
    recorders: dict[str, JobRecorder]
    """Each group's job recorder, by group name ("" for the implicit group)."""
    watch: GpuWatch | None
    """Samples the GPUs into per-job accounting (None without a sampler)."""
    gatekeeper: GpuGatekeeper | None = None
    """GPU admission and health, fed by the watch (None without a sampler)."""
    metrics: Metrics | None = None
    """The Prometheus metrics it feeds (None: not exported)."""
    disk_watch: DiskWatch | None = None
    """Docker's free space and the removal of unused images (None: the runtime has no disk)."""
    releases: list[Callable[[], None]] = field(default_factory=list)
    """What `close` releases last (the history, the instance locks), last added first."""
    cuda: CudaGuard | None = None
    """The CUDA check of the groups' images against the driver (None without a sampler)."""
    sampler: GpuSampler | None = None
    """The GPU sampler (the CUDA check at start reads the driver through it)."""
    puller: ImagePuller | None = None
    """The host's image puller (None: the runtime cannot pull)."""
    agent_updates: AgentUpdates | None = None
    """Agent versions and the host's agent package cache (None: not watched)."""
    _supervising: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _helpers: list[asyncio.Task[None]] = field(default_factory=list, init=False, repr=False)

    @property
    def children(self) -> list[Supervisor]:
        """The per-group supervisors."""
        return list(self.supervisor.children.values())

    def start(self) -> None:
        """Run the supervisor, the GPU watch and the metrics feed in the running loop."""
        loop = asyncio.get_running_loop()
        # Tasks first run in the order they are created: the metrics subscribe before the
        # supervisor's first event.
        if self.metrics is not None:
            self._helpers.append(loop.create_task(follow(self.supervisor, self.metrics)))
        if self.watch is not None:
            self._helpers.append(loop.create_task(self.watch.run()))
        if self.disk_watch is not None:
            self._helpers.append(loop.create_task(self.disk_watch.run()))
        if self.agent_updates is not None:
            self._helpers.append(loop.create_task(self.agent_updates.follow(self.supervisor)))
            self._helpers.append(loop.create_task(self.agent_updates.run()))
        self._supervising = loop.create_task(self._supervise())

    async def _supervise(self) -> None:
        if self.agent_updates is not None:
            # A package cached by an earlier run is mounted from the first start on.
            await self.agent_updates.prime()
        if self.cuda is not None and self.sampler is not None:
            # Before the first plan: no container starts on a driver that cannot run it.
            await self.cuda.at_start(self.sampler.host_info)
        await self.supervisor.run()

    async def stopped(self) -> None:
        """Wait until the supervisor stops (raises what made it fail)."""
        if self._supervising is None:
            raise RuntimeError("the assembly was not started")
        await asyncio.shield(self._supervising)

    async def close(self) -> None:
        """Stop the supervisor (agents stay running), write the history rows still in
        flight, and release the history and the instance locks; idempotent.
        """
        if self.puller is not None:
            self.puller.close()  # a pull in its thread would hold up the exit
        try:
            task = self._supervising
            if task is not None:
                if not task.done():
                    self.supervisor.request_stop()
                # Not awaited: a failure is `stopped`'s to raise, not the cleanup's.
                await asyncio.wait({task})
            for helper in self._helpers:
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
            self._helpers.clear()
            for recorder in self.recorders.values():
                await recorder.drain()
        finally:
            while self.releases:
                self.releases.pop()()


def open_assembly(
    config: Config,
    *,
    paths: DaemonPaths,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    mode: str,
    gpu: GpuSampler | None = None,
    sample_interval: float | None = None,
    extra_labels: Mapping[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    metrics: bool = False,
) -> Assembly:
    """Take the lock(s) of ``config``'s agent set and assemble its supervisor on ``paths``.

    The history, the saved intent and the latched GPU faults are the instance's
    files, whoever supervises it. `Assembly.close` releases the locks.

    Args:
        config: the configuration (with or without ``[groups]``).
        paths: the instance's files (`DaemonPaths.for_instance`, or the demo's own).
        api: Azure DevOps client.
        runtime: container engine.
        tokens: what a container registers with (`secrets.credentials.Credential`).
        mode: ``daemon`` or ``in-process``, shown to operators.
        gpu: the GPU sampler; None: no GPU accounting, admission or health.
        sample_interval: seconds between GPU samples (default ``[gpu] sample_interval``).
        extra_labels: more container labels (tests, demo).
        command: override the image's command (tests).
        metrics: feed Prometheus metrics (`Assembly.metrics`).

    Raises:
        AlreadyRunningError: another supervisor holds the lock of the instance or a group.
    """
    locks = lock_instance(config, paths, mode)
    try:
        history = JobHistory(
            paths.history, keep_days=config.history.keep_days, max_rows=config.history.max_rows
        )
    except BaseException:
        locks.release()
        raise
    try:
        parts = assemble(
            config,
            api=api,
            runtime=runtime,
            tokens=tokens,
            history=history,
            mode=mode,
            intent_store=intent_stores(config, paths),
            gpu=gpu,
            sample_interval=sample_interval,
            extra_labels=extra_labels,
            command=command,
            agent_dir_root=str(paths.agents)
            if any(g.agents.docker_socket for g in agent_groups(config))
            else None,
            gpu_health_store=paths.gpu_health,
            metrics=metrics,
            claim_group=group_lock(mode, locks) if config.groups else None,
            agent_cache=paths.agent_cache,
        )
    except BaseException:
        history.close()
        locks.release()
        raise
    parts.releases += [locks.release, history.close]
    return parts


def assemble(
    config: Config,
    *,
    api: AgentPoolApi,
    runtime: ContainerRuntime,
    tokens: TokenSource,
    history: JobHistory,
    mode: str,
    intent_store: Callable[[str, Config], IntentStore | None] | None = None,
    gpu: GpuSampler | None = None,
    sample_interval: float | None = None,
    extra_labels: Mapping[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    agent_dir_root: str | None = None,
    gpu_health_store: Path | None = None,
    metrics: bool = False,
    claim_group: Callable[[Config], Callable[[], None]] | None = None,
    agent_cache: Path | None = None,
) -> Assembly:
    """Build the supervisor of ``config`` and its parts (no lock: see `open_assembly`).

    Args:
        config: the configuration (with or without ``[groups]``).
        api: Azure DevOps client.
        runtime: container engine.
        tokens: what a container registers with (`secrets.credentials.Credential`).
        history: where finished jobs are written.
        mode: ``daemon`` or ``in-process``, shown to operators.
        intent_store: each group's saved intent, by group name.
        gpu: the GPU sampler; None: no GPU accounting.
        sample_interval: seconds between GPU samples (default ``[gpu] sample_interval``).
        extra_labels: more container labels (tests, demo).
        command: override the image's command (tests).
        agent_dir_root: per-slot agent directories on the host (``agents.docker_socket``).
        gpu_health_store: where latched GPU faults are kept across restarts (None: not kept).
        metrics: feed Prometheus metrics with every history row, snapshot, event, GPU
            frame and Azure DevOps request (`Assembly.metrics`).
        claim_group: takes the lock of a group a reload adds (None: no locks).
        agent_cache: the host's agent package cache; None (or an ``api`` that cannot read
            agent packages): agent versions are not watched and no package is mounted.

    Raises:
        ConfigError: a group's slot shape does not fit the host's GPUs.
    """
    # Slots shaped by the hardware (gpus_per_slot, MIG): refuse a shape that does not fit.
    prepare_shapes(config, gpu)
    groups = agent_groups(config)
    # The implicit group has no name on the outside (metrics, snapshots): "".
    implicit = len(groups) == 1 and groups[0].implicit
    interval = config.gpu.sample_interval if sample_interval is None else sample_interval
    accountant = JobAccountant(min_interval=interval) if gpu is not None else None
    reporter = Broadcaster(time.time)
    supervisor: GroupSupervisor | None = None

    def children() -> list[Supervisor]:
        # Asked at each GPU sample, once the supervisor below exists.
        return [] if supervisor is None else list(supervisor.children.values())

    watch = gatekeeper = cuda = None
    inspect = inspector(runtime)
    if gpu is not None and inspect is not None:
        cuda = CudaGuard(children, inspect)
    if gpu is not None and accountant is not None:
        # One NVML pass per sample feeds the accounting and every group's GPU gates
        # (admission and health), in the daemon, the demo and --foreground alike.
        gatekeeper = GpuGatekeeper(
            children,
            lambda kind, message: reporter.event(kind, message),
            store=gpu_health_store,
        )
        watch = GpuWatch(
            gpu,
            accountant,
            lambda: {k: v for c in children() for k, v in container_owners(c.snapshot()).items()},
            interval=interval,
            gatekeeper=gatekeeper,
            cuda=cuda,
        )
    exported = None
    if metrics:
        frames = watch
        exported = Metrics(
            groups=(g.name for g in groups),
            gpu_frame=(lambda: frames.latest) if frames is not None else lambda: None,
        )
        _observe_requests(exported, api)
    on_record = exported.job_recorded if exported is not None else None
    recorders: dict[str, JobRecorder] = {}

    def recorder_for(name: str, pool: PoolObserver, group: Config) -> JobRecorder:
        label = "" if implicit else name
        recorder = JobRecorder(
            history,
            api,
            instance_id(group),
            pool_id=lambda: pool.pool_id,
            accountant=accountant,
            on_record=partial(on_record, label) if on_record is not None else None,
            holds=lane_names(group.agents.name_prefix),
        )
        # Every read of the pool brings our agents' finished requests (`JobRecorder.pool_read`).
        pool.on_read.append(recorder.pool_read)
        recorders[label] = recorder
        return recorder

    disk = getattr(runtime, "disk", None)
    disk_watch = None
    if isinstance(disk, DockerDisk):
        disk_watch = DiskWatch(
            disk,
            min_free=config.docker.min_free_bytes,
            hard_floor=config.docker.hard_floor_bytes,
            interval=config.docker.check_interval,
            # The groups as they run now (a reload changes images, adds and removes groups).
            configured=lambda: [
                g.agents.image for g in agent_groups(supervisor.config if supervisor else config)
            ],
            report=lambda kind, message: reporter.event(kind, message),
            rollback_targets=lambda: rollback_images(supervisor),
        )
    registry = getattr(runtime, "registry", None)
    puller = None
    if isinstance(registry, ImageRegistry):
        # One puller for the host: one pull per image whatever the number of groups.
        puller = ImagePuller(
            registry,
            report=lambda kind, message: reporter.event(kind, message),
            refusal=disk_watch.may_pull if disk_watch is not None else lambda: None,
            changed=reporter.changed,
        )
    updates = None
    if agent_cache is not None and isinstance(api, AgentPackagesApi):

        def images() -> dict[str, str]:
            # The groups as they run now: a reload changes images, adds and removes groups.
            running = agent_groups(supervisor.config if supervisor else config)
            return {("" if g.implicit else g.name): g.agents.image for g in running}

        updates = AgentUpdates(
            api,
            AgentPackageCache(agent_cache),
            images,
            inspect,
            lambda kind, message: reporter.event(kind, message),
        )
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
        reporter=reporter,
        gatekeeper=gatekeeper,
        disk=(lambda: disk_watch.reading) if disk_watch is not None else None,
        claim_group=claim_group,
        puller=puller,
        agent_versions=updates,
    )
    if isinstance(api, UsageReporting):
        # [azure] max_requests_per_minute: at start, and at once after a reload changes it.
        api.set_request_cap(config.azure.max_requests_per_minute)
        supervisor.on_reload(
            lambda: api.set_request_cap(supervisor.config.azure.max_requests_per_minute)
        )
    for child in supervisor.children.values():
        # "auto" starts from this host's recent jobs and start-ups, not from nothing.
        child.seed_auto(history_seed(history, child.instance))
    if cuda is not None:
        # A reload may change the groups' images: check them against the driver again.
        supervisor.on_reload(cuda.check_soon)
        supervisor.cuda_refusal = cuda.refusal_now  # an image the driver cannot run: refused
    if gpu is not None:
        # Every agent advertises its slot's GPUs (read once, at the first start), also
        # the agents of a group a reload adds.
        supervisor.advertise(SlotCapabilities(facts_reader(gpu)))
    if updates is not None:
        pools = supervisor.pools.values()  # a view: the pools a reload adds count too
        updates.demanded = lambda: newest(p.demanded_version for p in pools)
    return Assembly(
        supervisor,
        recorders,
        watch,
        gatekeeper,
        exported,
        disk_watch=disk_watch,
        cuda=cuda,
        sampler=gpu,
        puller=puller,
        agent_updates=updates,
    )


def rollback_images(supervisor: GroupSupervisor | None) -> list[str]:
    """The images a roll-back may return to: each group's last roll-out's old image.

    Read from the disk watch's thread: the engine states are frozen and swapped whole.
    """
    children = [] if supervisor is None else list(supervisor.children.values())
    return [c.state.rollout.image_from for c in children if c.state.rollout is not None]


def _observe_requests(metrics: Metrics, api: AgentPoolApi) -> None:
    """Feed ``metrics`` with the Azure DevOps client's HTTP attempts."""
    # Only the real client counts HTTP attempts; a test double simply has no such hook.
    observe = getattr(api, "observe_requests", None)
    if callable(observe):
        observe(metrics.azure_response)
