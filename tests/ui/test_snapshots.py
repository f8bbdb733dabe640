"""SVG snapshots of the screens an operator sees most, from deterministic fakes.

The clock is frozen, the GPU sampler replays fixed frames (the history is
seeded explicitly, the sampling interval is an hour), the event log is fed a
fixed list and cursor blinking is off. Update the baselines with
``pytest tests/ui/test_snapshots.py --snapshot-update`` and look at them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Log

from gpuci_tui.app import GpuciApp, make_app
from gpuci_tui.screens.dashboard import DashboardScreen
from tests.ui.fakes import FakeHandle, FakeRuntime, make_services
from tests.ui.helpers import wait_for
from tests.ui.scenarios import events, gpu_frame, loaded_snapshot, measured_snapshot

SIZE = (100, 30)
Snap = Callable[..., bool]


def loaded_app(**services: Any) -> tuple[GpuciApp, FakeHandle]:
    # From a GPU-sampling daemon: busy rows show their job's GPU use.
    handle = FakeHandle(measured_snapshot())
    return make_app(make_services(handle=handle, **services)), handle


def dashboard_ready(handle: FakeHandle) -> Callable[[Pilot[Any]], Any]:
    """run_before: first snapshot shown, three minutes of GPU history, the events logged."""

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, DashboardScreen)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.gpu_frames >= 1)
        for tick in range(1, 180):
            screen.gpu_panel.show_frame(gpu_frame(tick))
        for event in events():
            handle.push(event)
        await wait_for(pilot, lambda: screen.event_log.count == len(events()))
        await pilot.pause()

    return run_before


def no_blink(app: GpuciApp) -> None:
    for field in app.screen.query(Input):
        field.cursor_blink = False


def test_dashboard_under_load(snap_compare: Snap) -> None:
    """Six slots in every state, four busy GPUs, a foreign GPU process, events."""
    app, handle = loaded_app(demo=True)
    assert snap_compare(app, terminal_size=SIZE, run_before=dashboard_ready(handle))


def test_dashboard_80x24_readonly(snap_compare: Snap) -> None:
    """The smallest terminal: every agent, the keys and the READ-ONLY badge still show."""
    app, handle = loaded_app(readonly=True)
    assert snap_compare(app, terminal_size=(80, 24), run_before=dashboard_ready(handle))


def test_drain_confirmation(snap_compare: Snap) -> None:
    """Drain of a busy agent says which job finishes and that nothing is killed."""
    app, handle = loaded_app()
    assert snap_compare(app, terminal_size=SIZE, run_before=dashboard_ready(handle), press=["d"])


def test_quit_dialog(snap_compare: Snap) -> None:
    """Quit of an in-process supervisor: leave running (default), drain first, cancel."""
    app, handle = loaded_app()
    assert snap_compare(app, terminal_size=SIZE, run_before=dashboard_ready(handle), press=["q"])


def log_app() -> tuple[GpuciApp, Callable[[Pilot[Any]], Any]]:
    """The console following gpuhost-1's container output, and a run_before that opens it."""
    snapshot = loaded_snapshot()
    container = snapshot.slots[0].container_id
    assert container is not None
    runtime = FakeRuntime(
        {
            container: [
                "registering as gpuhost-1 (pool gpu-a100)",
                "registered as gpuhost-1 (id 101)",
                "listening for one job (run.sh --once)",
                "job 5001 'train - main' 20261122.3 started",
                *(
                    f"epoch {i:2d}/40  loss {2.5 / (i + 1):.4f}  gpu mem 56.6 GiB"
                    for i in range(1, 19)
                ),
            ]
        }
    )
    app, handle = loaded_app(runtime=runtime)

    async def run_before(pilot: Pilot[Any]) -> None:
        await dashboard_ready(handle)(pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "LogScreen")
        log = pilot.app.screen.query_one("#log-view", Log)
        await wait_for(pilot, lambda: log.line_count >= 22, what="the log lines")

    return app, run_before


def test_log_view(snap_compare: Snap) -> None:
    """The followed output of gpuhost-1's container."""
    app, run_before = log_app()
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_wizard_first_step(snap_compare: Snap, tmp_path: Path) -> None:
    """Setup starts with the organisation URL; a wrong one is explained under the field."""
    app = make_app(
        make_services(config=None, config_path=Path("/home/ops/.config/gpuci-tui/config.toml"))
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "WizardScreen")
        no_blink(pilot.app)  # type: ignore[arg-type]
        await pilot.press(*"http://dev.azure.com/contoso", "enter")
        await wait_for(pilot, lambda: "https" in pilot.app.screen.step.message)  # type: ignore[attr-defined]

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def history_app(tmp_path: Path) -> tuple[GpuciApp, Callable[[Pilot[Any]], Any]]:
    """The console over a written history, and a run_before that opens the history view
    on the OOM-killed 'train - main' job (its trend shown)."""
    from gpuci_tui.screens.history import HistoryScreen
    from tests.ui.test_history_view import write_history

    path = tmp_path / "history.sqlite3"
    write_history(path)
    app, handle = loaded_app(history_path=path, history_interval=3600.0)

    async def run_before(pilot: Pilot[Any]) -> None:
        await dashboard_ready(handle)(pilot)
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen))
        screen = pilot.app.screen
        assert isinstance(screen, HistoryScreen)
        no_blink(pilot.app)  # type: ignore[arg-type]
        await pilot.press(*["down"] * 5)  # past lint and eval: the OOM-killed 'train - main'
        await wait_for(pilot, lambda: screen.trend.pipeline == "train - main", what="trend")
        await pilot.pause()

    return app, run_before


def test_history_80x24(snap_compare: Snap, tmp_path: Path) -> None:
    """The history view at 80x24: jobs, filters, the selected pipeline's trend, the keys."""
    app, run_before = history_app(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
