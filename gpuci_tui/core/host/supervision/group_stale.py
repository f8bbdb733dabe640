"""Each pool's stale registrations for a `GroupSupervisor`: one watch per pool, pruned together;
and which of a pool's agents are ours (what its observer asks the service for).

Kept apart from the composition of the groups (building, running, reloading them):
the watch of a pool reads the groups that use it at each read, so a reload that adds
or removes groups changes what counts as a current lane without rebuilding it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gpuci_tui.core.command_types import CommandResult, Prune
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.docker.agentspec import host_marker
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.pool_scope import ReadScope, read_scope
from gpuci_tui.core.host.observers.stale_watch import StaleWatch, current_lane_names, own_instances
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.protocols import AgentPoolApi


class Groups(Protocol):
    """What a pool's watch reads of `group_supervisor.GroupSupervisor` (no import cycle)."""

    children: dict[str, Supervisor]
    config: Config
    api: AgentPoolApi
    clock: Callable[[], float]
    reporter: Broadcaster


def pool_stale_watch(groups: Groups, pool_name: str, pool: PoolObserver) -> StaleWatch:
    """The stale registrations of ``pool_name``, read with the pool's own observer."""

    def current() -> frozenset[str]:
        # The pool's groups at each read (a reload adds and removes them); slots still
        # held beyond ``count`` (draining after a scale-down) count too.
        members = [c for c in groups.children.values() if c.config.azure.pool == pool_name]
        held = [slot.number for child in members for slot in child.state.slots]
        return current_lane_names(groups.config, pool_name, held)

    return StaleWatch(
        groups.api,
        pool,
        instances=own_instances(groups.config, pool_name),
        host=host_marker(),
        current_names=current,
        clock=groups.clock,
        report=groups.reporter.event,
        remove_after=groups.config.azure.remove_offline_after,
        changed=groups.reporter.changed,
    )


def pool_scope(groups: Groups, pool_name: str) -> ReadScope:
    """Our agents in ``pool_name`` now: the groups there (a reload changes them), this host."""
    return read_scope(groups.config, pool_name, host_marker())


async def prune_pools(
    stale: dict[str, StaleWatch], command: Prune, report: Callable[[str, str], object]
) -> CommandResult:
    """Each pool's stale registrations, listed (dry run) or removed; one answer for all."""
    results = [await watch.prune(command) for watch in stale.values()]
    result = results[0]
    if len(results) > 1:
        message = "\n".join(f"pool {n}: {r.message}" for n, r in zip(stale, results, strict=True))
        ids = tuple(i for r in results for i in r.affected)
        result = CommandResult(all(r.ok for r in results), message, ids)
    if not command.dry_run:
        report("command", f"prune: {result.message}")
    return result
