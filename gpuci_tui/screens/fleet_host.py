"""One host of the fleet, opened from the overview: its own dashboard, unchanged, plus a way back.

`HostDashboardScreen` is the `DashboardScreen` every single-host console
shows, following that host's handle (over ssh), with one line on top naming
the host and ``q``/Escape to go back to the overview, and ``c`` to reconnect
now when the host's link is down (its own stream, and the overview's link to the
host, stop waiting out their backoff). GPU cards are not carried over ssh (the
panel says so); ``l`` follows an agent's container output and ``h`` shows the
host's job history, both through the host's bridge (`RemoteLogs`,
`RemoteHistory`). Every confirmation names the host it acts on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget

from gpuci_tui.core.fleet.remote_reads import RemoteHistory, RemoteLogs
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.control.reconnect import RetryNow
from gpuci_tui.core.store.history import JobQuery, JobRecord
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.history import HistoryScreen
from gpuci_tui.screens.logs import LogScreen
from gpuci_tui.screens.readonly_keys import hide_from_footer
from gpuci_tui.widgets.host_bar import HostBar

if TYPE_CHECKING:
    from gpuci_tui.core.fleet.link import FleetMember, HostLink
    from gpuci_tui.services import Services


class HostDashboardScreen(DashboardScreen):
    """The dashboard of one fleet host; ``q`` or Escape returns to the overview."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *DashboardScreen.BINDINGS,
        Binding("c", "reconnect", "Reconnect", id="reconnect",
                tooltip="Try this host again now instead of waiting out the backoff "
                "(a connected host is left as it is)"),
        Binding("q,escape", "back", "Fleet", id="fleet_back",
                tooltip="Back to the fleet overview (the host keeps running)"),
    ]  # fmt: skip

    def __init__(
        self,
        services: Services,
        member: FleetMember,
        number: int,
        total: int,
        *,
        link: HostLink | None = None,
    ) -> None:
        """Show ``member``'s daemon (``services.handle`` is its handle); host ``number`` of ``total``
        as the overview lists them.

        ``link``: the overview's link to the host, told to reconnect now along with this
        screen's own stream.
        """
        super().__init__(services)
        # Its confirmations and answers name the host: a fleet has more than one.
        self.commands.host = member.label
        # A pull from here would use this machine's Docker, not the host's: not offered.
        hide_from_footer(self, ("image_pull",))
        if services.readonly:
            hide_from_footer(self)
        self.link = link
        # The host line takes a row: the stylesheet gives the agents table one less.
        self.add_class("-fleet-host")
        self.member = member
        self.number = number
        self.total = total

    def compose(self) -> Iterable[Widget]:
        """The host line, then the dashboard as everywhere else."""
        label, target = self.member.label, self.member.host.target
        yield HostBar(label, target, self.number, self.total, id="fleet-host-bar")
        yield from super().compose()

    def action_reconnect(self) -> None:
        """Try the host again now: this screen's stream and the overview's link."""
        outcome = self.reconnector.retry_now()
        if self.link is not None:
            self.link.retry_now()
        say_retry(self, self.member.label, outcome)

    def action_back(self) -> None:
        """Back to the overview; this screen's update stream closes with it."""
        self.dismiss(None)

    def action_logs(self) -> None:
        """Follow the selected agent's container output over ssh, through the host's bridge.

        Read-only, like the log view everywhere; the daemon serves only its own agents'
        containers, redacted and paced (`core.host.control.log_serving`).
        """
        logs_tail = getattr(self.member.handle, "logs_tail", None)
        slot = self.selected_slot()
        if slot is None:
            return
        if logs_tail is None:
            # Names carry server text: never let "[...]" be taken as markup.
            self.notify(
                f"Logs are not available: {self.member.label}'s link carries none.",
                severity="error",
                markup=False,
            )
            return
        key = slot.key

        def container_of() -> str | None:
            current = None if self.snapshot is None else self.snapshot.slot_by_key(key)
            return None if current is None else current.container_id

        earlier = slot.last_exit.log_tail if slot.last_exit is not None else ()
        self.app.push_screen(
            LogScreen(
                slot_name=f"{slot.name} on {self.member.label}",
                container_of=container_of,
                runtime=RemoteLogs(logs_tail, asyncio.get_running_loop()),
                interval=self.services.log_interval,
                earlier_lines=earlier,
            )
        )

    def action_history(self) -> None:
        """The host's job history, asked of its daemon over ssh (read-only, bounded there).

        ``q`` goes back there too (not "quit the fleet").
        """
        history = getattr(self.member.handle, "history", None) or self._no_history
        source = RemoteHistory(self.member.label, history, asyncio.get_running_loop())
        self.app.push_screen(HostHistoryScreen(self.services, source))

    async def _no_history(self, query: JobQuery) -> list[JobRecord] | None:
        # The view opens all the same, and says why it stays empty.
        raise ControlError(f"History is not available: {self.member.label}'s link carries none.")


class HostHistoryScreen(HistoryScreen):
    """A fleet host's history: ``q`` goes back a step, as it does from the host's dashboard."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "back", "Back", id="history.q_back", show=False,
                tooltip="Back to the host's dashboard"),
    ]  # fmt: skip


_RETRY_WORDS = {
    RetryNow.RETRYING: "{label}: reconnecting now instead of waiting out the backoff.",
    RetryNow.UNDER_WAY: "{label}: a connection attempt is already under way.",
    RetryNow.CONNECTED: "{label} is connected: nothing to reconnect (the link is left as it is).",
}


def say_retry(screen: Screen[None], label: str, outcome: RetryNow) -> None:
    """Tell the operator what "reconnect now" found for host ``label``."""
    screen.notify(_RETRY_WORDS[outcome].format(label=label), title="Reconnect", markup=False)
