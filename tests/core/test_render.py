"""`gpuci-tui status`: the plain-text table says what the standby of each slot is doing."""

from __future__ import annotations

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.models import PoolSummary, SlotSnapshot, SlotState, SupervisorSnapshot


def test_status_shows_standby_per_slot_and_explains_the_disabled_agents() -> None:
    snap = SupervisorSnapshot(
        taken_at=100.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=2,
        standby=True,
        pool_summary=PoolSummary(name="gpu", online=4, disabled=2, standby=2),
        slots=(
            SlotSnapshot(slot=0, name="h-0", state=SlotState.IDLE, standby="ready"),
            SlotSnapshot(slot=1, name="h-1-b", state=SlotState.BUSY, standby="booting"),
        ),
    )
    text = render_status(snap, now=100.0)
    lines = text.splitlines()
    assert "2 slot(s), hot standby on" in lines[0]
    assert "2 disabled (2 of them hot standbys, disabled on purpose)" in text
    header = next(line for line in lines if line.startswith("SLOT"))
    assert header.split()[:4] == ["SLOT", "NAME", "STATE", "STANDBY"]
    assert any(line.split()[:4] == ["1", "h-1-b", "busy", "booting"] for line in lines)
