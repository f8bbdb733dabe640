"""Agent versions: compare them, read what jobs demand, and say when they differ.

The organisation offers a current agent (``packages/agent``); each image bakes
one (its ``io.gpuci.agent-version`` label); queued jobs may demand a minimum
(``Agent.Version -gtVersion X``, added by tasks with a ``minimumAgentVersion``).
When they differ, a ``--once`` agent spends its one run on an update (issue 20):
these pure rules tell the operator before it bites. No I/O: tested by tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)\s*$")
_DEMAND = re.compile(r"^\s*Agent\.Version\s+-gtVersion\s+(\S+)\s*$", re.IGNORECASE)

#: The label dockeragent/build.sh writes: the agent version baked into an image.
AGENT_VERSION_LABEL = "io.gpuci.agent-version"


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``"4.270.0"`` as ``(4, 270, 0)``; None for anything else (empty, a label left unset)."""
    if not text:
        return None
    m = _VERSION.match(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def is_newer(candidate: str | None, than: str | None) -> bool:
    """Whether ``candidate`` is a version strictly newer than ``than``.

    An unreadable ``than`` (an image without the label) counts as older than any
    readable candidate; an unreadable candidate is never newer.
    """
    new = parse_version(candidate)
    if new is None:
        return False
    old = parse_version(than)
    return old is None or new > old


def newest(versions: Iterable[str | None]) -> str | None:
    """The newest readable version among ``versions`` (None: none)."""
    found = [(v, text) for text in versions if (v := parse_version(text)) is not None]
    return max(found)[1] if found else None


def demanded_version(demands: Iterable[str]) -> str | None:
    """The highest ``Agent.Version -gtVersion X`` among a job's demands (None: none).

    The server treats ``-gtVersion`` as "at least": the agent must be X or newer.
    """
    best: tuple[int, int, int] | None = None
    for demand in demands:
        m = _DEMAND.match(demand)
        version = parse_version(m[1]) if m else None
        if version is not None and (best is None or version > best):
            best = version
    return ".".join(map(str, best)) if best else None


def version_warnings(
    org_version: str | None,
    baked: Mapping[str, str | None],
    demanded: str | None = None,
    cached: str | None = None,
) -> list[str]:
    """Operator warnings about agent versions; empty when all agree.

    Args:
        org_version: The organisation's current agent (None: not read yet).
        baked: Group name -> the agent version its image bakes (None: unknown).
        demanded: The highest version queued jobs demand (None: no such demand).
        cached: The verified package new containers of an older image get (None: none).
    """
    out: list[str] = []
    for group, version in sorted(baked.items()):
        if parse_version(version) is None:
            continue  # an image without the label (not built by build.sh): nothing to compare
        effective = cached if cached and is_newer(cached, version) else version
        shown = version
        if demanded and parse_version(demanded) and not _at_least(effective, demanded):
            out.append(
                f"queued jobs demand agent {demanded} but group {group}'s image has {shown}: "
                "each of its agents leaves to update before it can take one"
            )
        elif org_version and is_newer(org_version, version):
            text = (
                f"group {group}'s image has agent {shown}; the organisation offers "
                f"{org_version}: rebuild the image (dockeragent/build.sh pin-agent {org_version})"
            )
            if effective != version:
                text += f"; meanwhile new agent containers use the cached package {effective}"
            out.append(text)
    return out


def _at_least(version: str | None, minimum: str) -> bool:
    have, want = parse_version(version), parse_version(minimum)
    return have is not None and want is not None and have >= want
