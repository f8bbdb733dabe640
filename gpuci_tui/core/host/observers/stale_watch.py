"""Stale registrations of one pool: found on the pool observer's reads, removed on demand or by age.

The rule (which registration is stale) is `core.engine.stale`; this module
gathers what it needs and carries out the removals:

* the agents with their capabilities come from the `PoolObserver`: one of its
  cycles every `CAPABILITIES_INTERVAL` (an hour) reads the whole pool with
  ``includeCapabilities`` (the other cycles ask the service for our lanes only, and
  another instance's leftovers are not among them), and a dry run or a prune asks for
  such a read at once (`PoolObserver.want_capabilities`);
* before each DELETE the agent is read again (with capabilities) and judged
  again: one that came online, took a job or was taken by a lane is kept;
* each removal is an event; failures go to the observer's health and backoff,
  like every other call to the organisation.

`remove_stale` and the helpers are blocking, so the CLI can use them directly
when no daemon runs; `StaleWatch` is the daemon's asynchronous side.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from gpuci_tui.core.command_types import CommandResult, Prune
from gpuci_tui.core.config.loader import Config, agent_groups
from gpuci_tui.core.config.paths import lock_path
from gpuci_tui.core.engine.lifecycle import Lane, lane_name
from gpuci_tui.core.engine.stale import (
    MARKER_HOST,
    MARKER_INSTANCE,
    Ownership,
    due_for_removal,
    stale_registrations,
    verdict,
)
from gpuci_tui.core.errors import AzureError, GpuciError
from gpuci_tui.core.formatting import duration
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.pool_scope import own_instances
from gpuci_tui.core.protocols import Agent, AgentPoolApi
from gpuci_tui.core.registrations import StaleRegistration
from gpuci_tui.core.wording import plural

__all__ = [
    "SCAN_TIMEOUT", "Removal", "StaleWatch", "current_lane_names", "describe",
    "held_by_a_daemon", "own_instances", "ownership", "remove_stale", "summary",
]  # fmt: skip

#: How long a dry run or prune waits for the observer's read with capabilities.
SCAN_TIMEOUT = 30.0

Report = Callable[..., None]


# --------------------------------------------------------------------------- blocking helpers


def current_lane_names(
    config: Config, pool: str, extra_slots: Iterable[int] = ()
) -> frozenset[str]:
    """Every name a lane of ``config``'s groups in ``pool`` registers (both lanes of every slot).

    ``extra_slots``: slot numbers the supervisor still holds beyond ``count``
    (draining after a scale-down), whose names are in use too.
    """
    names: set[str] = set()
    for group in agent_groups(config):
        if group.pool != pool:
            continue
        prefix = group.agents.name_prefix
        for number in {*range(group.agents.count), *extra_slots}:
            names.update(lane_name(prefix, number, lane) for lane in Lane)
    return frozenset(names)


def held_by_a_daemon(instance: str) -> bool:
    """Whether a daemon (or a ``--foreground`` console) on this host holds ``instance``'s lock.

    A shared, non-blocking ``flock`` taken and dropped at once: it fails only
    while the holder's exclusive lock is there. A marker from elsewhere may name
    anything, so an instance that is no valid id is simply not held.
    """
    try:
        path = lock_path(instance)
    except (GpuciError, ValueError):
        return False
    try:
        handle = open(path)  # noqa: SIM115 - closed below
    except OSError:
        return False  # no lock file: no daemon of that instance ever ran here
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        handle.close()  # also drops our shared lock
    return False


def ownership(
    instances: frozenset[str], host: str, agents: Iterable[Agent], *, probe: Callable[[str], bool]
) -> Ownership:
    """Our `Ownership`, with the other live instances of this host among ``agents``' markers."""
    others = (
        {
            caps.get(MARKER_INSTANCE, "")
            for caps in (a.system_capabilities or {} for a in agents)
            if caps.get(MARKER_HOST) == host
        }
        - instances
        - {""}
    )
    return Ownership(instances, host, frozenset(i for i in others if probe(i)))


@dataclass
class Removal:
    """What a prune did."""

    removed: list[StaleRegistration] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """``name: why`` of each one no longer stale when read again."""
    error: str | None = None
    failure: AzureError | None = None
    """The call that failed (for the observer's health and backoff)."""


def remove_stale(
    api: AgentPoolApi,
    pool_id: int,
    chosen: Iterable[StaleRegistration],
    owner: Ownership,
    current_names: frozenset[str],
    report: Report,
) -> Removal:
    """Delete each of ``chosen`` that is still stale when read again; stop at the first failure."""
    done = Removal()
    for stale in chosen:
        try:
            agent = api.get_agent(pool_id, stale.agent_id, include_capabilities=True)
            if agent is None:
                done.kept.append(f"{stale.name}: already gone")
                continue
            judged = verdict(agent, owner, current_names)
            if not judged.stale:
                done.kept.append(f"{stale.name}: kept, {judged.why}")
                continue
            api.delete_agent(pool_id, stale.agent_id)
        except AzureError as exc:
            done.error, done.failure = f"stopped at {stale.name}: {exc}", exc
            return done
        done.removed.append(stale)
        report(
            "registration_removed",
            f"removed stale registration {stale.name} (id {stale.agent_id}): {stale.reason}",
            agent=stale.name,
        )
    return done


def describe(stale: Iterable[StaleRegistration]) -> list[str]:
    """One line per registration: name, id, how long offline and since when, why (the dry run)."""
    lines = []
    for s in stale:
        since = f" (since {s.since[:16].replace('T', ' ')} UTC)" if s.since else ""
        when = f"{s.status} {duration(s.offline_seconds)}{since}"
        lines.append(f"{s.name}  id {s.agent_id}  {when}  {s.reason}")
    return lines


def summary(done: Removal) -> str:
    """The prune's answer in words."""
    parts = [f"removed {plural(len(done.removed), 'stale registration')}"]
    parts += done.kept
    if done.error:
        parts.append(done.error)
    return "; ".join(parts)


# --------------------------------------------------------------------------- the daemon's side


def _collect(into: list[tuple[str, str, str]], kind: str, message: str, agent: str = "") -> None:
    """A `Report` that keeps the events for the loop to report (see `StaleWatch._remove`)."""
    into.append((kind, message, agent))


class StaleWatch:
    """The stale registrations of one pool, as the daemon sees them (and removes them)."""

    def __init__(
        self,
        api: AgentPoolApi,
        observer: PoolObserver,
        *,
        instances: frozenset[str],
        host: str,
        current_names: Callable[[], frozenset[str]],
        clock: Callable[[], float],
        report: Report,
        remove_after: float | None = None,
        probe: Callable[[str], bool] = held_by_a_daemon,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """Listen to ``observer``'s reads with capabilities.

        Args:
            api: The organisation.
            observer: The pool's observer (its reads, health and backoff).
            instances: This daemon's instance ids in the pool.
            host: This host's marker.
            current_names: The names the current lanes register, now.
            clock: Wall clock.
            report: ``report(kind, message, agent=...)`` for events.
            remove_after: ``[azure] remove_offline_after`` in seconds (None: off).
            probe: Whether another daemon on this host holds an instance.
            changed: Called when the list changed (a new snapshot is due).
        """
        self.api = api
        self.observer = observer
        self.instances = instances
        self.host = host
        self.current_names = current_names
        self.clock = clock
        self.report = report
        self.remove_after = remove_after
        self.probe = probe
        self.changed = changed
        self.stale: tuple[StaleRegistration, ...] = ()
        """From the latest read with capabilities."""
        self.owner = Ownership(instances, host)
        self._read = asyncio.Event()
        self._busy = asyncio.Lock()
        self._auto: asyncio.Task[None] | None = None
        observer.on_capabilities = self._on_read

    def close(self) -> None:
        """Cancel an automatic removal in progress (the daemon stops; the next run checks again)."""
        if self._auto is not None:
            self._auto.cancel()

    def _on_read(self, agents: tuple[Agent, ...], began: float) -> None:
        self.owner = ownership(self.instances, self.host, agents, probe=self.probe)
        self.stale = stale_registrations(agents, self.owner, self.current_names(), self.clock())
        self._read.set()
        self.changed()
        if self.remove_after is not None and self._auto is None:
            due = due_for_removal(self.stale, self.remove_after)
            if due:
                self._auto = asyncio.ensure_future(self._remove_due(due))

    async def _remove_due(self, due: tuple[StaleRegistration, ...]) -> None:
        try:
            async with self._busy:
                done = await self._remove(due)
            if done.error:
                self.report("azure_error", f"remove_offline_after: {done.error}")
        finally:
            self._auto = None

    async def _remove(self, chosen: Iterable[StaleRegistration]) -> Removal:
        pool_id = self.observer.pool_id
        if pool_id is None:
            return Removal(error="the pool has not been read yet")
        done = Removal()
        for stale in tuple(chosen):
            # One agent per thread call, its events reported here on the loop: the
            # reporter is not for other threads, and each removal shows as it happens.
            emitted: list[tuple[str, str, str]] = []
            step = await asyncio.to_thread(
                remove_stale,
                self.api,
                pool_id,
                (stale,),
                self.owner,
                self.current_names(),
                partial(_collect, emitted),
            )
            for kind, message, agent in emitted:
                self.report(kind, message, agent=agent)
            done.removed += step.removed
            done.kept += step.kept
            if step.failure is not None:
                done.error, done.failure = step.error, step.failure
                break
        gone = {s.agent_id for s in done.removed}
        self.stale = tuple(s for s in self.stale if s.agent_id not in gone)
        if done.failure is not None:
            self.observer.failed(done.failure)  # one health and one backoff for every call
        self.changed()
        return done

    async def scan(self) -> tuple[StaleRegistration, ...] | str:
        """A fresh read with capabilities (through the observer); the stale ones, or why not."""
        if self.observer.blocked_until() > self.clock():
            return f"the organisation is not answering: {self.observer.health.message}"
        self._read.clear()
        self.observer.want_capabilities()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SCAN_TIMEOUT):
                await self._read.wait()
                return self.stale
        return f"no read of the pool within {SCAN_TIMEOUT:.0f} s: {self.observer.health.message}"

    async def prune(self, command: Prune) -> CommandResult:
        """Carry out a `Prune` on this pool."""
        async with self._busy:
            found = await self.scan()
            if isinstance(found, str):
                return CommandResult(False, found)
            chosen = [
                s for s in found if command.agent_ids is None or s.agent_id in command.agent_ids
            ]
            ids = tuple(s.agent_id for s in chosen)
            if command.dry_run:
                if not chosen:
                    return CommandResult(True, "no stale registrations", ())
                lines = describe(chosen)
                head = f"{plural(len(chosen), 'stale registration')} would be removed:"
                return CommandResult(True, "\n".join([head, *lines]), ids)
            done = await self._remove(chosen)
            removed = tuple(s.agent_id for s in done.removed)
            return CommandResult(done.error is None, summary(done), removed)
