"""The pool observer: reads our agents and the queue on a slow cadence and keeps Azure's health.

The host learns first from its own side (Docker's events, the agents' own
output lines); the organisation's reads confirm and fill in. A read of the
agents lists our lanes' agents (with their assigned jobs and their last
finished request) in one call and hands an immutable `PoolView` to the engine;
it never calls per slot, and the service filters the pool for us (`pool_scope`:
``demands``), so the cost grows neither with our slots nor with the other hosts
sharing the pool. Once an hour (or when a prune asks) a cycle also reads this
host's agents with capabilities (other instances' stale registrations) and, every
six hours, the whole pool's names (agents on our names the filter hides); how, and
what a refused filter costs, is `pool_reads`. When each read is due (the agents
every ``poll_interval`` and after job ends, the queue every third cycle and after
a job start, in place of the agents' read on an idle host) is `read_times`.

A fact only the organisation has (a new registration's id) is read by the
engine's `ReadAgent` (one agent, by name), through the executor.

Failures never stop local replenishing: the observer backs off (as told by a
``Retry-After``, one poll interval while the organisation is down, longer for
auth failures) and the health says why. The
engine's own writes report their failures here too (`failed`), so one
health and one backoff cover every call to the organisation. A failed read
is the engine's news too (`PoolUnread`): it keeps its slots taking jobs
without writes meanwhile (`planning.refused`).

It also checks, rarely, that the organisation lets our identity manage the
pool (`pool_role`), and tells the engine (`steps.PoolRole`): a refusal holds
every start with the reason instead of letting each slot fail and park.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from gpuci_tui.core.azure.demands import waiting_for_agents
from gpuci_tui.core.engine.agent_versions import demanded_version
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import PoolRead, PoolRole, PoolUnread, QueueRead
from gpuci_tui.core.engine.steps import Observation
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureError,
    AzureHeldBackError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.core.host.observers.pool_reads import (
    UNMARKED_RECHECK,
    AgentReads,
)
from gpuci_tui.core.host.observers.pool_role import (
    ROLE_INTERVAL,
    ROLE_RETRY,
    ROLE_SOON_GAP,
    PoolRoleApi,
    refusal,
)
from gpuci_tui.core.host.observers.pool_scope import ReadScope
from gpuci_tui.core.host.observers.read_times import CAPABILITIES_INTERVAL, ReadTimes
from gpuci_tui.core.models import HealthSnapshot, HealthState
from gpuci_tui.core.protocols import Agent, AgentPoolApi, JobRequest, Pool, at_cap
from gpuci_tui.core.secrets.credentials import Credential, renewal_due

log = logging.getLogger("gpuci_tui.supervisor.azure")

MAX_ERROR_BACKOFF = 60.0
#: A read our own cap held back comes again no sooner than this.
HELD_BACK_RETRY = 1.0
#: While the organisation fails, how often a write or history read waiting for the
#: observer's probe looks again (a look sends nothing).
PROBE_WAIT = 1.0
#: Health states in which any part may call (no failure seen since the last answer).
_CALLABLE = frozenset({HealthState.OK, HealthState.UNKNOWN})


class PoolObserver:
    """Reads the pool on a cycle and owns the organisation's health."""

    def __init__(
        self,
        api: AgentPoolApi,
        pool_name: str,
        *,
        clock: Callable[[], float],
        interval: float,
        report: Callable[[str, str], None],
        scope: Callable[[], ReadScope] | None = None,
        role_retry: float = ROLE_RETRY,
    ) -> None:
        """Create the observer (nothing is read until `run`).

        Args:
            api: The organisation's client.
            pool_name: The pool to read.
            clock: Wall clock.
            interval: Seconds between reads when nothing waits (``poll_interval``).
            report: Called with (kind, message) for operator-facing events.
            scope: Our agents in the pool, now (a reload changes the groups); None:
                every agent of the pool is ours to see (no filter).
            role_retry: Seconds between checks of the pool role while it is refused
                (``[supervisor] role_retry``).
        """
        self.api = api
        self.pool_name = pool_name
        self.clock = clock
        self.interval = interval
        self.role_retry = role_retry
        self.health = HealthSnapshot()
        self.pool_id: int | None = None
        self._pool: Pool | None = None
        self._next_role = 0.0
        self._last_role: float | None = None
        self.role_refused = ""
        """Why the organisation refuses our identity the pool (empty: it does not)."""
        self._report = report
        self._wake = asyncio.Event()
        self._error_streak = 0
        self._pat_warned = ""
        self.times = ReadTimes(interval)
        """When each read is due (`read_times`)."""
        self._queued = 0
        self._queued_capped = False
        self._waiting: tuple[str, ...] = ()
        self._running = 0
        self.on_capabilities: Callable[[tuple[Agent, ...], float], None] | None = None
        """Called with the agents (and the read's start) after each read with capabilities."""
        self.on_read: list[Callable[[PoolView, bool], None]] = []
        """Called after each read of the agents with its view and whether it is the first
        answer since a failed call (the job recorders: their agents' finished requests)."""
        self._failed_since_read = False
        self.demanded_version: str | None = None
        """The highest agent version queued jobs demand (None: none demand one)."""
        self.scope = scope
        self.reads = AgentReads(api, scope, report)
        """How a cycle reads the agents (the filter, the hourly check, their fallbacks)."""

    # ------------------------------------------------------------------ steering

    def poll_soon(self) -> None:
        """Read the agents now (after a command)."""
        if self.times.ask(self.clock()):
            self._wake.set()

    def job_ended(self) -> None:
        """A job ended here: read the agents once, soon, in a read the ends around it share.

        The read confirms and fills in what the host saw (the next job's request and
        queue times). Nothing while the organisation is backing off: the backoff
        decides when to call. The queue is not read for it: it stays periodic.
        """
        if self._calling() and self.times.job_ended(self.clock()):
            self._wake.set()

    def job_started(self) -> None:
        """A job started here: read the queue a moment later (a burst shows), once per 10 s.

        The agents' own lines say which lanes are busy; only the queue says how many
        jobs wait behind them ("auto" standby grows on it). Nothing while backing off.
        """
        if self._calling() and self.times.job_started(self.clock()):
            self._wake.set()

    def _calling(self) -> bool:
        """The organisation answers and no backoff holds our calls."""
        return self.blocked_until() <= self.clock() and self.health.state is HealthState.OK

    def check_role_soon(self) -> None:
        """A registration failed (or a write got a 403): ask whether the role is still there.

        At most one check per `ROLE_SOON_GAP`; while the role is missing, the
        ``role_retry`` cadence is kept (a failing registration must not shorten it).
        """
        if self.role_refused or not isinstance(self.api, PoolRoleApi):
            return  # a client that cannot say is never held: no read for nothing
        soon = 0.0 if self._last_role is None else self._last_role + ROLE_SOON_GAP
        if soon < self._next_role:
            self._next_role = soon
            if soon <= self.clock():
                self._wake.set()  # due now; else the cycle that comes first asks

    def want_capabilities(self) -> None:
        """Read the agents with their capabilities now (a dry run or prune asked for them)."""
        self.times.next_capabilities = 0.0
        self.times.ask(self.clock())
        self._wake.set()

    def blocked_until(self) -> float:
        """Until when calls other than this observer's reads wait (0.0: they may go now).

        One backoff covers reads, writes and history reads alike: after a failure
        or a rate limit, nothing is sent before ``health.retry_at``. After that the
        observer's next read is the only probe; writes and history reads wait until
        it succeeds. Each of them would bring its own call, all at the same instant:
        a drill measured four callers sending five attempts each at every retry time
        of a failing organisation. The probe itself is one attempt: the client makes
        no in-call retries while the organisation is known down (`azure.outage`).
        """
        if self.health.state in _CALLABLE or self.health.retry_at is None:
            return 0.0
        return max(self.health.retry_at, self.clock() + PROBE_WAIT)

    # ------------------------------------------------------------------ loop

    async def run(self, deliver: Callable[[Observation], None]) -> None:
        """Read until cancelled, handing every successful read to ``deliver``."""
        while True:
            self._wake.clear()
            delay = await self.cycle(deliver) if self.due() else self.until_due()
            if self.blocked_until() > self.clock():
                # A backoff is not cut short by a wake: a command or a job end during
                # an outage would otherwise hammer a failing organisation (or ignore
                # its Retry-After).
                await asyncio.sleep(delay)
                continue
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a
            # cancellation that races with the event being set, and the
            # supervisor's shutdown would then wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    def due(self) -> bool:
        """Some read is due now (agents, queue, the hourly check or the role check)."""
        return self.until_due() <= 0.0

    def until_due(self) -> float:
        """Seconds until the next read is due (0.0: now)."""
        due = self.times.next_due(self._watched)
        if self._pool is not None and isinstance(self.api, PoolRoleApi):
            due = min(due, self._next_role)
        return max(0.0, due - self.clock())

    @property
    def _watched(self) -> bool:
        """The hourly check is wanted: a stale watch listens, or the reads are filtered."""
        return self.on_capabilities is not None or self.scope is not None

    async def cycle(self, deliver: Callable[[Observation], None]) -> float:
        """The reads that are due, in one go; returns the delay until the next."""
        times = self.times
        try:
            if self.pool_id is None:
                pool = await asyncio.to_thread(self.api.resolve_pool, self.pool_name)
                self.pool_id, self._pool = pool.id, pool
            began = self.clock()
            full = self._watched and times.capabilities_due(began)
            read_agents, read_queue = times.reads_due(began, full)
            everyone: tuple[Agent, ...] = ()
            agents: tuple[Agent, ...] | None = None
            if read_agents:
                everyone, agents = await self.reads.read(self.pool_id, began, full)
            if read_queue:
                requests = await asyncio.to_thread(self.api.list_job_requests, self.pool_id)
                self._count_requests(requests)
                times.queue_read(began)
            role = await self._check_role(began)
        except AzureHeldBackError as exc:
            # Our own cap, not the organisation: its health stays; the read comes again.
            log.debug("%s", exc)
            return max(exc.retry_after, HELD_BACK_RETRY)
        except AzureError as exc:
            if isinstance(exc, AzureNotFoundError):
                self.pool_id = None  # the pool was deleted or renamed: resolve it again
            delay = self.failed(exc)
            # The engine's own word that the organisation refuses us (`planning.refused`).
            deliver(PoolUnread(self.clock(), self.health.retry_at or self.clock(), str(exc)))
            return delay
        self.answered()
        if agents is not None:
            times.agents_read(began)
            view = PoolView(
                pool_id=self.pool_id,
                began_at=began,
                agents=agents,
                queued_jobs=self._queued,
                running_jobs=self._running,
                jobs_read_at=times.queue_read_at,
                waiting=self._waiting,
                queued_capped=self._queued_capped,
                ours_only=self.scope is not None,
            )
            deliver(PoolRead(view))
            recovered, self._failed_since_read = self._failed_since_read, False
            for listener in self.on_read:
                listener(view, recovered)
        elif read_queue:
            queue = QueueRead(
                self._queued, self._running, began, self._waiting, self._queued_capped
            )
            deliver(queue)
        if role is not None:
            deliver(role)
        if full:
            again = UNMARKED_RECHECK if self.reads.unmarked else CAPABILITIES_INTERVAL
            times.next_capabilities = began + again
            if self.on_capabilities is not None:
                self.on_capabilities(everyone, began)
        return self.until_due()

    async def _check_role(self, began: float) -> PoolRole | None:
        """Ask whether our identity may manage the pool, when a check is due (one GET)."""
        pool = self._pool
        if pool is None or began < self._next_role or not isinstance(self.api, PoolRoleApi):
            return None
        self._last_role = began
        try:
            manageable = await asyncio.to_thread(self.api.can_manage_pool, pool)
        except AzureRateLimitError:
            raise  # the one backoff applies to every call
        except AzureError as exc:
            # The pool was read: a failed check must not lose that read (or mark the
            # organisation down); it is asked again soon, the word so far stands.
            log.warning("could not check the pool role: %s", exc)
            self._next_role = began + ROLE_SOON_GAP
            return None
        credential = getattr(self.api, "credential", None)
        who = credential.describe() if isinstance(credential, Credential) else ""
        refused = "" if manageable else refusal(who, pool.name)
        self._next_role = began + (self.role_retry if refused else ROLE_INTERVAL)
        if refused != self.role_refused:
            log.warning("pool role: %s", refused or "the identity may manage the pool again")
        self.role_refused = refused
        return PoolRole(began, refused)

    # ------------------------------------------------------------------ health

    def answered(self) -> None:
        """The organisation answered a call: healthy again."""
        self._error_streak = 0
        identity, expires = self._identity()
        now = self.clock()
        if self.role_refused:
            # Said as an auth failure (header, status), but without a retry time: reads,
            # job results and the role checks go on (`blocked_until` stays 0).
            message = (
                f"{self.role_refused} (agent starts wait; checked again every "
                f"{self.role_retry:.0f} s; running jobs are not affected)"
            )
            self.health = HealthSnapshot(
                HealthState.AUTH_FAILED, message, now, None, identity, expires, self.role_refused
            )
            return
        self.health = HealthSnapshot(HealthState.OK, "", now, None, identity, expires)

    def failed(self, exc: AzureError) -> float:
        """Record a failed call; returns the seconds to wait before calling again."""
        now = self.clock()
        self._failed_since_read = True
        self._error_streak += 1
        if isinstance(exc, AzureRateLimitError):
            state, delay = HealthState.RATE_LIMITED, max(exc.retry_after, 1.0)
        elif isinstance(exc, AzureAuthError | AzureScopeError):
            state, delay = HealthState.AUTH_FAILED, MAX_ERROR_BACKOFF
            if isinstance(exc, AzureScopeError):
                self.check_role_soon()  # a 403 on a write: is the pool's role gone?
        elif isinstance(exc, AzureUnreachableError | AzureServerError):
            state = (
                HealthState.UNREACHABLE
                if isinstance(exc, AzureUnreachableError)
                else HealthState.ERROR
            )
            delay = self.outage_delay(exc)
        else:
            state = HealthState.ERROR
            delay = min(2.0 * 2 ** (self._error_streak - 1), MAX_ERROR_BACKOFF)
        message = f"{exc} (local slots are still replenished; next try in {delay:.0f} s)"
        if self.health.state != state or self.health.message != message:
            self._report("azure_error", str(exc))
        self.health = HealthSnapshot(state, message, now, now + delay, *self._identity())
        return delay

    def outage_delay(self, exc: AzureUnreachableError | AzureServerError) -> float:
        """Seconds until the next probe of an organisation that is down (5xx, unreachable).

        What it asks (a 5xx's ``Retry-After``), else one poll interval, however long
        it has failed: a failing organisation is probed once per interval, as a
        healthy one is read, each probe one attempt (`azure.outage`), and the first
        read after it is back comes within one interval. A backoff that grew past the interval (2, 4, 8 ... 60 s; the
        engine's failed writes lengthen the streak too) left lanes waiting up to
        a minute on an organisation that had answered again for most of it.
        """
        told = exc.retry_after if isinstance(exc, AzureServerError) else None
        return max(told, 1.0) if told is not None else self.interval

    def _identity(self) -> tuple[str, float | None]:
        """The client's credential in words (unless a plain PAT) and a PAT's expiry.

        Fakes of the client have neither. A PAT near its expiry is reported once.
        """
        credential = getattr(self.api, "credential", None)
        if not isinstance(credential, Credential):
            return "", None
        text = credential.describe()
        text = "" if text == "PAT" else text
        expires = renewal_due(credential)
        if text.startswith("PAT") and text != self._pat_warned:
            self._pat_warned = text
            self._report("pat_expiring", text)
        return text, expires

    def _count_requests(self, requests: list[JobRequest]) -> None:
        self._queued_capped = at_cap(requests)
        self._waiting = waiting_for_agents(requests)
        self._queued = sum(1 for r in requests if r.assign_time is None and r.result is None)
        # What queued jobs demand of the agent (Agent.Version -gtVersion): warned about
        # before it bites, when it is newer than an image's agent (issue 20).
        self.demanded_version = demanded_version(
            d for r in requests if r.assign_time is None for d in r.demands
        )
        self._running = sum(1 for r in requests if r.assign_time is not None and r.result is None)
