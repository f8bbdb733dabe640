"""The supervisor's view of Azure DevOps: one agents-list call per cycle, safe drains.

Every cycle reads the whole pool once (``list_agents`` with assigned requests)
and maps agents to slots by name; it never calls per slot, which keeps the
rate well inside Azure DevOps' budget (200 TSTUs per 5 minutes). Only slots
that are being drained, restarted or re-enabled cost extra calls, and only
while they are.

Failures never stop local replenishing: an exited container is replaced
whether or not the organisation answers. What needs the server (disabling an
agent before stopping it) waits, and the health says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from .models import HealthSnapshot, HealthState, PoolSummary
from .protocols import (
    Agent,
    AzureAuthError,
    AzureError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureUnreachableError,
    JobRequest,
)
from .slots import SlotRecord, job_info

if TYPE_CHECKING:
    from .supervisor import Supervisor

log = logging.getLogger("gpuci_tui.supervisor.azure")

#: Poll interval while some slot waits for a server-side step (drain, enable).
ACTIVE_INTERVAL = 1.0
#: Job requests (queue depth) are read at most this often.
JOBREQUESTS_INTERVAL = 30.0
MAX_ERROR_BACKOFF = 60.0


class AzureSync:
    """Polls the pool and performs the server-side half of drains and restarts."""

    def __init__(self, supervisor: Supervisor) -> None:
        """Bind to ``supervisor`` (which owns the slot records)."""
        self.sup = supervisor
        self.health = HealthSnapshot()
        self.pool_summary = PoolSummary(name=supervisor.config.azure.pool)
        self.pool_id: int | None = None
        self._wake = asyncio.Event()
        self._want_enabled: set[int] = set()
        self._error_streak = 0
        self._next_jobrequests = 0.0
        self._queued = 0
        self._running = 0

    def poll_soon(self) -> None:
        """Run the next cycle now (after a command)."""
        self._wake.set()

    def want_enabled(self, rec: SlotRecord) -> None:
        """Make sure the slot's agent is enabled once it is registered (fresh or resumed)."""
        self._want_enabled.add(rec.slot)

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        """Cycle until cancelled."""
        while True:
            delay = await self.cycle()
            self._wake.clear()
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a
            # cancellation that races with the event being set, and the
            # supervisor's shutdown would then wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def cycle(self) -> float:
        """One poll plus pending server-side steps; returns the delay until the next."""
        sup = self.sup
        interval = sup.config.supervisor.poll_interval
        try:
            if self.pool_id is None:
                pool = await asyncio.to_thread(sup.api.resolve_pool, sup.config.azure.pool)
                self.pool_id = pool.id
            began = sup.clock()
            agents = await asyncio.to_thread(sup.api.list_agents, self.pool_id)
            if began >= self._next_jobrequests:
                requests = await asyncio.to_thread(sup.api.list_job_requests, self.pool_id)
                self._count_requests(requests)
                self._next_jobrequests = began + JOBREQUESTS_INTERVAL
            self._apply(agents, began)
            await self._server_steps()
        except AzureError as exc:
            return self._failed(exc)
        self._error_streak = 0
        self.health = HealthSnapshot(HealthState.OK, "", sup.clock())
        sup._changed()
        return ACTIVE_INTERVAL if self._pending() else interval

    def _failed(self, exc: AzureError) -> float:
        sup = self.sup
        now = sup.clock()
        self._error_streak += 1
        if isinstance(exc, AzureRateLimitError):
            state, delay = HealthState.RATE_LIMITED, max(exc.retry_after, 1.0)
        elif isinstance(exc, AzureAuthError | AzureScopeError):
            state, delay = HealthState.AUTH_FAILED, MAX_ERROR_BACKOFF
        elif isinstance(exc, AzureUnreachableError):
            state = HealthState.UNREACHABLE
            delay = min(2.0 * 2 ** (self._error_streak - 1), MAX_ERROR_BACKOFF)
        else:
            state = HealthState.ERROR
            delay = min(2.0 * 2 ** (self._error_streak - 1), MAX_ERROR_BACKOFF)
        if isinstance(exc, AzureNotFoundError):
            self.pool_id = None
        message = f"{exc} (local slots are still replenished; next try in {delay:.0f} s)"
        if self.health.state != state or self.health.message != message:
            sup._emit("azure_error", str(exc))
        self.health = HealthSnapshot(state, message, now, now + delay)
        sup._changed()
        return delay

    # ------------------------------------------------------------------ reading

    def _count_requests(self, requests: list[JobRequest]) -> None:
        self._queued = sum(1 for r in requests if r.assign_time is None and r.result is None)
        self._running = sum(1 for r in requests if r.assign_time is not None and r.result is None)

    def _apply(self, agents: list[Agent], began: float) -> None:
        """Map the pool's agents onto slots by name."""
        sup = self.sup
        by_name = {a.name: a for a in agents}
        for rec in sup.records.values():
            agent = by_name.get(rec.name)
            rec.agent = agent
            if agent is None or rec.container_id is None:
                continue
            if agent.status == "online" and rec.started_at is not None and began > rec.started_at:
                rec.online_confirmed = True
            request = agent.assigned_request
            if request is not None and rec.online_confirmed:
                if rec.job is None or rec.job.request_id != request.request_id:
                    sup._emit("job_assigned", f"{rec.name} runs job {request.request_id}", rec.slot)
                rec.job = job_info(request)
                rec.took_job = True
            elif request is None:
                rec.job = None
        self.pool_summary = PoolSummary(
            pool_id=self.pool_id,
            name=sup.config.azure.pool,
            online=sum(1 for a in agents if a.status == "online"),
            offline=sum(1 for a in agents if a.status != "online"),
            disabled=sum(1 for a in agents if not a.enabled),
            queued_jobs=self._queued,
            running_jobs=max(self._running, sum(1 for a in agents if a.assigned_request)),
        )

    def _pending(self) -> bool:
        for rec in self.sup.records.values():
            if rec.container_id and (rec.drain or (rec.restart and rec.job is None)):
                return True
            # Every fresh start asks for its agent to be enabled, but only an agent
            # known to be disabled needs the fast cycle; otherwise, under constant
            # churn, some slot is always "pending" and the pool is listed every
            # second instead of every poll_interval (bench/bench_load.py: 4.9×).
            if (
                rec.slot in self._want_enabled
                and rec.container_id
                and (rec.disabled_by_us or (rec.agent is not None and not rec.agent.enabled))
            ):
                return True
        return False

    # ------------------------------------------------------------------ writing

    async def _server_steps(self) -> None:
        for rec in list(self.sup.records.values()):
            if rec.container_id is None or rec.op is not None:
                continue
            if rec.drain or (rec.restart and rec.job is None):
                await self._disable_then_stop(rec)
            elif rec.slot in self._want_enabled:
                await self._enable(rec)

    async def _disable_then_stop(self, rec: SlotRecord) -> None:
        """Disable on the server, re-read the agent, stop the container only if it has no job."""
        sup = self.sup
        assert self.pool_id is not None
        agent = rec.agent
        if agent is None or not rec.online_confirmed:
            rec.message = "waiting for the agent to register before disabling it"
            return
        if agent.enabled:
            agent = await asyncio.to_thread(
                sup.api.set_agent_enabled, self.pool_id, agent.id, False
            )
            rec.disabled_by_us = True
            sup._emit("agent_disabled", f"{rec.name} disabled on the server", rec.slot)
        # A job can be assigned between any earlier read and the disable: re-read.
        fresh = await asyncio.to_thread(sup.api.get_agent, self.pool_id, agent.id)
        if fresh is None:
            rec.message = "agent registration vanished; waiting for the container to exit"
            return
        rec.agent = fresh
        if fresh.assigned_request is not None:
            rec.job = job_info(fresh.assigned_request)
            rec.took_job = True
            rec.message = (
                f"{'draining' if rec.drain else 'restart'}: waiting for job {rec.job.request_id}"
            )
            sup._changed()
            return
        if rec.container_id is None:
            return
        rec.message = "disabled and idle: stopping"
        sup.request_container_stop(rec)
        if not rec.drain:
            # A restart: the replacement must be enabled again once registered.
            self._want_enabled.add(rec.slot)

    async def _enable(self, rec: SlotRecord) -> None:
        sup = self.sup
        assert self.pool_id is not None
        agent = rec.agent
        if rec.drain:
            self._want_enabled.discard(rec.slot)
            return
        if agent is None or not rec.online_confirmed:
            return  # not registered yet: try next cycle
        if not agent.enabled:
            rec.agent = await asyncio.to_thread(
                sup.api.set_agent_enabled, self.pool_id, agent.id, True
            )
            rec.disabled_by_us = False
            sup._emit("agent_enabled", f"{rec.name} enabled on the server", rec.slot)
        self._want_enabled.discard(rec.slot)
