"""How the pool observer reads the agents: ours through the service's filter, the rest rarely.

Each cycle asks the service for our lanes only (`pool_scope.ReadScope.demands`). The
hourly check (and a prune's) adds this host's agents with capabilities, what the
stale watch judges, and every `NAMES_INTERVAL` the whole pool's names, to find an
agent on our names the filter hides (registered before markers, or by another host
given our names): while there is one, every cycle reads the whole pool as before
the filter, narrowed here, so the engine still sees it. A filter the service
refuses (HTTP 400) costs one warning and event; the whole pool is read, narrowed
here, until it is tried again (`FILTER_RETRY`). Whatever is read, the engine gets
the agents on our lanes' names: the same view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gpuci_tui.core.errors import AzureBadRequestError, AzureError
from gpuci_tui.core.host.observers.pool_scope import ReadScope, describe_unmarked
from gpuci_tui.core.protocols import Agent, AgentPoolApi

log = logging.getLogger("gpuci_tui.supervisor.azure")

#: After the service refused the ``demands`` filter (HTTP 400), it is tried again this late.
FILTER_RETRY = 3600.0
#: The whole pool's names (who is on our names but hidden by the filter) are read with the
#: hourly check this often: at 5,000 agents they are ~3 MB, a misconfiguration is rare.
NAMES_INTERVAL = 6 * 3600.0
#: While agents on our names lack our marker (the whole pool is read every cycle, as before
#: the filter), the check (with the names) comes this often, to see them go.
UNMARKED_RECHECK = 600.0


class AgentReads:
    """One pool's agent reads: the filter, the rarer checks, and what they found."""

    def __init__(
        self,
        api: AgentPoolApi,
        scope: Callable[[], ReadScope] | None,
        report: Callable[[str, str], None],
    ) -> None:
        """Read through ``api``; ``scope`` says which agents are ours (None: every one)."""
        self.api = api
        self.scope = scope
        self._report = report
        self._filter_refused_until = 0.0
        self._next_names = 0.0
        self.unmarked: tuple[str, ...] = ()
        """Agents on our names the filter hides (seen on the last check with the names)."""

    async def read(
        self, pool_id: int, began: float, full: bool
    ) -> tuple[tuple[Agent, ...], tuple[Agent, ...]]:
        """One cycle's read of the agents: (what the stale watch gets, the engine's view).

        Our agents only, filtered by the service. ``full`` (hourly, or when a prune
        asks): also this host's agents with capabilities (every instance's: the stale
        watch judges only those) and, less often, the whole pool's names (who the filter
        hides).
        Without the filter (refused lately, or an agent on our names lacks our marker):
        the whole pool, narrowed here, with capabilities when ``full``.
        """
        scope = self.scope() if self.scope is not None else None
        demands = scope.demands() if scope is not None else ()
        usable = bool(demands) and began >= self._filter_refused_until
        if scope is not None and usable:
            asked = scope.host_demands() if full else demands
            try:
                if full and asked:
                    names = began >= self._next_names or bool(self.unmarked)
                    if names:
                        self._next_names = began + NAMES_INTERVAL
                    return await self._host_and_names(pool_id, scope, asked, demands, names)
                if not full and not self.unmarked:
                    agents = await asyncio.to_thread(
                        self.api.list_agents, pool_id, demands=asked, include_last_completed=True
                    )
                    return tuple(agents), scope.narrow(agents)
            except AzureBadRequestError as exc:
                self._filter_refused(began, asked, exc)
        agents = await asyncio.to_thread(
            self.api.list_agents, pool_id, include_capabilities=full, include_last_completed=True
        )
        if scope is None:
            return tuple(agents), tuple(agents)
        if full:
            self._note_hidden(scope.unmarked(agents))
        return tuple(agents), scope.narrow(agents)

    async def _host_and_names(
        self,
        pool_id: int,
        scope: ReadScope,
        host_filter: tuple[str, ...],
        demands: tuple[str, ...],
        names: bool,
    ) -> tuple[tuple[Agent, ...], tuple[Agent, ...]]:
        """This host's agents with capabilities, ours as the filter gives them, and (``names``,
        every `NAMES_INTERVAL`) the whole pool's names: who is on our names but hidden by the
        filter. At most three reads (four when an agent looks hidden); the names without
        capabilities are less than half the whole pool with them (~3 MB at 5,000 agents
        instead of ~7).
        """
        mine = await asyncio.to_thread(
            self.api.list_agents,
            pool_id,
            demands=host_filter,
            include_capabilities=True,
            include_last_completed=True,
        )
        seen = mine
        if demands != host_filter:
            seen = await asyncio.to_thread(
                self.api.list_agents, pool_id, demands=demands, include_last_completed=True
            )
        if not names:
            return tuple(mine), scope.narrow(seen)
        everyone = await asyncio.to_thread(self.api.list_agents, pool_id)
        shown = {a.id for a in seen}
        if any(a.id not in shown for a in scope.narrow(everyone)):
            # A lane that registered between the filtered read and this one (its marker comes
            # with its registration) is on our names but missing from the filtered answer: it
            # is hidden only if a second filtered look misses it too. (Seen in the demo: the
            # whole pool was then read until the next check, ten minutes later.)
            seen = await asyncio.to_thread(
                self.api.list_agents, pool_id, demands=demands, include_last_completed=True
            )
            shown |= {a.id for a in seen}
        with_capabilities = {a.id: a for a in mine}
        hidden = tuple(
            with_capabilities.get(a.id, a) for a in scope.narrow(everyone) if a.id not in shown
        )
        self._note_hidden(hidden)
        return tuple(mine), (*scope.narrow(seen), *hidden)

    def _filter_refused(self, began: float, demands: tuple[str, ...], exc: AzureError) -> None:
        """The service refused the ``demands`` filter: one warning, the whole pool for an hour."""
        first = self._filter_refused_until == 0.0
        self._filter_refused_until = began + FILTER_RETRY
        if first:
            message = (
                f"Azure DevOps refused the agent filter {', '.join(demands)!r} ({exc}); reading "
                f"the whole pool instead (larger answers), trying the filter again every "
                f"{FILTER_RETRY / 3600:.0f} h"
            )
            log.warning("%s", message)
            self._report("pool_filter_refused", message)

    def _note_hidden(self, unmarked: tuple[Agent, ...]) -> None:
        """Note agents on our names the filter would leave out; report a change once."""
        names = tuple(sorted(a.name for a in unmarked))
        if names and names != self.unmarked:
            who = ", ".join(describe_unmarked(a) for a in unmarked)
            message = (
                f"agents on this host's lane names without its marker: {who}; the whole pool "
                "is read until they are registered again by this host"
            )
            log.warning("%s", message)
            self._report("pool_foreign_names", message)
        self.unmarked = names
