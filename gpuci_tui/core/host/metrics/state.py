"""The state gauges of the Prometheus metrics, computed at scrape time.

Slots by state, agents, parked slots, health, GPUs, images, roll-outs, agent versions,
the organisation's budget (the service's ``X-RateLimit-*`` word, our cap):
read from the latest published `SupervisorSnapshot` and GPU frame, so a gauge can never
drift from what ``gpuci-tui status`` shows (the counters and histograms are in `metrics`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gpuci_tui.core.config.model import DEFAULT_GROUP
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.models import HealthState, SlotState, SupervisorSnapshot

MIB = 1024 * 1024

GATE_REASONS = (
    "foreign_process", "xid", "ecc", "row_remap", "slowdown", "lost", "driver", "cuda_incompatible"
)  # fmt: skip
"""The ``reason`` label of held slots: a process not ours, a `gpu_health.Fault`, or an
image the driver cannot run."""
GPU_HEALTH = {"ok": 0.0, "held": 1.0, "quarantined": 2.0}


def group_label(group: str) -> str:
    """The ``group`` label of a slot or event (``default`` in an ``[agents]``-only config)."""
    return group or DEFAULT_GROUP


class StateCollector(Collector):
    """Gauges computed at scrape time from the latest snapshot and GPU frame."""

    def __init__(
        self,
        snapshot: Callable[[], SupervisorSnapshot | None],
        frame: Callable[[], GpuFrame | None],
    ) -> None:
        """Read the latest published snapshot and GPU frame at each scrape."""
        self.snapshot = snapshot
        self.frame = frame

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families this collector yields (names fixed; read before any snapshot)."""
        return self._families(None, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The current values."""
        return self._families(self.snapshot(), self.frame())

    def _families(
        self, snap: SupervisorSnapshot | None, frame: GpuFrame | None
    ) -> Iterator[GaugeMetricFamily]:
        slots = GaugeMetricFamily("gpuci_slots", "Agent slots by state.", labels=["group", "state"])
        desired = GaugeMetricFamily(
            "gpuci_slots_desired", "Agent slots asked for (the configured or scaled count).",
            labels=["group"],
        )  # fmt: skip
        agents = GaugeMetricFamily(
            "gpuci_agents", "Agents by what they do: busy (running a job), idle (would take "
            "one now), standby (ready hot standbys).", labels=["group", "state"],
        )  # fmt: skip
        parked = GaugeMetricFamily(
            "gpuci_slots_parked", "Slots parked after repeated early failures (need "
            "`gpuci-tui resume`).", labels=["group"],
        )  # fmt: skip
        queued = GaugeMetricFamily(
            "gpuci_pool_jobs_queued", "Jobs waiting for an agent in the pool (all agents, "
            "not only this host's).", labels=["pool"],
        )  # fmt: skip
        docker = GaugeMetricFamily("gpuci_docker_up", "1 if the Docker engine answers, else 0.")
        free = GaugeMetricFamily(
            "gpuci_docker_free_bytes", "Free space on Docker's data root (absent when not "
            "visible from the daemon's host).",
        )  # fmt: skip
        azure = GaugeMetricFamily(
            "gpuci_azure_state", "Azure DevOps as last seen: 1 for the current state.",
            labels=["state"],
        )  # fmt: skip
        limited = GaugeMetricFamily(
            "gpuci_azure_rate_limited", "1 while Azure DevOps rate-limits this identity."
        )
        paused = GaugeMetricFamily(
            "gpuci_paused", "1 while replenishing is paused (`gpuci-tui pause`)."
        )
        pat_expiry = GaugeMetricFamily(
            "gpuci_pat_expiry_timestamp_seconds", "When the PAT expires ([azure] pat_expires; "
            "absent when unknown or not a PAT): alert on it minus time() < 14 days.",
        )  # fmt: skip
        util = GaugeMetricFamily(
            "gpuci_gpu_utilization_ratio", "GPU busy time over the last sample period (0–1).",
            labels=["gpu"],
        )  # fmt: skip
        used = GaugeMetricFamily(
            "gpuci_gpu_memory_used_bytes", "GPU memory in use.", labels=["gpu"]
        )
        total = GaugeMetricFamily("gpuci_gpu_memory_total_bytes", "GPU memory.", labels=["gpu"])
        health = GaugeMetricFamily(
            "gpuci_gpu_health", "GPU admission and health: 0 ok, 1 held (a process not ours "
            "uses it), 2 quarantined (failing; `gpuci-tui gpu clear` after a check).",
            labels=["gpu"],
        )  # fmt: skip
        held = GaugeMetricFamily(
            "gpuci_slots_held", "Slots that take no new job because of their GPUs, by reason "
            "(foreign_process: held; the others: quarantined).", labels=["group", "reason"],
        )  # fmt: skip
        image = GaugeMetricFamily(
            "gpuci_agent_image_info", "1 per slot: the image the configuration names and the "
            "id of the image its agent runs (empty while no container runs or it is not known).",
            labels=["group", "slot", "image", "image_id"],
        )  # fmt: skip
        rollout = GaugeMetricFamily(
            "gpuci_rollout_slots_new", "Slots on the new agent spec of a group's roll-out "
            "(`gpuci-tui reload`); absent when none is going on.", labels=["group"],
        )  # fmt: skip
        rollout_state = GaugeMetricFamily(
            "gpuci_rollout_state", "A group's roll-out: 1 for its state (canary, rolling, done, "
            "rolled_back).", labels=["group", "state"],
        )  # fmt: skip
        if snap is not None:
            for change in snap.rollouts:
                rollout.add_metric([group_label(change.group)], change.slots_new)
                rollout_state.add_metric([group_label(change.group), change.state], 1.0)
        agent = GaugeMetricFamily(
            "gpuci_agent_version_info", "1 per group: the agent its image bakes, the "
            "organisation's current agent and the verified package cached for new containers "
            "(empty: not known); gpuci_agent_version_warnings counts what differs.",
            labels=["group", "image", "image_agent", "org_agent", "cached_agent"],
        )  # fmt: skip
        warned = GaugeMetricFamily(
            "gpuci_agent_version_warnings", "Agent version warnings (an image older than the "
            "organisation's agent or than queued jobs demand); absent when not watched.",
        )  # fmt: skip
        if snap is not None:
            _add_agent_versions(snap, agent, warned)
            for one in snap.slots:  # one series per slot: a new image replaces the old series
                labels = [group_label(one.group), str(one.slot), one.image, one.image_id]
                image.add_metric(labels, 1.0)
            _add_slots(snap, slots, desired, agents, parked)
            _add_gates(snap, health, held)
            for pool in snap.pools or (snap.pool_summary,):
                queued.add_metric([pool.name or snap.pool], pool.queued_jobs)
            docker.add_metric([], 1.0 if snap.docker.state is HealthState.OK else 0.0)
            if snap.disk.free_bytes is not None:
                free.add_metric([], snap.disk.free_bytes)
            for state in HealthState:
                azure.add_metric([state.value], 1.0 if snap.azure.state is state else 0.0)
            limited.add_metric([], 1.0 if snap.azure.state is HealthState.RATE_LIMITED else 0.0)
            paused.add_metric([], 1.0 if snap.paused else 0.0)
            if snap.azure.pat_expires_at is not None:
                pat_expiry.add_metric([], snap.azure.pat_expires_at)
        for gpu in frame.gpus if frame is not None else ():
            index = [str(gpu.index)]
            if gpu.utilization_pct is not None:
                util.add_metric(index, gpu.utilization_pct / 100)
            if gpu.memory_used_mib is not None:
                used.add_metric(index, gpu.memory_used_mib * MIB)
            if gpu.memory_total_mib is not None:
                total.add_metric(index, gpu.memory_total_mib * MIB)
        yield from (slots, desired, agents, parked, queued, docker, free, azure, limited, paused)
        yield from (
            util, used, total, health, held, image, rollout, rollout_state, pat_expiry, agent, warned
        )  # fmt: skip
        yield from _budget(snap)


def _budget(snap: SupervisorSnapshot | None) -> Iterator[GaugeMetricFamily]:
    """The queue's cap, the identity's budget as the service last said it, and our own cap."""
    capped = GaugeMetricFamily(
        "gpuci_pool_jobs_queued_capped", "1 when the pool's job requests were read at the "
        "service's cap (200): gpuci_pool_jobs_queued is then a lower bound.", labels=["pool"],
    )  # fmt: skip
    remaining = GaugeMetricFamily(
        "gpuci_azure_rate_limit_remaining", "X-RateLimit-Remaining of the latest answer: the "
        "identity's budget left in the service's 5-minute window, shared by every host signing "
        "in as it (absent until the service sends it).",
    )  # fmt: skip
    limit = GaugeMetricFamily(
        "gpuci_azure_rate_limit_limit", "X-RateLimit-Limit: that window's budget (absent until "
        "the service sends it).",
    )  # fmt: skip
    cap = GaugeMetricFamily(
        "gpuci_azure_request_cap_per_minute", "[azure] max_requests_per_minute (absent: no cap)."
    )
    held = GaugeMetricFamily(
        "gpuci_azure_requests_held_last_minute", "Calls the cap held back in the last minute "
        "(periodic reads first).",
    )  # fmt: skip
    if snap is not None:
        for pool in snap.pools or (snap.pool_summary,):
            capped.add_metric([pool.name or snap.pool], 1.0 if pool.queued_capped else 0.0)
        usage = snap.azure_usage
        if usage.rate_limit_remaining is not None:
            remaining.add_metric([], usage.rate_limit_remaining)
        if usage.rate_limit_limit is not None:
            limit.add_metric([], usage.rate_limit_limit)
        if usage.cap_per_minute is not None:
            cap.add_metric([], usage.cap_per_minute)
        held.add_metric([], usage.held_last_minute)
    yield from (capped, remaining, limit, cap, held)


def _add_agent_versions(
    snap: SupervisorSnapshot, info: GaugeMetricFamily, warned: GaugeMetricFamily
) -> None:
    """The agent versions, once the daemon has read them (issue 20)."""
    versions = snap.agent_versions
    if versions.checked_at is None:
        return
    for image in versions.images:
        info.add_metric(
            [
                group_label(image.group),
                image.image,
                image.baked or "",
                versions.org_version or "",
                versions.cached or "",
            ],
            1.0,
        )
    warned.add_metric([], float(len(versions.warnings)))


def _add_gates(
    snap: SupervisorSnapshot, health: GaugeMetricFamily, held: GaugeMetricFamily
) -> None:
    """Every GPU's health and, per group, the held slots by (bounded) reason, zeros too."""
    for gate in snap.gpu_gates:
        health.add_metric([str(gate.index)], GPU_HEALTH.get(gate.state, 0.0))
    groups = sorted({group_label(g.name) for g in snap.groups} or {DEFAULT_GROUP})
    for group in groups:
        mine = [s for s in snap.slots if group_label(s.group) == group and s.gate != "open"]
        for reason in GATE_REASONS:
            held.add_metric([group, reason], sum(1 for s in mine if s.gate_code == reason))


def _add_slots(
    snap: SupervisorSnapshot,
    slots: GaugeMetricFamily,
    desired: GaugeMetricFamily,
    agents: GaugeMetricFamily,
    parked: GaugeMetricFamily,
) -> None:
    """Per-group slot and agent counts; every state is exported, zeros too, so that a
    dashboard's series do not appear and vanish with the states.
    """
    wanted = {group_label(g.name): g.desired_count for g in snap.groups}
    if not snap.groups:
        wanted[DEFAULT_GROUP] = snap.desired_count
    for group in {group_label(s.group) for s in snap.slots} - wanted.keys():
        wanted[group] = 0  # a group scaled away but still draining
    for group, count in sorted(wanted.items()):
        mine = [s for s in snap.slots if group_label(s.group) == group]
        for state in SlotState:
            slots.add_metric([group, state.value], sum(1 for s in mine if s.state is state))
        desired.add_metric([group], count)
        agents.add_metric([group, "busy"], sum(1 for s in mine if s.state is SlotState.BUSY))
        agents.add_metric([group, "idle"], sum(1 for s in mine if s.state is SlotState.IDLE))
        agents.add_metric([group, "standby"], sum(1 for s in mine if s.standby == "ready"))
        parked.add_metric([group], sum(1 for s in mine if s.state is SlotState.PARKED))
