"""Names the simulated organisation shares with the product: a contract, spelt here.

The product writes these into agent containers and images; the organisation and its
emulated agents see them only as text (an environment variable reported as a
capability, an image label). They are spelt here, not imported from the product's
rules, so the simulation takes no rule from what it tests; a test checks that both
spellings agree (tests/sim/test_names.py).
"""

from __future__ import annotations

import re

MARKER_INSTANCE = "GPUCI_INSTANCE"
"""The capability naming the instance that registered an agent (its container's env)."""
MARKER_HOST = "GPUCI_HOST"
"""The capability naming the host whose daemon registered an agent."""
AGENT_VERSION_LABEL = "io.gpuci.agent-version"
"""The image label that says which agent version an image bakes."""
START_GATE_LABEL = "io.gpuci.start-gate"
"""The image label of an agent whose start.sh waits for the daemon's go (the emulator's)."""

_RELEASE = re.compile(r"^\s*v?(\d+)\.(\d+)\.(\d+)\s*$")


def agent_release(text: str | None) -> tuple[int, int, int] | None:
    """An agent release number (``4.264.2``) as numbers; None for anything else.

    The agent's releases are MAJOR.MINOR.PATCH (azure-devops-api.md §5.1, §2.9: the
    package's ``version`` object has exactly these three parts).
    """
    found = _RELEASE.match(text or "")
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def later_release(candidate: str | None, than: str | None) -> bool:
    """Whether ``candidate`` is a later agent release than ``than`` (an unreadable one is older)."""
    new = agent_release(candidate)
    if new is None:
        return False
    old = agent_release(than)
    return old is None or new > old
