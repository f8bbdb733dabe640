"""How the simulated organisation reads demands: a job's, and the agent list's ``demands`` filter.

The organisation's own reading of azure-devops-api.md, written here and not taken
from the product (`gpuci_tui.core.azure.demands`): a bug shared by the product and
its fake would pass every test. From §1 and §2.4 of that file:

* a demand is a string: ``NAME`` (the agent has the capability), ``NAME -equals
  VALUE`` or ``NAME -gtVersion VALUE`` (§1: ``"Agent.Version -gtVersion 2.182.1"``);
* the agent list's ``demands`` query is comma-separated and keeps the agents that
  meet every one of them; capabilities are the system and the user ones;
* capability names are matched ignoring case (the agent keeps them in a
  case-insensitive dictionary), and ``-equals`` compares values ignoring case;
* ``-gtVersion`` is met by a version at least the demanded one (dotted numbers;
  anything from the first ``-`` on is a pre-release tag and not compared);
* a demand the service cannot read (an unknown operator, an operator without a
  value, an empty entry) is refused with HTTP 400 on the list, and on a job is
  met by no agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuci_tui.sim.records import AgentRecord

EQUALS = "-equals"
AT_LEAST = "-gtVersion"
SERVICE_VERSION_DEMAND = "agent.version"
"""The demand the service itself adds to jobs; every simulated agent meets it."""


class DemandSyntaxError(ValueError):
    """A demand the service cannot read (the agent list answers 400)."""


@dataclass(frozen=True)
class SimDemand:
    """One demand: a capability name, and an operator with its value (or none)."""

    name: str
    operator: str = ""
    value: str = ""

    def met_by(self, capabilities: Mapping[str, str]) -> bool:
        """Whether an agent with ``capabilities`` meets this demand."""
        wanted = self.name.casefold()
        have = next((v for k, v in capabilities.items() if k.casefold() == wanted), None)
        if have is None:
            return False
        if self.operator == EQUALS:
            return have.casefold() == self.value.casefold()
        if self.operator == AT_LEAST:
            return _at_least(have, self.value)
        return True


def read_demand(text: str) -> SimDemand:
    """``text`` as one demand.

    Raises:
        DemandSyntaxError: Empty, an unknown operator, or an operator without a value.
    """
    words = text.split()
    if not words:
        raise DemandSyntaxError("an empty demand")
    if len(words) == 1:
        return SimDemand(words[0])
    name, operator = words[0], words[1]
    value = text.strip()[len(name) :].strip()[len(operator) :].strip()
    if operator not in (EQUALS, AT_LEAST):
        raise DemandSyntaxError(f"unknown operator {operator!r} in {text.strip()!r}")
    if not value:
        raise DemandSyntaxError(f"{operator} without a value in {text.strip()!r}")
    return SimDemand(name, operator, value)


def read_filter(query: str | None) -> tuple[SimDemand, ...]:
    """The agent list's ``demands`` query (comma-separated) as demands; None or "" -> none.

    Raises:
        DemandSyntaxError: One entry cannot be read.
    """
    if query is None or not query.strip():
        return ()
    return tuple(read_demand(part) for part in query.split(","))


def meets_all(capabilities: Mapping[str, str], demands: Iterable[SimDemand]) -> bool:
    """Whether every demand is met."""
    return all(d.met_by(capabilities) for d in demands)


def job_can_run_on(capabilities: Mapping[str, str], demands: Iterable[str]) -> bool:
    """Whether an agent meets a job's demand strings (one it cannot read is never met).

    The service's own agent-version demand is left to the update rule (`SimAgentPackages`).
    """
    for text in demands:
        if text.strip().casefold().startswith(SERVICE_VERSION_DEMAND):
            continue
        try:
            if not read_demand(text).met_by(capabilities):
                return False
        except DemandSyntaxError:
            return False
    return True


def satisfies(agent: AgentRecord, demands: Iterable[str]) -> bool:
    """Whether an agent's capabilities (system and user) meet a job's demand strings."""
    return job_can_run_on(agent.all_capabilities, demands)


def _at_least(have: str, wanted: str) -> bool:
    mine, theirs = _numbers(have), _numbers(wanted)
    if theirs is None:
        return True  # a demand that names no version asks only that the capability exists
    if mine is None:
        return False
    width = max(len(mine), len(theirs))
    return mine + (0,) * (width - len(mine)) >= theirs + (0,) * (width - len(theirs))


def _numbers(text: str) -> tuple[int, ...] | None:
    release = text.strip().split("-", 1)[0]
    parts = release.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)
