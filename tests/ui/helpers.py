"""Waiting and reading helpers for Pilot tests (no fixed sleeps: poll with a deadline)."""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import RadioButton, RadioSet, Static

from gpuci_tui.screens.dashboard import DashboardScreen
from tests.waiting import wait_until_async


async def wait_for(
    pilot: Pilot[Any], predicate: Callable[[], bool], timeout: float = 10.0, what: str = ""
) -> None:
    """Let the app run until ``predicate()`` holds; fail with ``what`` after ``timeout``.

    The deadline only bounds a failing wait (a passing one returns as soon as the
    state holds), so it is generous: with both cores busy a reconnect takes seconds.
    """
    try:
        await wait_until_async(predicate, timeout, what, pause=pilot.pause, every=0.02)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_threads()}") from None


def _threads() -> str:
    """Where every other thread stands: a wait that fails on a worker says which call hangs."""
    frames = sys._current_frames()
    lines = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if thread is threading.current_thread() or frame is None:
            continue
        stack = "".join(traceback.format_stack(frame, limit=6))
        lines.append(f"--- thread {thread.name}:\n{stack}")
    return "\n".join(lines) or "(no other threads)"


async def choose(pilot: Pilot[Any], selector: str, timeout: float = 10.0) -> None:
    """Click the radio button ``selector`` until its radio set reports it pressed.

    A click aims at where the button was laid out when it was sent; a message
    that appears above it just before (a refused step) moves it, and the click
    lands beside it. Clicking a radio button again is harmless, so a miss is
    retried; the set's own record is what the screen reads, so that is awaited.
    """
    button = pilot.app.screen.query_one(selector, RadioButton)
    radio_set = button.parent
    assert isinstance(radio_set, RadioSet), f"{selector} is not in a RadioSet"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while radio_set.pressed_button is not button:
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s choosing {selector}")
        await pilot.pause()
        if not button.value:
            await pilot.click(selector)
        await pilot.pause(0.02)


def notes(app: Any) -> list[str]:
    """Messages of the notifications currently shown."""
    return [n.message for n in app._notifications]


def screen_text(app: Any) -> str:
    """The current screen (with any dialog on top) as plain text, one line per row."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text(styles=False)


def text_of(node: Any, selector: str) -> str:
    """The plain text of the `Static` matching ``selector`` under ``node``."""
    return str(node.query_one(selector, Static).content)


async def ready(pilot: Pilot[Any]) -> DashboardScreen:
    """Wait until the dashboard shows the handle's first snapshot."""
    screen = pilot.app.screen
    assert isinstance(screen, DashboardScreen), f"expected the dashboard, got {screen!r}"
    await wait_for(pilot, lambda: screen.snapshot is not None, what="the first snapshot")
    return screen
