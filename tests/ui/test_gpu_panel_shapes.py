"""The GPU panel says which slot holds which device of a shaped host (N GPUs per slot, MIG)."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.app import make_app
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.widgets.gpu_panel import GpuCard, holders, slot_words
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, screen_text, wait_for
from tests.ui.scenarios import gpu_frame, idle_slot, loaded_snapshot


def shaped_snapshot() -> SupervisorSnapshot:
    """Slots 1-2 hold GPUs 0 and 3 as pairs; slots 3-5 are MIG slices of GPU 1 and 2."""
    slots = (
        replace(idle_slot(1, gpus=("0", "3")), devices="GPU 0+3"),
        replace(idle_slot(2, gpus=("0", "3")), devices="GPU 0+3"),
        replace(idle_slot(3, gpus=("1",)), devices="MIG 1g.10gb 1/0"),
        replace(idle_slot(4, gpus=("1",)), devices="MIG 1g.10gb 1/2"),
        replace(idle_slot(5, gpus=("2",)), devices="MIG 3g.40gb 2/0"),
    )
    return replace(loaded_snapshot(), slots=slots)


def test_the_mapping_names_slot_runs_and_one_line_per_slice() -> None:
    assert holders(shaped_snapshot(), gpu_frame().gpus) == {
        0: ["GPU 0 · slots 1-2"],
        1: ["MIG 1g.10gb 1/0 · slot 3", "MIG 1g.10gb 1/2 · slot 4"],
        2: ["MIG 3g.40gb 2/0 · slot 5"],
        3: ["GPU 3 · slots 1-2"],
    }
    # Slots the file names GPUs for (not shaped) add nothing: the file says it already.
    assert holders(loaded_snapshot(), gpu_frame().gpus) == {}
    assert slot_words(["0", "2"]) == "slots 0, 2"
    assert slot_words(["a/0"]) == "slot a/0"


async def test_gpu_cards_show_which_slot_holds_which_device() -> None:
    app = make_app(make_services(handle=FakeHandle(shaped_snapshot())))
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await ready(pilot)
        screen._sample_gpus()
        await wait_for(
            pilot,
            lambda: any(c.holders for c in screen.query(GpuCard)),
            what="the GPU cards to show their slots",
        )
        cards = {c.index: c.holders for c in screen.query(GpuCard)}
        assert cards[1] == ("MIG 1g.10gb 1/0 · slot 3", "MIG 1g.10gb 1/2 · slot 4")
        await pilot.pause()
        text = screen_text(app)
        assert "GPU 0 · slots 1-2" in text
        assert "MIG 3g.40gb 2/0 · slot 5" in text
