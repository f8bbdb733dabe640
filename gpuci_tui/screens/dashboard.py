"""The main screen: header, GPUs, pool, agents, events — live, and never blocking input.

Three feeds, each off the input path:

* a worker follows `SupervisorHandle.updates()` and posts coalescing messages
  (it reconnects with a short backoff when the stream breaks, e.g. a restarted
  daemon; `reconnector` can cut that wait short);
* a thread worker samples the GPUs; the next sample is scheduled only after the
  previous one finished (a slow driver delays samples instead of stacking them);
* a 1 s timer re-renders what depends on the clock alone (ages, uptimes,
  countdowns).

The screen composes its widgets and owns one helper: the newest snapshot is its
``snapshot`` reactive, which the header, the pool and the GPU panels are bound
to (`Widget.data_bind`); what the keys do is `DashboardCommands`, and each
``action_*`` hands over to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import DataTable

from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
from gpuci_tui.core.host.control.reconnect import Backoff, Reconnector
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.screens.dashboard_actions import DASHBOARD_BINDINGS, DashboardCommands
from gpuci_tui.screens.dashboard_base import DashboardBase
from gpuci_tui.ui_messages import (
    GpuFrameSampled,
    SnapshotReceived,
    SupervisorEventReceived,
    SupervisorLinkChanged,
)
from gpuci_tui.widgets.agents_table import AgentsTable, SlotDetail
from gpuci_tui.widgets.event_log import EventLog
from gpuci_tui.widgets.fit_footer import FitFooter
from gpuci_tui.widgets.gpu_panel import GpuPanel
from gpuci_tui.widgets.pool_panel import PoolPanel
from gpuci_tui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from gpuci_tui.core.host.handle import SupervisorHandle
    from gpuci_tui.services import Services

RECONNECT_MAX = 10.0
"""Longest wait between two attempts to re-follow a broken update stream."""
RECONNECT_BACKOFF = Backoff(base=0.5, cap=RECONNECT_MAX, jitter=0.0)
"""Waits between those attempts: 0.5 s doubling to `RECONNECT_MAX`."""


#: Footer keys hidden first on a narrow screen (they stay bound and in the help).
FOOTER_DROP_ORDER = ("image_pull", "pause", "scale_down", "scale_up", "history", "logs")


class DashboardScreen(DashboardBase):
    """Live view of the supervisor, the GPUs and the pool, with the agent keys."""

    BINDINGS: ClassVar[list[BindingType]] = list(DASHBOARD_BINDINGS)
    HORIZONTAL_BREAKPOINTS = [
        (0, "-narrow"),
        (150, "-wide"),
        (200, "-very-wide"),
    ]
    # "-short" and "-medium": one line per GPU; the GPU/pool row is capped at 8 rows below
    # 30 rows, at 12 from 30 (120x36, a common ssh window: the pool panel's lines, a waiting
    # job's reason, stale registrations, a roll-out, agent versions, must not be cut).
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-medium"), (40, "-tall")]

    def __init__(self, services: Services) -> None:
        """Create the dashboard; it follows ``services.handle`` once mounted."""
        super().__init__(services, id="dashboard")
        self.gpu_frames = 0
        self._waiting = "connecting to the supervisor…"
        self.reconnector = Reconnector()
        """The update stream's backoff wait (``retry_now`` ends it)."""
        self.commands = DashboardCommands(self)
        """What the keys do (the ``action_*`` methods below hand over to it)."""

    def compose(self) -> Iterable[Widget]:
        """Header, GPU + pool row, agents, events, footer."""
        clock = self.services.clock
        yield StatusBar(
            clock=clock, readonly=self.services.readonly, demo=self.services.demo, id="status"
        ).data_bind(DashboardScreen.snapshot)
        with Horizontal(id="top-row"):
            yield GpuPanel(id="gpus").data_bind(DashboardScreen.snapshot)
            yield PoolPanel(clock=clock, id="pool").data_bind(DashboardScreen.snapshot)
        # Not bound: the screen fills the table, then the detail line that reads its cursor.
        yield AgentsTable(clock=clock, id="agents")
        yield SlotDetail(clock=clock, id="slot-detail")
        yield EventLog(id="events")
        # Compact, and without the palette hint (ctrl+p still opens it; `?` says so):
        # when even that is too wide (a fleet host's extra key) the least used keys
        # hide, never the agent keys, help or the way out.
        yield FitFooter(drop_order=FOOTER_DROP_ORDER)

    # ------------------------------------------------------------------ typed accessors

    @property
    def status_bar(self) -> StatusBar:
        """The header."""
        return self.query_one("#status", StatusBar)

    @property
    def agents_table(self) -> AgentsTable:
        """The agents table (its cursor row is the selected slot)."""
        return self.query_one("#agents", AgentsTable)

    @property
    def gpu_panel(self) -> GpuPanel:
        """The GPU cards."""
        return self.query_one("#gpus", GpuPanel)

    @property
    def pool_panel(self) -> PoolPanel:
        """The pool summary."""
        return self.query_one("#pool", PoolPanel)

    @property
    def event_log(self) -> EventLog:
        """The event log."""
        return self.query_one("#events", EventLog)

    @property
    def slot_detail(self) -> SlotDetail:
        """The line describing the selected slot."""
        return self.query_one("#slot-detail", SlotDetail)

    def selected_slot_number(self) -> int | None:
        """The slot under the table cursor."""
        return self.agents_table.selected_slot

    def selected_slot_key(self) -> str | None:
        """The ``SLOT`` or ``GROUP/SLOT`` under the table cursor."""
        return self.agents_table.selected_key

    # ------------------------------------------------------------------ life cycle

    def on_mount(self) -> None:
        """Start the feeds."""
        self.agents_table.focus()
        self.status_bar.show_waiting(self._waiting)
        if self.handle is not None:
            self._follow(self.handle)
        self._sample_gpus()
        self.set_interval(1.0, self._tick)
        self._notice_damaged_history()

    def _notice_damaged_history(self) -> None:
        """Say so while a damaged history the daemon moved aside lies in the state directory."""
        from gpuci_tui.core.store.file import damage_notice

        path = self.services.history_path
        notice = damage_notice(path) if path is not None else None
        if notice:
            self.notify(notice, title="Job history", severity="warning", timeout=30, markup=False)

    def attach(self, handle: SupervisorHandle) -> None:
        """Follow ``handle`` (replaces any previous one)."""
        self.handle = handle
        self.commands.pending_desired = None
        if self.is_mounted:
            self._follow(handle)

    def show_waiting(self, message: str) -> None:
        """Explain why no supervisor is shown (starting, failed to start…)."""
        self._waiting = message
        if self.is_mounted:
            self.status_bar.show_waiting(message)

    @work(exclusive=True, group="supervisor", exit_on_error=False)
    async def _follow(self, handle: SupervisorHandle) -> None:
        failures = 0
        while True:
            try:
                self.post_message(SnapshotReceived(await handle.snapshot()))
                self.reconnector.up()
                failures = 0
                async for update in handle.updates():
                    if isinstance(update, SupervisorSnapshot):
                        self.post_message(SnapshotReceived(update))
                    else:
                        self.post_message(SupervisorEventReceived(update))
                problem = "the update stream ended"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - shown in the header; we retry
                problem = str(exc) or type(exc).__name__
            self.post_message(
                SupervisorLinkChanged(False, f"connection lost ({problem}); retrying…")
            )
            failures += 1
            await self.reconnector.wait(RECONNECT_BACKOFF.delay(failures))

    def _sample_gpus(self) -> None:
        self._gpu_worker()

    @work(thread=True, exclusive=True, group="gpu", exit_on_error=False)
    def _gpu_worker(self) -> None:
        try:
            frame = self.services.gpu.sample()
        except Exception as exc:  # noqa: BLE001 - a sampler bug must not kill the console
            frame = GpuFrame(
                taken_at=self.services.clock(),
                host=GpuHostInfo(available=False, reason=f"GPU sampling failed: {exc}"),
            )
        self.post_message(GpuFrameSampled(frame))

    def _tick(self) -> None:
        self.status_bar.refresh()
        self.pool_panel.tick()
        self.agents_table.tick()
        self._show_selected()

    def _show_selected(self) -> None:
        slot = self.selected_slot()
        self.slot_detail.show(slot, self.agents_table.hidden_cells(self.selected_slot_key()))

    @on(DataTable.RowHighlighted, "#agents")
    def _on_row_highlighted(self) -> None:
        self._show_selected()

    # ------------------------------------------------------------------ feeds → widgets

    @on(SnapshotReceived)
    def _on_snapshot(self, message: SnapshotReceived) -> None:
        self.snapshot = message.snapshot

    def watch_snapshot(
        self, old: SupervisorSnapshot | None, new: SupervisorSnapshot | None
    ) -> None:
        """Fill the agents table and the detail line (the bound panels follow by themselves)."""
        self.commands.snapshot_changed(old, new)
        if new is not None:
            self.agents_table.show_snapshot(new)
        self._show_selected()

    @on(SupervisorEventReceived)
    def _on_event(self, message: SupervisorEventReceived) -> None:
        names = {} if self.snapshot is None else {s.slot: s.name for s in self.snapshot.slots}
        self.event_log.add(message.event, names)

    @on(SupervisorLinkChanged)
    def _on_link(self, message: SupervisorLinkChanged) -> None:
        self.status_bar.show_link_problem("" if message.connected else message.message)

    @on(GpuFrameSampled)
    def _on_gpu_frame(self, message: GpuFrameSampled) -> None:
        self.gpu_frames += 1
        self.gpu_panel.show_frame(message.frame)
        self.set_timer(self.services.gpu_interval, self._sample_gpus)

    # ------------------------------------------------------------------ keys

    def action_drain(self) -> None:
        """Drain the selected agent (asks first)."""
        self.commands.drain()

    def action_drain_all(self) -> None:
        """Drain every agent (asks first)."""
        self.commands.drain_all()

    def action_restart(self) -> None:
        """Restart the selected agent (asks first)."""
        self.commands.restart()

    def action_restart_all(self) -> None:
        """Restart every agent (asks first)."""
        self.commands.restart_all()

    def action_resume(self) -> None:
        """Undo drain/park of the selected agent."""
        self.commands.resume()

    def action_scale_up(self) -> None:
        """Run one more agent."""
        self.commands.scale_up()

    def action_scale_down(self) -> None:
        """Run one agent fewer (asks first: the highest slot is drained)."""
        self.commands.scale_down()

    def action_pause(self) -> None:
        """Pause or resume replenishing."""
        self.commands.pause()

    def action_gpu_clear(self) -> None:
        """Clear a quarantined GPU (asks first)."""
        self.commands.gpu_clear()

    def action_reload(self) -> None:
        """Re-read the configuration file (its dry run is confirmed first)."""
        self.commands.reload()

    def action_reset_overrides(self) -> None:
        """Reload and drop the runtime overrides (the dry run names them; confirmed first)."""
        self.commands.reload(reset_overrides=True)

    def action_image_pull(self) -> None:
        """Pull the selected agent's image now, with progress."""
        self.commands.image_pull()

    def action_logs(self) -> None:
        """Follow the selected agent's container output (allowed in read-only mode)."""
        self.commands.logs()

    def action_history(self) -> None:
        """Open the history of finished jobs (allowed in read-only mode)."""
        self.commands.history()

    def action_stale(self) -> None:
        """Open the stale registrations view."""
        self.commands.stale()

    def action_help(self) -> None:
        """Show the keys as bound now and the state legend."""
        self.commands.help()
