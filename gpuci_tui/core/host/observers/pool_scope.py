"""Which agents of a pool are ours, as the service can filter them and as we check them.

Every lane's container carries its instance and host markers in its environment,
and the agent reports its environment as system capabilities (`engine.stale`). So
the pool's agent list can ask the service for our lanes only, with a ``demands``
filter (azure-devops-api.md §2.4): a pool shared with 5,000 agents of other hosts
answers a few KB instead of 2 MB. One instance in the pool filters on its marker
(``GPUCI_INSTANCE -equals ID``); several groups of this daemon in one pool (each
its own instance) filter on the host's (``GPUCI_HOST -equals HOST``): demands all
hold together, so one read cannot ask for several instances.

Whatever the service answers, the view the engine gets holds the agents on our
lanes' names (`ReadScope.narrow`): a filtered read and the full one (when the
service refuses the filter, or once an hour) give the engine the same view.
An agent on one of our names without our marker (registered before markers, or
by another host given our names) would be left out by the filter:
`ReadScope.unmarked` finds such agents on a read with capabilities, and the
observer reads the whole pool while they are there. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuci_tui.core.config.loader import Config, agent_groups, for_group, instance_id
from gpuci_tui.core.engine.lifecycle import LANES
from gpuci_tui.core.engine.stale import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.core.protocols import Agent

_LANE_SUFFIX = "".join(lane.value for lane in LANES[1:])


@dataclass(frozen=True)
class ReadScope:
    """Our agents in one pool: the groups' instance ids, this host, their name prefixes."""

    instances: frozenset[str]
    host: str
    prefixes: frozenset[str]

    def demands(self) -> tuple[str, ...]:
        """The ``demands`` filter that asks the service for our agents (empty: none fits)."""
        if len(self.instances) == 1:
            (instance,) = self.instances
            return (f"{MARKER_INSTANCE} -equals {instance}",)
        return self.host_demands() if self.instances else ()

    def host_demands(self) -> tuple[str, ...]:
        """The filter for this host's agents, every instance's (what the stale watch judges)."""
        return (f"{MARKER_HOST} -equals {self.host}",) if self.host and " " not in self.host else ()

    def holds(self, name: str) -> bool:
        """Whether ``name`` is one of our lanes' (``PREFIX-N``, ``PREFIX-N-b``, ...)."""
        return any(_lane_name(prefix).fullmatch(name) for prefix in self.prefixes)

    def narrow(self, agents: Iterable[Agent]) -> tuple[Agent, ...]:
        """The agents on our lanes' names (what a filtered read gives the engine)."""
        return tuple(a for a in agents if self.holds(a.name))

    def marked(self, agent: Agent) -> bool:
        """Whether ``agent`` reports our marker (it needs its capabilities read)."""
        caps = agent.system_capabilities or {}
        if len(self.instances) == 1:
            return caps.get(MARKER_INSTANCE, "") in self.instances
        return caps.get(MARKER_HOST, "") == self.host

    def unmarked(self, agents: Iterable[Agent]) -> tuple[Agent, ...]:
        """Agents on our names the filter would not return: no marker, or someone else's.

        Only meaningful on a read with capabilities (without them nothing is marked).
        """
        return tuple(a for a in self.narrow(agents) if self.demands() and not self.marked(a))


def own_instances(config: Config, pool: str) -> frozenset[str]:
    """The instance ids of ``config``'s groups in ``pool`` (what their agents' markers say)."""
    return frozenset(
        instance_id(for_group(config, g)) for g in agent_groups(config) if g.pool == pool
    )


def read_scope(config: Config, pool: str, host: str) -> ReadScope:
    """Our agents in ``pool`` under ``config`` (its groups there), on ``host``."""
    prefixes = (g.agents.name_prefix for g in agent_groups(config) if g.pool == pool)
    return ReadScope(own_instances(config, pool), host, frozenset(prefixes))


def _lane_name(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(prefix)}-\d+(-[{_LANE_SUFFIX}])?")


def lane_names(prefix: str) -> Callable[[str], bool]:
    """Whether a name is one of the lanes of ``prefix`` (one group's agents)."""
    pattern = _lane_name(prefix)
    return lambda name: pattern.fullmatch(name) is not None


def describe_unmarked(agent: Agent) -> str:
    """Whose an agent on our name is, in words (for the event)."""
    caps = agent.system_capabilities or {}
    host, instance = caps.get(MARKER_HOST, ""), caps.get(MARKER_INSTANCE, "")
    if not caps:
        return f"{agent.name} (not registered by this host)"
    if not instance:
        return f"{agent.name} (registered without a gpuci-tui marker)"
    return f"{agent.name} (registered by host {host or '(unnamed)'}, instance {instance})"
