"""The header and the agents table: content, in-place updates, the supervisor link, 80x24."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.app import make_app
from gpuci_tui.core.models import (
    HealthSnapshot,
    HealthState,
    JobInfo,
    SlotState,
)
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.widgets.agents_table import row_cells
from gpuci_tui.widgets.keyed_table import fit_text
from gpuci_tui.widgets.status_bar import health_line
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, ready, screen_text, wait_for
from tests.ui.scenarios import NOW, idle_slot, loaded_snapshot


def row_text(screen: DashboardScreen, slot: int) -> list[str]:
    return [cell.plain for cell in screen.agents_table.get_row(str(slot))]


# --------------------------------------------------------------------------- header


async def test_header_shows_org_pool_health_mode_and_count(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        text = screen.status_bar.render().plain
        assert "dev.azure.com/contoso · pool gpu-a100  agents 4/6" in text
        assert "Azure: ✓ PAT valid · checked 12 s ago" in text
        assert "Supervisor: in-process · draining 1" in text
        assert "DEMO" not in text and "READ-ONLY" not in text


async def test_header_badges_and_daemon_mode() -> None:
    handle = FakeHandle(loaded_snapshot(mode="daemon", pid=1234, paused=True), mode="daemon")
    app = make_app(make_services(handle=handle, readonly=True, demo=True))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        line1, line2 = screen.status_bar.render().plain.split("\n")
        assert line1.rstrip().endswith("DEMO   READ-ONLY"), (
            "badges are never cut, even at 80 columns"
        )
        # The demo's daemon runs in the demo's own process: no pid, nothing "detached".
        assert line2.startswith("✓ PAT valid · 12 s ago  │  demo daemon up 1h00m · paused")


@pytest.mark.parametrize(
    "identity",
    [
        "service principal gpuci-lab-runner-westeurope-production · token valid 52 min",
        "PAT · expires in 5 days (2025-11-27): renew it with gpuci-tui token set",
    ],
)
def test_at_80_columns_the_header_keeps_the_daemons_uptime_whole(identity: str) -> None:
    """A long identity is cut after a whole word; the pid, the uptime and the flags never are."""
    azure = HealthSnapshot(HealthState.OK, identity=identity, checked_at=NOW - 12)
    snap = loaded_snapshot(mode="daemon", pid=15447, paused=True, azure=azure)
    line = health_line(snap, NOW, uptime=3 * 3600 + 12 * 60, width=80).plain
    assert len(line) <= 80
    assert line.endswith("daemon pid 15447 up 3h12m · paused · draining 1"), line
    azure_part = line.partition("  │  ")[0]
    assert azure_part.endswith("…") and identity.startswith(azure_part[2:-1].rstrip())


async def test_the_daemons_uptime_is_its_own_and_keeps_counting() -> None:
    """Worked out on the daemon's clock (a skewed host does not change it), then counted on."""
    now = [NOW + 86_400.0]  # this console's clock is a day ahead of the daemon's
    skewed = loaded_snapshot(mode="daemon", pid=1234)
    handle = FakeHandle(skewed, mode="daemon")
    app = make_app(make_services(handle=handle, clock=lambda: now[0]))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        assert "Supervisor: daemon pid 1234 up 1h00m" in screen.status_bar.render().plain
        now[0] += 125
        screen._tick()
        assert "daemon pid 1234 up 1h02m" in screen.status_bar.render().plain
        assert "detached" not in screen.status_bar.render().plain


@pytest.mark.parametrize(
    ("health", "expected"),
    [
        (
            HealthSnapshot(HealthState.AUTH_FAILED, "401", checked_at=NOW - 3),
            "✗ PAT rejected · checked 3 s ago",
        ),
        (
            HealthSnapshot(HealthState.RATE_LIMITED, "429", checked_at=NOW, retry_at=NOW + 60),
            "rate limited until 08:27:40",
        ),
        (
            HealthSnapshot(HealthState.UNREACHABLE, "dns", retry_at=NOW + 20),
            "✗ Azure DevOps unreachable (retry in 20 s)",
        ),
        (HealthSnapshot(HealthState.UNKNOWN), "… PAT not checked yet"),
    ],
)
async def test_header_credential_health(health: HealthSnapshot, expected: str) -> None:
    handle = FakeHandle(loaded_snapshot(azure=health))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        assert expected in screen.status_bar.render().plain


# --------------------------------------------------------------------------- table


def test_row_cells_say_everything_about_a_slot() -> None:
    slots = {s.slot: s for s in loaded_snapshot().slots}
    busy = {k: v.plain for k, v in row_cells(slots[1], NOW).items()}
    assert busy == {
        "slot": "1",
        "agent": "gpuhost-1",
        "state": "busy",
        "standby": "ready",
        "job": "'train - main' 20261122.3",
        "uptime": "42m20s",
        "gpus": "0",
        "exit": "0 job finished",
        "container": "01c0ffee01ab",
        "message": "running 'train - main' 20261122.3",
    }
    backoff = {k: v.plain for k, v in row_cells(slots[5], NOW).items()}
    assert backoff["state"] == "backoff in 12 s"
    assert backoff["exit"] == "137 OOM killed: out of memory", "natural width: the table cuts"
    assert fit_text(row_cells(slots[5], NOW)["exit"], 22).plain == "137 OOM killed: out…"
    assert backoff["gpus"] == "all"
    assert backoff["standby"] == "-"
    parked = {k: v.plain for k, v in row_cells(slots[6], NOW).items()}
    assert parked["state"] == "parked (5×)"
    assert parked["container"] == "-"
    # A busy agent with a standby is disabled on purpose: not flagged. Without one, it is.
    disabled = replace(slots[1], agent_enabled=False)
    assert row_cells(disabled, NOW)["agent"].plain == "gpuhost-1"
    alone = replace(disabled, standby="off")
    assert row_cells(alone, NOW)["agent"].plain == "gpuhost-1 (disabled)"
    assert row_cells(alone, NOW)["standby"].plain == "off"
    restarting = replace(slots[3], restart_pending=True)
    assert row_cells(restarting, NOW)["state"].plain == "busy ↻"


async def test_table_updates_in_place_and_keeps_the_selected_slot(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        table = screen.agents_table
        await pilot.press("down", "down")
        assert screen.selected_slot_number() == 3

        def forbidden(*args: object, **kwargs: object) -> None:
            raise AssertionError("the table must never be cleared and rebuilt")

        added: list[object] = []
        original_add_row = table.add_row

        def add_row(*args: Any, **kwargs: Any) -> Any:
            added.append(kwargs.get("key"))
            return original_add_row(*args, **kwargs)

        table.clear = forbidden  # type: ignore[method-assign,assignment]
        table.add_row = add_row  # type: ignore[method-assign]

        snapshot = loaded_snapshot()
        slots = list(snapshot.slots)
        slots[0] = replace(slots[0], state=SlotState.IDLE, job=None, message="waiting for a job")
        slots[2] = replace(slots[2], job=JobInfo(9, "eval nightly", "20261122.4"))
        # Slot 6 scaled away: the columns keep their widths (slot 5's "backoff in 12 s"
        # stays the widest state), so the rows are updated in place.
        del slots[5]
        slots.append(idle_slot(7))
        handle.push(replace(snapshot, slots=tuple(slots)))
        await wait_for(pilot, lambda: table.row_count == 6 and "7" in [r.value for r in table.rows])

        assert screen.selected_slot_number() == 3, "the cursor stays on its slot"
        assert row_text(screen, 3)[4] == "'eval nightly' 20261122.4"
        assert row_text(screen, 1)[2] == "idle"
        assert added == ["7"], "only the new slot got a new row"
        assert [key.value for key in table.rows] == ["1", "2", "3", "4", "5", "7"]


async def test_a_returning_lower_slot_is_sorted_in_and_the_cursor_follows_its_slot(
    handle: FakeHandle,
) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        table = screen.agents_table
        full = loaded_snapshot()
        handle.push(replace(full, slots=tuple(s for s in full.slots if s.slot != 2)))
        await wait_for(pilot, lambda: table.row_count == 5)
        await pilot.press("down", "down")  # rows 1,3,4 → slot 4
        assert screen.selected_slot_number() == 4
        handle.push(full)
        await wait_for(pilot, lambda: table.row_count == 6)
        ordered = [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(6)]  # type: ignore[arg-type]
        assert ordered == ["1", "2", "3", "4", "5", "6"]
        assert screen.selected_slot_number() == 4


async def test_detail_line_follows_the_cursor(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(200, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("down", "down", "down", "down")
        await wait_for(
            pilot, lambda: screen.slot_detail.slot is not None and screen.slot_detail.slot.slot == 5
        )
        text = screen.slot_detail.render().plain
        assert text.startswith("gpuhost-5 backoff in 12 s · starting again in 12 s (2 failures)")
        assert "last exit 137 OOM killed: out of memory at 08:26:10" in text


async def test_clock_ticks_update_ages_without_new_snapshots(handle: FakeHandle) -> None:
    now = [NOW]
    app = make_app(make_services(handle=handle, clock=lambda: now[0]))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert row_text(screen, 5)[2] == "backoff in 12 s"
        now[0] += 5
        screen._tick()
        assert row_text(screen, 5)[2] == "backoff in 7 s"
        assert row_text(screen, 1)[5] == "42m25s"
        assert "checked 17 s ago" in screen.status_bar.render().plain


# --------------------------------------------------------------------------- supervisor link


async def test_lost_stream_is_shown_and_the_console_reconnects(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        handle.end_stream()
        await wait_for(pilot, lambda: "connection lost" in screen.status_bar.render().plain)
        assert "✗ supervisor: connection lost (the update stream ended); retrying…" in (
            screen.status_bar.render().plain
        )
        await wait_for(pilot, lambda: handle.snapshot_calls >= 2, timeout=5, what="a reconnect")
        await wait_for(pilot, lambda: "connection lost" not in screen.status_bar.render().plain)
        handle.push(loaded_snapshot(desired_count=9))
        await wait_for(
            pilot, lambda: screen.snapshot is not None and screen.snapshot.desired_count == 9
        )


async def test_supervisor_is_started_when_a_config_comes_without_a_handle(
    handle: FakeHandle,
) -> None:
    started: list[object] = []

    async def start(config: object) -> FakeHandle:
        started.append(config)
        return handle

    services = make_services(handle=None, start_supervisor=start)
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert started == [services.config]
        assert app.services.handle is handle  # a new Services: they are frozen
        assert screen.handle is handle


async def test_a_supervisor_that_fails_to_start_is_explained() -> None:
    async def start(config: object) -> FakeHandle:
        raise RuntimeError("Docker is not reachable: permission denied on /var/run/docker.sock")

    app = make_app(make_services(handle=None, start_supervisor=start))
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        expected = "The supervisor did not start: Docker is not reachable: permission denied"
        await wait_for(pilot, lambda: expected in screen.status_bar.render().plain)
        assert any("permission denied" in n for n in notes(app))


# --------------------------------------------------------------------------- 80x24


async def test_80x24_shows_every_agent_the_keys_and_the_header() -> None:
    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle, readonly=True, demo=True))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        await wait_for(pilot, lambda: screen.gpu_frames >= 1)
        # The footer is drawn after the first frames: wait for it, not for one repaint.
        await wait_for(pilot, lambda: "Quit" in screen_text(app).split("\n")[23], what="footer")
        text = screen_text(app)
        lines = text.split("\n")
        assert "READ-ONLY" in lines[0] and "DEMO" in lines[0]
        for slot in range(1, 7):
            assert f"gpuhost-{slot}" in text, f"agent {slot} is visible"
        for header in ("State", "Job", "Up"):
            assert header in text
        for state in ("busy", "idle", "draining", "backoff in 12 s", "parked (5×)"):
            assert state in text
        footer = lines[23]
        for key in ("Drain", "Restart", "Resume", "More", "Fewer", "Logs", "Pause", "Help", "Quit"):
            assert key in footer, f"{key} in the footer"
        for gpu in range(4):
            assert any(line.startswith(f"│ {gpu} ") for line in lines), f"GPU {gpu} visible"
        for widget in screen.query("*"):
            if widget.display and widget.region.area:
                assert widget.region.right <= 80 and widget.region.bottom <= 24, widget
