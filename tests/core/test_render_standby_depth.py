"""`gpuci-tui status` names a deeper or "auto" standby's depth; the default reads as before."""

from __future__ import annotations

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.engine.lifecycle import EngineState
from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.engine.standby_auto import depth_of
from gpuci_tui.core.models import HealthSnapshot, SupervisorSnapshot


def first_line(depth: str, standby: bool = True) -> str:
    snap = SupervisorSnapshot(
        taken_at=100.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=2,
        standby=standby,
        standby_depth=depth,
    )
    return render_status(snap, now=100.0).splitlines()[0]


def test_status_line_shows_the_depth() -> None:
    assert first_line("2/3 (auto)").endswith("2 slot(s), hot standby on, standby 2/3 (auto)")
    assert first_line("3").endswith("hot standby on, standby 3")
    assert first_line("1").endswith("2 slot(s), hot standby on")
    assert first_line("off", standby=False).endswith("hot standby off")


def test_the_snapshot_carries_the_depth_of_the_engine() -> None:
    depth, auto = depth_of("auto", least=1, most=3, cap=8)
    state = EngineState(prefix="h", desired=2, standby=depth, auto=auto)
    meta = SnapshotMeta(
        org_url="u", pool="gpu", instance="i", mode="daemon", pid=1, started_at=None
    )
    snap = supervisor_snapshot(
        state, meta, 0.0, azure=HealthSnapshot(), azure_requests=0, gpus_of=lambda _: ()
    )
    assert snap.standby and snap.standby_depth == "1/3 (auto)"
