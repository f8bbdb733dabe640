"""The names the simulated organisation and the product share are spelt alike.

The simulation spells them itself (`gpuci_tui.sim.names`) so that it takes no rule
from the product; this is where the two spellings meet. The same for how each
side reads an agent release: a bug in one would show here, not pass unseen.
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.docker import agentspec
from gpuci_tui.core.engine import agent_versions, stale
from gpuci_tui.sim import names


def test_the_markers_and_the_label_are_spelt_alike() -> None:
    assert names.MARKER_INSTANCE == stale.MARKER_INSTANCE
    assert names.MARKER_HOST == stale.MARKER_HOST
    assert names.AGENT_VERSION_LABEL == agent_versions.AGENT_VERSION_LABEL
    assert names.START_GATE_LABEL == agentspec.START_GATE_LABEL


@pytest.mark.parametrize(
    ("candidate", "than"),
    [("4.270.0", "4.264.2"), ("4.264.2", "4.264.2"), ("4.9.0", "4.10.0"), ("v4.1.0", "4.0.9"),
     ("4.1.0", None), ("4.1.0", ""), (None, "4.1.0"), ("4.1", "4.0.0"), ("5.0.0", "garbage")],
)  # fmt: skip
def test_both_sides_order_agent_releases_alike(candidate: str | None, than: str | None) -> None:
    assert names.later_release(candidate, than) == agent_versions.is_newer(candidate, than)
    assert names.agent_release(candidate) == agent_versions.parse_version(candidate)
