"""The log view: opens on the selected agent, follows new lines only, survives container changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.logs import LogScreen, new_tail_lines
from tests.ui.fakes import FakeHandle, FakeRuntime, make_services
from tests.ui.helpers import notes, text_of, wait_for
from tests.ui.scenarios import loaded_snapshot

SLOT1 = loaded_snapshot().slot(1)
assert SLOT1 is not None and SLOT1.container_id is not None
CID1 = SLOT1.container_id


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        ([], ["a", "b"], (["a", "b"], False)),
        (["a", "b"], ["a", "b"], ([], False)),
        (["a", "b"], ["a", "b", "c"], (["c"], False)),
        (["a", "b", "c"], ["b", "c", "d", "e"], (["d", "e"], False)),  # the tail window moved
        (["x", "y"], ["p", "q"], (["p", "q"], True)),  # more output than one tail: a gap
        (["a", "h", "h"], ["h", "h", "h"], (["h"], False)),  # repeated lines: longest overlap wins
        (["a"], [], ([], False)),
    ],
)
def test_new_tail_lines(
    previous: list[str], current: list[str], expected: tuple[list[str], bool]
) -> None:
    assert new_tail_lines(previous, current) == expected


async def open_logs(pilot: Pilot[Any], slot: int = 1) -> LogScreen:
    app = pilot.app
    await wait_for(
        pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.snapshot is not None
    )
    await pilot.press("home", *["down"] * (slot - 1), "l")
    await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), what="the log view")
    screen = app.screen
    assert isinstance(screen, LogScreen)
    return screen


def shown(screen: LogScreen) -> list[str]:
    return list(screen.log_view.lines)


async def test_log_view_follows_new_lines_without_repeating(handle: FakeHandle) -> None:
    runtime = FakeRuntime({CID1: ["registered as gpuhost-1 (id 101)", "job 5001 started"]})
    app = make_app(make_services(handle=handle, runtime=runtime, log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot)
        await wait_for(
            pilot, lambda: shown(screen) == ["registered as gpuhost-1 (id 101)", "job 5001 started"]
        )
        assert "Logs · gpuhost-1 · 01c0ffee01ab · following" in text_of(screen, "#log-title")
        runtime.write(CID1, "step 1/3", "step 2/3")
        await wait_for(pilot, lambda: shown(screen)[-1] == "step 2/3")
        runtime.write(CID1, "step 3/3")
        await wait_for(pilot, lambda: shown(screen)[-1] == "step 3/3")
        assert shown(screen) == [
            "registered as gpuhost-1 (id 101)",
            "job 5001 started",
            "step 1/3",
            "step 2/3",
            "step 3/3",
        ]
        assert screen.log_view.scroll_offset.y == screen.log_view.max_scroll_y, "it follows the end"
        await pilot.press("escape")
        await wait_for(
            pilot, lambda: isinstance(app.screen, DashboardScreen), what="back to the dashboard"
        )
        calls = len(runtime.tail_calls)
        await pilot.pause(0.15)
        assert len(runtime.tail_calls) <= calls + 1, "polling stops with the view"


async def test_pausing_follow_keeps_collecting(handle: FakeHandle) -> None:
    runtime = FakeRuntime({CID1: [f"line {i}" for i in range(100)]})
    app = make_app(make_services(handle=handle, runtime=runtime, log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot)
        await wait_for(pilot, lambda: len(shown(screen)) == 100)
        await pilot.press("f")
        assert "paused (f to follow)" in text_of(screen, "#log-title")
        screen.log_view.scroll_home(animate=False)
        runtime.write(CID1, "late line")
        await wait_for(pilot, lambda: shown(screen)[-1] == "late line")
        assert screen.log_view.scroll_offset.y == 0, "no jump to the end while paused"
        await pilot.press("f")
        await wait_for(
            pilot, lambda: screen.log_view.scroll_offset.y == screen.log_view.max_scroll_y
        )


async def test_a_replaced_container_continues_under_a_separator(handle: FakeHandle) -> None:
    new_cid = "ffee" * 16
    runtime = FakeRuntime(
        {CID1: ["job 5001 succeeded"], new_cid: ["registered as gpuhost-1 (id 101)"]}
    )
    app = make_app(make_services(handle=handle, runtime=runtime, log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot)
        await wait_for(pilot, lambda: shown(screen) == ["job 5001 succeeded"])
        runtime.vanish(CID1)
        await wait_for(
            pilot, lambda: "── the container has exited (no more output) ──" in shown(screen)
        )
        snapshot = loaded_snapshot()
        slots = tuple(
            replace(s, container_id=new_cid, job=None) if s.slot == 1 else s for s in snapshot.slots
        )
        handle.push(replace(snapshot, slots=slots))
        await wait_for(pilot, lambda: shown(screen)[-1] == "registered as gpuhost-1 (id 101)")
        assert shown(screen) == [
            "job 5001 succeeded",
            "── the container has exited (no more output) ──",
            "── new container ffeeffeeffee ──",
            "registered as gpuhost-1 (id 101)",
        ]
        assert "ffeeffeeffee" in text_of(screen, "#log-title")


async def test_a_slot_without_container_shows_the_last_lines_it_left(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle, runtime=FakeRuntime(), log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot, slot=6)
        assert shown(screen) == [
            "── no container runs now; last lines of the previous one ──",
            "registering as gpuhost-6",
            "error: pool 'gpu' not found",
        ]


async def test_read_errors_are_shown_and_polling_goes_on(handle: FakeHandle) -> None:
    class Flaky(FakeRuntime):
        failures = 1

        def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("engine timed out")
            return super().logs_tail(container_id, lines)

    runtime = Flaky({CID1: ["hello"]})
    app = make_app(make_services(handle=handle, runtime=runtime, log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot)
        await wait_for(
            pilot,
            lambda: shown(screen) == ["── could not read the logs: engine timed out ──", "hello"],
        )


async def test_ansi_colours_and_carriage_returns_are_stripped(handle: FakeHandle) -> None:
    runtime = FakeRuntime({CID1: ["\x1b[32mok\x1b[0m done\r"]})
    app = make_app(make_services(handle=handle, runtime=runtime, log_interval=0.02))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_logs(pilot)
        await wait_for(pilot, lambda: shown(screen) == ["ok done"])


async def test_no_runtime_means_no_log_view() -> None:
    handle = FakeHandle(loaded_snapshot())
    services = replace(make_services(handle=handle), runtime=None)
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, DashboardScreen) and app.screen.snapshot is not None,
        )
        await pilot.press("l")
        await wait_for(pilot, lambda: any("Logs are not available" in n for n in notes(app)))
        assert isinstance(app.screen, DashboardScreen)
