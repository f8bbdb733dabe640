"""Quitting: leave agents running (default), drain first, cancel; a daemon is never stopped."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import CommandResult, Drain, Stop
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.screens.confirm import QuitChoice, QuitScreen
from gpuci_tui.screens.dashboard import DashboardScreen
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, wait_for
from tests.ui.scenarios import loaded_snapshot


def quit_body(app: Any) -> str:
    screen = app.screen
    assert isinstance(screen, QuitScreen), f"expected the quit dialog, got {screen!r}"
    return screen.body


async def run_quit(
    handle: FakeHandle, keys: list[str], *, readonly: bool = False
) -> tuple[Any, str]:
    """Open the quit dialog with q, answer with ``keys``; return (app result, dialog body)."""
    app = make_app(make_services(handle=handle, readonly=readonly))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, DashboardScreen) and app.screen.snapshot is not None,
        )
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit dialog")
        body = quit_body(app)
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.1)
    return app.return_value, body


@pytest.mark.parametrize("key", ["l", "enter"])
async def test_in_process_leave_running_stops_only_the_supervisor(key: str) -> None:
    handle = FakeHandle(loaded_snapshot())
    result, body = await run_quit(handle, [key])
    assert result is QuitChoice.LEAVE_RUNNING
    assert handle.sent == [Stop(drain=False)]
    assert "runs inside this console and stops with it" in body
    assert "Running agents keep running (3 busy agents finish their current job)" in body


async def test_in_process_drain_then_quit() -> None:
    handle = FakeHandle(loaded_snapshot())
    result, _ = await run_quit(handle, ["d"])
    assert result is QuitChoice.DRAIN_THEN_QUIT
    assert handle.sent == [Stop(drain=True)]


@pytest.mark.parametrize("key", ["l", "enter"])
async def test_daemon_is_never_stopped_by_quitting(key: str) -> None:
    handle = FakeHandle(loaded_snapshot(mode="daemon", pid=4321), mode="daemon")
    result, body = await run_quit(handle, [key])
    assert result is QuitChoice.LEAVE_RUNNING
    assert handle.sent == []
    assert (
        "a daemon of its own (gpuci-tui run, pid 4321): quitting the console never stops it" in body
    )
    assert "detached" not in body, "a gpuci-tui run in a terminal is not detached"


async def test_daemon_drain_then_quit_drains_but_leaves_the_daemon_running() -> None:
    handle = FakeHandle(loaded_snapshot(mode="daemon", pid=4321), mode="daemon")
    result, _ = await run_quit(handle, ["d"])
    assert result is QuitChoice.DRAIN_THEN_QUIT
    assert handle.sent == [Drain(slots=None)]
    assert not any(isinstance(c, Stop) for c in handle.sent)


@pytest.mark.parametrize("key", ["c", "n", "escape"])
async def test_cancel_keeps_the_console(key: str) -> None:
    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press(key)
        await wait_for(
            pilot, lambda: isinstance(app.screen, DashboardScreen), what="the dialog to close"
        )
        assert app.is_running
    assert handle.sent == []


async def test_ctrl_q_asks_too() -> None:
    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit dialog")


async def test_readonly_quit_offers_no_drain() -> None:
    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        assert not app.screen.query("#drain")
        assert [b.id for b in app.screen.query(Button)] == ["leave", "cancel"]
        await pilot.press("d")
        await wait_for(pilot, lambda: any(n.startswith("read-only: ") for n in notes(app)))
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("l")
        await pilot.pause(0.1)
    assert app.return_value is QuitChoice.LEAVE_RUNNING
    assert handle.sent == [Stop(drain=False)], (
        "leaving does not change agents, so read-only allows it"
    )


async def test_failed_drain_keeps_the_console_open() -> None:
    handle = FakeHandle(loaded_snapshot(), mode="daemon")
    handle.fail_with = GpuciError("daemon not answering")
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("d")
        await wait_for(
            pilot,
            lambda: (
                "Draining failed, so the console stays open: daemon not answering" in notes(app)
            ),
        )
        assert app.is_running


async def test_refused_drain_keeps_the_console_open() -> None:
    handle = FakeHandle(
        loaded_snapshot(), respond=lambda c: CommandResult(False, "already stopping")
    )
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("q", "d")
        await wait_for(
            pilot,
            lambda: "Draining failed, so the console stays open: already stopping" in notes(app),
        )
        assert app.is_running


async def test_quit_without_a_supervisor_says_nothing_else_is_affected() -> None:
    app = make_app(make_services(handle=None))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        assert quit_body(app) == "No supervisor is running: nothing else is affected."
        assert not app.screen.query("#drain")
        await pilot.press("l")
        await pilot.pause(0.1)
    assert app.return_value is QuitChoice.LEAVE_RUNNING
