"""Held and quarantined GPUs in the console: marked on the GPU panel, and cleared with g."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import GpuClear
from gpuci_tui.core.models import GpuGateSnapshot, SlotState
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.widgets.gpu_panel import GpuCard
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, ready, screen_text, wait_for
from tests.ui.scenarios import loaded_snapshot

XID = "GPU 1: Xid 79 (GPU fell off the bus)"
HELD = "GPU 3 used by pid 777 python, 12 GB, not ours"


def gated_snapshot() -> object:
    snap = loaded_snapshot()
    slots = list(snap.slots)
    slots[1] = replace(
        slots[1], state=SlotState.QUARANTINED, gate="quarantined", gate_reason=XID,
        gate_code="xid", message=f"quarantined: {XID}",
    )  # fmt: skip
    gates = (
        GpuGateSnapshot(0, "GPU-0"),
        GpuGateSnapshot(1, "GPU-1", "quarantined", XID, "xid"),
        GpuGateSnapshot(2, "GPU-2"),
        GpuGateSnapshot(3, "GPU-3", "held", HELD, "foreign_process"),
    )
    return replace(snap, slots=tuple(slots), gpu_gates=gates)


async def test_gpu_panel_marks_held_and_quarantined_gpus_and_g_clears_after_asking() -> None:
    handle = FakeHandle(gated_snapshot())  # type: ignore[arg-type]
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(140, 45)) as pilot:
        screen = await ready(pilot)
        screen._sample_gpus()
        await wait_for(
            pilot,
            lambda: any(c.gate is not None for c in screen.query(GpuCard)),
            what="the GPU cards to show the gates",
        )
        gates = {c.index: c.gate for c in screen.query(GpuCard)}
        assert gates[0] is None and gates[2] is None
        assert gates[1] is not None and gates[1].state == "quarantined"
        assert gates[3] is not None and gates[3].reason == HELD
        await pilot.pause()
        text = screen_text(app)
        assert "QUARANTINED" in text and XID in text
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.prompt.title == "Clear GPU 1?"
        assert XID in app.screen.prompt.body and "gpuhost-2" in app.screen.prompt.body
        assert handle.sent == []
        await pilot.press("y")
        await wait_for(pilot, lambda: handle.sent == [GpuClear("1")], what="the clear")
        await wait_for(pilot, lambda: any("done" in n for n in notes(app)), what="the result")
