"""The fleet overview: every host's daemon in one table, its keys, and the way into each host.

One `HostLink` per host follows that host's updates in its own worker and
reconnects with backoff when the host drops, so a dead host shows as
unreachable while the others keep updating and taking commands. Enter opens
a host's own dashboard (`HostDashboardScreen`); ``c`` tries a down host again
at once instead of waiting out its backoff; ``d``/``r``/``u`` drain,
restart or resume every agent of the selected host and ``D``/``R``/``U`` of
every reachable host, after a confirmation built from each daemon's own
preview of the command. ``--readonly`` refuses them all (and leaves them out
of the footer).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Iterable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer

from gpuci_tui.core.command_types import Command, CommandResult, Drain, Restart, Resume
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.fleet.labels import short_label
from gpuci_tui.core.fleet.link import FleetMember, HostLink, HostStatus, LinkState, RemoteGpus
from gpuci_tui.core.fleet.rows import HostRow, fleet_rows, fleet_totals
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen, say_retry
from gpuci_tui.screens.fleet_prompts import effects_phrase, fleet_prompt, host_prompt
from gpuci_tui.screens.help import HelpScreen, KeyHelp
from gpuci_tui.screens.readonly_keys import hide_from_footer
from gpuci_tui.widgets.event_log import EventLog
from gpuci_tui.widgets.fleet_table import FleetDetail, FleetSummary, FleetTable

if TYPE_CHECKING:
    from gpuci_tui.core.fleet.link import Fleet
    from gpuci_tui.services import Services

EVENT_HOST_MAX = 16
"""Widest the events' host column gets (the table's host column may be wider)."""
REQUEST_TIMEOUT = 30.0
"""Longest wait for one host's preview or command result (the handle has its own, shorter)."""

FLEET_BINDINGS = [
    Binding("enter", "open", "Open", id="open_host", key_display="⏎", priority=True,
            tooltip="Open the selected host's dashboard (q or Escape comes back)"),
    Binding("d", "drain", "Drain", id="drain",
            tooltip="Drain every agent of the selected host: busy ones finish their job"),
    Binding("D", "drain_all", "Drain fleet", id="drain_all", show=False,
            tooltip="Drain every agent of every reachable host"),
    Binding("r", "restart", "Restart", id="restart",
            tooltip="Replace every agent of the selected host (busy ones after their job)"),
    Binding("R", "restart_all", "Restart fleet", id="restart_all", show=False,
            tooltip="Replace every agent of every reachable host"),
    Binding("u", "resume", "Resume", id="resume",
            tooltip="Undo drain/park on the selected host: its slots start again"),
    Binding("U", "resume_all", "Resume fleet", id="resume_all", show=False,
            tooltip="Undo drain/park on every reachable host"),
    Binding("c", "reconnect", "Reconnect", id="reconnect",
            tooltip="Try the selected host again now instead of waiting out its backoff "
            "(a connected host is left as it is)"),
    Binding("question_mark", "help", "Help", id="help", tooltip="Keys and what the columns mean"),
]  # fmt: skip

_COMMANDS: dict[str, Command] = {
    "drain": Drain(slots=None),
    "restart": Restart(slots=None),
    "resume": Resume(slots=None),
}
_WORDS = {"drain": "draining", "restart": "restarting", "resume": "resuming"}
COLUMN_HELP = [
    KeyHelp("Link", "Reachability", "up; wait: connecting; down: retried with backoff"),
    KeyHelp("Busy/Idle", "Agents", "running a job / online and waiting"),
    KeyHelp("Start", "Starting", "agents on their way: a container starting, or about to"),
    KeyHelp("Stby", "Hot standby", "second agents ready to take over a slot"),
    KeyHelp("Park/Drain", "Stopped", "parked after failures / draining or drained"),
    KeyHelp("Queue", "Pool queue", "jobs waiting in the pool (shared by its hosts)"),
    KeyHelp("GPU", "GPUs in use", "GPUs held by busy agents, as the daemon reports"),
]


@dataclasses.dataclass
class HostStatusChanged(Message):
    """A host's link or snapshot changed; only the newest per host matters."""

    index: int
    status: HostStatus

    def can_replace(self, message: Message) -> bool:
        """A queued older status of the same host is superseded."""
        return isinstance(message, HostStatusChanged) and message.index == self.index


@dataclasses.dataclass
class HostEventReceived(Message):
    """One supervisor event of one host, for the fleet's event log."""

    index: int
    event: SupervisorEvent


class FleetScreen(Screen[None]):
    """The overview of every host; the base screen of the fleet console."""

    BINDINGS: ClassVar[list[BindingType]] = list(FLEET_BINDINGS)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]

    def __init__(self, services: Services) -> None:
        """Create the overview of ``services.fleet`` (links start on mount)."""
        super().__init__(id="fleet")
        assert services.fleet is not None
        self.services = services
        self.fleet: Fleet = services.fleet
        self.members = self.fleet.members
        self.statuses: list[HostStatus] = [HostStatus() for _ in self.members]
        self.links: list[HostLink] = []
        """One link per member, in the same order (made on mount)."""
        self.rows: dict[int, HostRow] = {}
        if services.readonly:
            hide_from_footer(self)

    def compose(self) -> Iterable[Widget]:
        """Fleet line, hosts, selected host, events of every host, keys."""
        yield FleetSummary(readonly=self.services.readonly, id="fleet-summary")
        yield FleetTable(id="fleet-table")
        yield FleetDetail(clock=self.services.clock, id="fleet-detail")
        yield EventLog(id="fleet-events", source_label=self._event_label)
        yield Footer(compact=True, show_command_palette=False)

    @property
    def table(self) -> FleetTable:
        """The hosts table (its cursor row is the selected host)."""
        return self.query_one("#fleet-table", FleetTable)

    @property
    def event_log(self) -> EventLog:
        """Events of every host, each line starting with the host's label."""
        return self.query_one("#fleet-events", EventLog)

    def on_mount(self) -> None:
        """Start one link per host and draw the first rows."""
        self.table.focus()
        for index, member in enumerate(self.members):
            link = HostLink(
                member,
                partial(self._post_status, index),
                clock=self.services.clock,
                backoff=self.fleet.backoff,
                on_event=partial(self._post_event, index),
            )
            self.links.append(link)
            self.run_worker(link.run(), group=f"fleet-host-{index}", exit_on_error=False)
        self._render_rows()
        self.set_interval(1.0, self._tick)

    def _post_status(self, index: int, status: HostStatus) -> None:
        self.post_message(HostStatusChanged(index, status))

    def _post_event(self, index: int, event: SupervisorEvent) -> None:
        self.post_message(HostEventReceived(index, event))

    @on(HostStatusChanged)
    def _on_status(self, message: HostStatusChanged) -> None:
        before = self.statuses[message.index].snapshot
        self.statuses[message.index] = message.status
        snapshot = message.status.snapshot
        if before is None and snapshot is not None:
            # The daemon's recent events came before its first snapshot: name their slots.
            names = {slot.slot: slot.name for slot in snapshot.slots}
            self.event_log.name_slots(names, source=message.index)
        self._render_rows()

    @on(HostEventReceived)
    def _on_event(self, message: HostEventReceived) -> None:
        # In its place by time among every host's events, and once: a host's link that
        # reconnects gets the daemon's recent events again.
        status = self.statuses[message.index]
        names = {} if status.snapshot is None else {s.slot: s.name for s in status.snapshot.slots}
        self.event_log.add(message.event, names, source=message.index)

    def _event_label(self, index: int) -> Text:
        """Host ``index``'s label that starts its events' lines, cut as in the table.

        The column is as wide as the table's host column (16 at most: the event
        needs the room), and no wider than the longest label cut to it.
        """
        labels = [member.label for member in self.members]
        room = min(self.table.host_width or 12, EVENT_HOST_MAX)
        width = max(len(short_label(label, labels, room)) for label in labels)
        return Text(f"{short_label(labels[index], labels, room):<{width}} ", style="cyan")

    def _render_rows(self) -> None:
        entries = [
            (member.label, member.host.target, self.statuses[index])
            for index, member in enumerate(self.members)
        ]
        index_of = {member.label: index for index, member in enumerate(self.members)}
        rows = fleet_rows(entries)
        self.rows = {index_of[row.label]: row for row in rows}
        self.table.show_rows([(index_of[row.label], row) for row in rows])
        self.query_one(FleetSummary).show(fleet_totals(rows))
        self._show_selected()

    def _tick(self) -> None:
        # Also after a resize: the columns the table collapsed may have changed.
        self._show_selected()

    def _show_selected(self) -> None:
        index = self.table.selected
        row = None if index is None else self.rows.get(index)
        self.query_one(FleetDetail).show(row, self.table.hidden_cells(self.table.selected_key))

    @on(DataTable.RowHighlighted, "#fleet-table")
    def _on_highlighted(self) -> None:
        self._show_selected()

    @on(DataTable.RowSelected, "#fleet-table")
    def _on_selected(self) -> None:
        self.action_open()

    # ------------------------------------------------------------------ helpers

    def _say(self, message: str, *, severity: SeverityLevel = "information") -> None:
        self.notify(message, severity=severity, markup=False)

    def _selected(self) -> tuple[int, FleetMember] | None:
        index = self.table.selected
        if index is None:
            self._say("No host is selected.")
            return None
        return index, self.members[index]

    def _refused(self, kind: str) -> bool:
        if self.services.readonly:
            self.notify(
                f"read-only: {_WORDS[kind]} is disabled (the console was started with --readonly).",
                title="Read-only",
                severity="warning",
                markup=False,
            )
            return True
        return False

    def _unreachable(self, index: int) -> str | None:
        status = self.statuses[index]
        if status.state is LinkState.UP:
            return None
        return status.problem or "not connected yet"

    # ------------------------------------------------------------------ actions

    def action_open(self) -> None:
        """Open the selected host's dashboard (allowed in read-only mode)."""
        selected = self._selected()
        if selected is None:
            return
        index, member = selected
        services = dataclasses.replace(
            self.services,
            handle=member.handle,
            gpu=RemoteGpus(member.label, self.services.clock),
            runtime=None,
            fleet=None,
            history_path=None,  # this machine's file is not the host's: `h` asks the host
        )
        shown = list(self.rows)  # "host 2 of 3" as the overview lists them, not the file
        number = shown.index(index) + 1 if index in shown else index + 1
        self.app.push_screen(
            HostDashboardScreen(services, member, number, len(self.members), link=self.links[index])
        )

    def action_reconnect(self) -> None:
        """Try the selected host again now (a connected host is left as it is)."""
        selected = self._selected()
        if selected is not None:
            index, member = selected
            say_retry(self, member.label, self.links[index].retry_now())

    def action_drain(self) -> None:
        """Drain every agent of the selected host (asks first)."""
        self._on_host("drain")

    def action_restart(self) -> None:
        """Restart every agent of the selected host (asks first)."""
        self._on_host("restart")

    def action_resume(self) -> None:
        """Resume the selected host's drained and parked slots."""
        self._on_host("resume")

    def action_drain_all(self) -> None:
        """Drain every reachable host (asks first)."""
        self._on_fleet("drain")

    def action_restart_all(self) -> None:
        """Restart every reachable host (asks first)."""
        self._on_fleet("restart")

    def action_resume_all(self) -> None:
        """Resume every reachable host (asks first)."""
        self._on_fleet("resume")

    def action_help(self) -> None:
        """Keys as bound now, and what the columns mean."""
        keys = []
        for key, active in self.app.active_bindings.items():
            binding = active.binding
            if binding.description and binding.id and "." not in binding.id:
                keys.append(KeyHelp(self.app.get_key_display(binding) or key, binding.description,
                                    binding.tooltip))  # fmt: skip
        self.app.push_screen(HelpScreen(keys + COLUMN_HELP, readonly=self.services.readonly))

    def _on_host(self, kind: str) -> None:
        if self._refused(kind) or (selected := self._selected()) is None:
            return
        index, member = selected
        problem = self._unreachable(index)
        if problem is not None:
            self._say(
                f"{member.label} is unreachable ({problem}): nothing was sent.", severity="warning"
            )
            return
        self.run_worker(
            self._host_command(kind, member), group="fleet-commands", exit_on_error=False
        )

    def _on_fleet(self, kind: str) -> None:
        if self._refused(kind):
            return
        self.run_worker(self._fleet_command(kind), group="fleet-commands", exit_on_error=False)

    async def _host_command(self, kind: str, member: FleetMember) -> None:
        command = _COMMANDS[kind]
        try:
            preview = await _timed(member.handle.preview(command))
        except Exception as exc:  # noqa: BLE001 - reported; the console goes on
            self._say(f"{member.label} did not answer: {_reason(exc)}", severity="error")
            return
        prompt = host_prompt(kind, member.label, preview)
        if isinstance(prompt, str):
            self._say(prompt)
            return
        if not await self.app.push_screen_wait(ConfirmScreen(prompt)):
            return
        result = await _send(member, command)
        self._say(
            f"{member.label}: {result.message}", severity="information" if result.ok else "error"
        )

    async def _fleet_command(self, kind: str) -> None:
        command = _COMMANDS[kind]
        reachable = [(i, m) for i, m in enumerate(self.members) if self._unreachable(i) is None]
        left_out = [
            (m.label, f"unreachable ({self._unreachable(i)})")
            for i, m in enumerate(self.members)
            if self._unreachable(i) is not None
        ]
        if not reachable:
            self._say("No host is reachable: nothing was sent.", severity="warning")
            return
        answers = await asyncio.gather(
            *(_timed(m.handle.preview(command)) for _, m in reachable), return_exceptions=True
        )
        previews: list[tuple[FleetMember, CommandPreview]] = []
        for (_, member), answer in zip(reachable, answers, strict=True):
            if isinstance(answer, BaseException):
                left_out.append((member.label, f"no answer ({_reason(answer)})"))
            else:
                previews.append((member, answer))
        prompt = fleet_prompt(kind, [(m.label, p) for m, p in previews], left_out)
        if isinstance(prompt, str):
            self._say(prompt)
            return
        if not await self.app.push_screen_wait(ConfirmScreen(prompt)):
            return
        targets = [m for m, p in previews if p.ok and effects_phrase(kind, p)]
        results = await asyncio.gather(*(_send(m, command) for m in targets))
        lines = [f"{m.label}: {r.message}" for m, r in zip(targets, results, strict=True)]
        failed = any(not r.ok for r in results)
        self._say("\n".join(lines), severity="error" if failed else "information")


async def _timed(call: Awaitable[CommandPreview]) -> CommandPreview:
    return await asyncio.wait_for(call, REQUEST_TIMEOUT)


async def _send(member: FleetMember, command: Command) -> CommandResult:
    """Send ``command``; a failure becomes a failed result (the others still go)."""
    try:
        return await asyncio.wait_for(member.handle.send(command), REQUEST_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - one host's failure is reported with its name
        return CommandResult(False, f"not sent or not answered: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {REQUEST_TIMEOUT:.0f} s"
    return str(exc) or type(exc).__name__
