"""`gpuci-tui status` names a deeper or "auto" standby's depth and its schedule; the default reads as before."""

from __future__ import annotations

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.engine.lifecycle import EngineState
from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.engine.standby.auto import depth_of, observe
from gpuci_tui.core.engine.standby.schedule import StandbySchedule
from gpuci_tui.core.models import HealthSnapshot, SupervisorSnapshot
from gpuci_tui.core.wire import to_dict


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
    assert first_line("2/3 (auto)").endswith("2 slots, hot standby on, standby 2/3 (auto)")
    assert first_line("3").endswith("hot standby on, standby 3")
    assert first_line("1").endswith("2 slots, hot standby on")
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


MONDAY_9_UTC = 1795424400.0
"""Monday 23 November 2026, 09:00 UTC (10:00 in Berlin)."""


def test_status_line_names_the_schedule() -> None:
    assert first_line("3; schedule: 3 until 19:00 (Europe/Berlin)").endswith(
        "hot standby on, standby 3; schedule: 3 until 19:00 (Europe/Berlin)"
    )
    assert first_line("off; schedule: 0 until Mon 08:00 (UTC)", standby=False).endswith(
        "hot standby off; schedule: 0 until Mon 08:00 (UTC)"
    )


def test_the_snapshot_and_its_json_name_the_schedule_in_force() -> None:
    office = StandbySchedule("Europe/Berlin", (((28800, 3), (68400, 1)),) * 5 + (((0, 0),), ()))
    state = observe(EngineState(prefix="h", desired=2, standby=1, schedule=office), MONDAY_9_UTC)
    meta = SnapshotMeta(
        org_url="u", pool="gpu", instance="i", mode="daemon", pid=1, started_at=None
    )
    snap = supervisor_snapshot(
        state, meta, 0.0, azure=HealthSnapshot(), azure_requests=0, gpus_of=lambda _: ()
    )
    assert snap.standby_depth == "3; schedule: 3 until 19:00 (Europe/Berlin)"
    assert to_dict(snap)["standby_depth"] == snap.standby_depth
