"""Three hosts with long names sharing a domain, reached as ``ci@host``, at 80x24 and 120x36:
the overview and a host's dashboard, every host told apart, named once, nothing cut mid-word.

SVG snapshots: update with ``pytest tests/fleet/test_fleet_long_names.py --snapshot-update``
and look at them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.widgets.fleet_table import FleetDetail
from tests.fleet.fakes import DeadHandle, ReplayHandle, fleet_services, healthy_snapshot, member
from tests.fleet.screen_helpers import open_host, overview
from tests.ui.helpers import screen_text, wait_for
from tests.ui.scenarios import NOW, events, loaded_snapshot

Snap = Callable[..., bool]
SIZES = [(80, 24), (120, 36)]
NAMES = (
    "gpu-node-17.lab.example.org",
    "gpu-node-18.lab.example.org",
    "gpu-node-19.lab.example.org",
)
REFUSED = f"ssh: connect to host {NAMES[2]} port 22: Connection refused"
HELD = (
    "GPU 2 is used by a process that is not ours (pid 4242, python train.py): the agent "
    "waits, disabled on the server"
)


def long_named_fleet() -> tuple[Any, dict[str, Any]]:
    """17 loaded (a parked agent), 18 healthy, 19 unreachable; all as ci@NAME.

    17's and 18's daemons replay their recent events to each subscriber (the overview's
    link, then the host's dashboard); 18's happened between 17's.
    """
    theirs = [
        SupervisorEvent(at=NOW - 400, kind="job_finished", slot=2,
                        message="'eval nightly' 20261121.8 succeeded"),
        SupervisorEvent(at=NOW - 20, kind="gpu_held", message=HELD, slot=2),
    ]  # fmt: skip
    handles: dict[str, Any] = {
        NAMES[0]: ReplayHandle(loaded_snapshot(mode="daemon", pid=1234), events()),
        NAMES[1]: ReplayHandle(healthy_snapshot(), theirs),
        NAMES[2]: DeadHandle(REFUSED),
    }
    members = [member(name, f"ci@{name}", handles[name]) for name in NAMES]
    return make_app(fleet_services(members)), handles


async def settle(pilot: Pilot[Any]) -> FleetScreen:
    """Every host tried, every event shown."""
    screen = await overview(pilot)
    await wait_for(pilot, lambda: screen.event_log.count == len(events()) + 2, what="events")
    await pilot.pause()
    return screen


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_long_names_are_told_apart_named_once_and_never_cut_mid_word(
    size: tuple[int, int],
) -> None:
    app, _ = long_named_fleet()
    async with app.run_test(size=size) as pilot:
        screen = await settle(pilot)
        text = screen_text(app)
        # The unreachable host is on top, selected: named once, its cause whole.
        detail = screen.query_one(FleetDetail).render().plain
        assert detail.startswith(f"ci@{NAMES[2]} · down since"), detail
        assert f"unreachable: {REFUSED}" in detail
        flat = " ".join(text.replace("│", " ").split())
        assert f"{REFUSED.split(': ', 1)[1]}" in flat, "the cause, whole, on the screen"
        # Events of both hosts, by time: 18's come between 17's.
        kinds = [e.event.kind for e in screen.event_log.events.entries]
        assert kinds == ["slot_parked", "job_finished", "job_assigned", "container_exited",
                         "gpu_held", "command"]  # fmt: skip
        assert " ".join(HELD.split()) in flat, "a long message wraps whole"
        # They came before their host's snapshot: their slots are named once it came.
        assert all(entry.extra for entry in screen.event_log.events.entries)

        dash = await open_host(pilot, NAMES[0])
        bar = screen_text(app).splitlines()[0]
        assert bar.strip().startswith(f"⇄ ci@{NAMES[0]} over ssh"), bar
        assert bar.count(NAMES[0]) == 1 and "host 2 of 3" in bar, "second as listed there"
        assert dash.commands.host == NAMES[0]
        await wait_for(pilot, lambda: dash.event_log.count == len(events()), what="its events")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_long_named_fleet_snapshot(snap_compare: Snap, size: tuple[int, int]) -> None:
    app, _ = long_named_fleet()

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_long_named_host_dashboard_snapshot(snap_compare: Snap, size: tuple[int, int]) -> None:
    app, _ = long_named_fleet()

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        dash = await open_host(pilot, NAMES[0])
        await wait_for(pilot, lambda: dash.event_log.count == len(events()), what="its events")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
