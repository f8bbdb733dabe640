r"""Demands of a job request against an agent's capabilities, as Azure DevOps matches them.

Rules taken from the service's own demand classes
(``Microsoft.TeamFoundation.DistributedTask.WebApi.Demand*``):

- A demand is ``name``, ``name -equals value`` or ``name -gtVersion value``
  (regex ``^(\S+)(\s+-(\S+)\s+(.*))?$``). The operator is spelled exactly so;
  any other (``-EQUALS``, ``-ltVersion``) is not a demand the service parses.
- Capability names are looked up case-insensitively (the agent sends them in a
  dictionary with ``OrdinalIgnoreCase``); ``-equals`` compares values
  case-insensitively too.
- ``-gtVersion`` is "at least": met when the capability's version is greater
  than **or equal to** the demand's. Versions are .NET ``System.Version``
  (2 to 4 numeric parts; anything from the first ``-`` on is dropped). An
  unparsable demand version is met by any present capability, an unparsable
  capability version meets nothing, two unparsable ones compare equal: so
  ``-gtVersion 12`` (one part, not a .NET version) is met by every value.
- A demand on a name the agent lacks is never met.

Pure: used by the simulated organisation (matchedAgents, dispatch), the pool
observer (why a job waits) and the Kubernetes export.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuci_tui.core.protocols import JobRequest

EXISTS = "exists"
EQUALS = "equals"
GT_VERSION = "gtVersion"

AGENT_VERSION = "Agent.Version"
"""The demand the service adds to every job (the agent's minimum version)."""

_DEMAND = re.compile(r"^(?P<name>\S+)(\s+-(?P<op>\S+)\s+(?P<value>.*))?$")


@dataclass(frozen=True)
class Demand:
    """One parsed demand."""

    name: str
    op: str = EXISTS
    value: str = ""

    def describe(self) -> str:
        """How a person reads it: ``gpu.product = NVIDIA-A100``, ``cuda.x ≥ 12.4``, ``cuda``."""
        if self.op == EQUALS:
            return f"{self.name} = {self.value}"
        if self.op == GT_VERSION:
            return f"{self.name} >= {self.value}"
        return self.name


def parse_demand(text: str) -> Demand | None:
    """``text`` as the service parses it; None for what it does not (an unknown operator)."""
    match = _DEMAND.match(text.strip())
    if match is None:
        return None
    op = match.group("op")
    if op is None:
        return Demand(match.group("name"))
    if op not in (EQUALS, GT_VERSION) or not match.group("value"):
        return None
    return Demand(match.group("name"), op, match.group("value"))


def parse_version(text: str) -> tuple[int, ...] | None:
    """.NET ``System.Version.TryParse`` of ``text`` up to its first ``-``; None if it fails."""
    head = text.split("-", 1)[0] if text.find("-") > 0 else text
    parts = head.strip().split(".")
    if not 2 <= len(parts) <= 4 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def _compare_versions(wanted: str, have: str) -> int:
    """The service's ``CompareVersion``: <0, 0, >0 as ``wanted`` is below, equal, above ``have``."""
    a, b = parse_version(wanted), parse_version(have)
    if a is None and b is None:
        return 0
    if a is None:
        return -1
    if b is None:
        return 1
    # System.Version: an absent build/revision is below 0 (1.2 < 1.2.0).
    pad_a = a + (-1,) * (4 - len(a))
    pad_b = b + (-1,) * (4 - len(b))
    return (pad_a > pad_b) - (pad_a < pad_b)


def lookup(capabilities: Mapping[str, str], name: str) -> str | None:
    """The capability ``name``, ignoring case as the agent's dictionary does."""
    if name in capabilities:
        return capabilities[name]
    folded = name.casefold()
    return next((v for k, v in capabilities.items() if k.casefold() == folded), None)


def satisfied(demand: Demand, capabilities: Mapping[str, str]) -> bool:
    """Whether an agent with ``capabilities`` meets ``demand``."""
    have = lookup(capabilities, demand.name)
    if have is None:
        return False
    if demand.op == EQUALS:
        return demand.value.casefold() == have.casefold()
    if demand.op == GT_VERSION:
        return _compare_versions(demand.value, have) <= 0
    return True


def meets(capabilities: Mapping[str, str], demands: Iterable[str]) -> bool:
    """Whether every demand string is met; one the service could not parse is not."""
    for text in demands:
        demand = parse_demand(text)
        if demand is None or not satisfied(demand, capabilities):
            return False
    return True


def unmet(capabilities: Mapping[str, str], demands: Iterable[str]) -> list[str]:
    """The demand strings ``capabilities`` does not meet, in order."""
    out = []
    for text in demands:
        demand = parse_demand(text)
        if demand is None or not satisfied(demand, capabilities):
            out.append(text)
    return out


def is_agent_version(text: str) -> bool:
    """Whether a demand string is the service's own ``Agent.Version`` demand."""
    return text.strip().casefold().startswith(AGENT_VERSION.casefold())


def waiting_reason(demands: Iterable[str]) -> str:
    """Why a job with these demands and no matching agent waits: ``no agent with …``.

    The service's ``Agent.Version`` demand is left out: every agent of ours
    meets it, so it says nothing about the cause.
    """
    shown = []
    for text in demands:
        if is_agent_version(text):
            continue
        demand = parse_demand(text)
        shown.append(demand.describe() if demand is not None else text.strip())
    if not shown:
        return "no agent in the pool can take it"
    return "no agent with " + ", ".join(shown)


def waiting_for_agents(requests: Iterable[JobRequest]) -> tuple[str, ...]:
    """Why queued jobs wait: one line per reason, ``no agent with … (2 jobs)``.

    A queued job waits for want of an agent when the service matched none to
    its demands (``matchedAgents`` empty). Without ``matchedAgents`` in the
    answer nothing is said: its absence is no evidence.
    """
    counts: dict[str, int] = {}
    for r in requests:
        queued = r.assign_time is None and r.result is None
        if queued and r.matched_agents is not None and not r.matched_agents:
            reason = waiting_reason(r.demands)
            counts[reason] = counts.get(reason, 0) + 1
    return tuple(f"{why} ({n} job{'s' if n > 1 else ''})" for why, n in counts.items())


def wire_demands(value: object) -> tuple[str, ...]:
    """Demands are strings on the wire; the swagger's ``{name, value}`` form is read too."""
    if not isinstance(value, list):
        return ()
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif (d := _mapping(item)) is not None and isinstance(d.get("name"), str):
            out.append(f"{d['name']} -equals {d['value']}" if d.get("value") else str(d["name"]))
    return tuple(out)


def wire_matched(value: object) -> tuple[str, ...] | None:
    """The names in ``matchedAgents``; None when the field is absent."""
    if not isinstance(value, list):
        return None
    return tuple(str(m["name"]) for m in map(_mapping, value) if m and "name" in m)


def _mapping(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, dict) else None


__all__ = [
    "Demand",
    "is_agent_version",
    "lookup",
    "meets",
    "parse_demand",
    "parse_version",
    "satisfied",
    "unmet",
    "waiting_for_agents",
    "waiting_reason",
    "wire_demands",
    "wire_matched",
]
