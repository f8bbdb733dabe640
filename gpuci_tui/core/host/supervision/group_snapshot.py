"""The snapshot of several agent groups as one: slots side by side, pools, the worst health.

`GroupSupervisor.snapshot` is this merge (plus the disk reading); kept apart so the
composition of the groups (building, running, reloading them) stays one module.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.engine.snapshots import pools_total, shared_pool
from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import (
    GroupSummary,
    HealthSnapshot,
    HealthState,
    PoolSummary,
    SupervisorSnapshot,
)
from gpuci_tui.core.protocols import AgentPoolApi


class GroupSupervisor(Protocol):
    """What the merge reads of `group_supervisor.GroupSupervisor` (no import cycle)."""

    implicit: bool
    children: dict[str, Supervisor]
    pools: dict[str, PoolObserver]
    config: Config
    clock: Callable[[], float]
    instance: str
    mode: str
    api: AgentPoolApi
    started_at: float | None
    gatekeeper: GpuGatekeeper | None


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


def merged_snapshot(sup: GroupSupervisor) -> SupervisorSnapshot:
    """Every group's slots side by side, the pools, the worst health (the disk aside)."""
    if sup.implicit:
        # One implicit group: the lone supervisor's own snapshot, unchanged.
        return next(iter(sup.children.values())).snapshot()
    snaps = {name: child.snapshot() for name, child in sup.children.items()}
    first = next(iter(snaps.values()))
    by_pool: dict[str, list[PoolSummary]] = {}
    for snap in snaps.values():
        by_pool.setdefault(snap.pool, []).append(snap.pool_summary)
    summaries = [shared_pool(group) for group in by_pool.values()]
    total = pools_total(summaries)
    return SupervisorSnapshot(
        taken_at=sup.clock(),
        org_url=sup.config.azure.url,
        pool=total.name,
        instance=sup.instance,
        desired_count=sum(s.desired_count for s in snaps.values()),
        paused=all(s.paused for s in snaps.values()),
        stopping=any(s.stopping for s in snaps.values()),
        mode=sup.mode,
        pid=os.getpid(),
        slots=tuple(slot for snap in snaps.values() for slot in snap.slots),
        pool_summary=total,
        azure=worst([p.health for p in sup.pools.values()]),
        docker=worst([s.docker for s in snaps.values()]),
        azure_requests=sup.api.request_count,
        started_at=sup.started_at,
        standby=any(s.standby for s in snaps.values()),
        standby_depth=", ".join(dict.fromkeys(s.standby_depth for s in snaps.values())),
        groups=tuple(
            GroupSummary(
                name=name,
                pool=child.config.azure.pool,
                name_prefix=child.config.agents.name_prefix,
                desired_count=snaps[name].desired_count,
                standby=bool(child.config.agents.standby),
            )
            for name, child in sup.children.items()
        ),
        pools=tuple(summaries),
        protocol=first.protocol,
        gpu_accounting=any(s.gpu_accounting for s in snaps.values()),
        gpu_gates=() if sup.gatekeeper is None else sup.gatekeeper.gates,
        rollouts=tuple(r for s in snaps.values() for r in s.rollouts),
        overrides=tuple(o for s in snaps.values() for o in s.overrides),
    )
