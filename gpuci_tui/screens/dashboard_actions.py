"""What the dashboard's keys do: confirm when it matters, refuse when read-only, send.

Kept apart from the layout (`dashboard.py`): `DashboardCommands`, a helper the
dashboard owns, decides *which* `Command` goes to the supervisor and what the
operator is told; the screen only renders and hands each key to it. Every
command goes through `SupervisorHandle.send`, and its `CommandResult.message`
is shown as a notification.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.notifications import SeverityLevel

from gpuci_tui.core.command_types import (
    Command,
    Drain,
    GpuClear,
    Pause,
    Reload,
    Restart,
    Resume,
    Scale,
    Unpause,
)
from gpuci_tui.core.engine.gpu_health import gpu_clear_refusal, nothing_to_clear
from gpuci_tui.core.engine.preview import CommandPreview, gpu_clear_words, preview, resumable
from gpuci_tui.core.models import SlotSnapshot, SlotState, SupervisorSnapshot
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.help import HelpScreen, agent_legends, keys_as_bound, navigation
from gpuci_tui.screens.history import HistoryScreen
from gpuci_tui.screens.image_pull import ConsolePull
from gpuci_tui.screens.logs import LogScreen
from gpuci_tui.screens.prompts import (
    Prompt,
    drain_all_prompt,
    drain_prompt,
    reload_prompt,
    restart_all_prompt,
    restart_prompt,
    scale_down_prompt,
)
from gpuci_tui.screens.stale import StaleScreen


def gpu_clear_prompt(answer: CommandPreview, gpu: str) -> Prompt:
    """The confirmation of ``gpu clear`` (the words come from the core, as for the CLI)."""
    title = "Clear every quarantined GPU?" if gpu == "all" else f"Clear GPU {gpu}?"
    return Prompt(title, gpu_clear_words(answer, gpu), "Clear")


if TYPE_CHECKING:
    from gpuci_tui.screens.dashboard_base import DashboardBase

DASHBOARD_BINDINGS = [
    Binding("d", "drain", "Drain", id="drain",
            tooltip="Drain the selected agent: it finishes its job, then stays stopped"),
    Binding("D", "drain_all", "Drain all", id="drain_all", show=False,
            tooltip="Drain every agent: busy ones finish their job, idle ones stop"),
    Binding("r", "restart", "Restart", id="restart",
            tooltip="Replace the selected agent with a fresh one (after its job if busy)"),
    Binding("R", "restart_all", "Restart all", id="restart_all", show=False,
            tooltip="Replace every agent (busy ones after their job)"),
    Binding("u", "resume", "Resume", id="resume",
            tooltip="Undo drain/park of the selected agent: start replacing it again"),
    Binding("plus", "scale_up", "More", id="scale_up",
            tooltip="Run one more agent"),
    Binding("minus", "scale_down", "Fewer", id="scale_down",
            tooltip="Run one agent fewer (the highest slot is drained, never killed)"),
    Binding("l", "logs", "Logs", id="logs",
            tooltip="Follow the selected agent's container output"),
    Binding("h", "history", "History", id="history",
            tooltip="Finished jobs: sort, filter, and each pipeline's GPU memory and duration trend"),
    Binding("p", "pause", "Pause", id="pause",
            tooltip="Pause/resume replenishing: running agents stay, exited ones are not replaced"),
    Binding("g", "gpu_clear", "GPU clear", id="gpu_clear", show=False,
            tooltip="Clear a quarantined GPU (Xid, ECC, row remap) so its agents take jobs again"),
    Binding("ctrl+r", "reload", "Reload", id="reload", show=False,
            tooltip="Re-read the configuration file: see what would change, then apply it live"),
    Binding("ctrl+o", "reset_overrides", "Reset overrides", id="reset_overrides", show=False,
            tooltip="Reload the file and drop the runtime scale, pause and drains: see which first"),
    Binding("x", "stale", "Stale", id="stale", show=False,
            tooltip="The pool's stale registrations of this host, and pruning them (asks first)"),
    Binding("i", "image_pull", "Pull image", id="image_pull",
            tooltip="Pull the selected agent's image now, with progress (Docker's credentials)"),
    Binding("question_mark", "help", "Help", id="help",
            tooltip="Keys and what the agent states mean"),
]  # fmt: skip

#: The agents table's keys the help tells, besides the bindings.
DASHBOARD_NAVIGATION = (
    navigation("↑ ↓ home end", "Select", "Move the cursor over the agents: keys act on that agent",
               "up", "down", "home", "end"),
)  # fmt: skip

HELP_NOTE = (
    "Drain, restart and scale-down never kill a running job: busy agents finish first. "
    "Keys can be changed in the [keys] table of the configuration file."
)

#: Command-palette titles (the footer's descriptions are too short to search for).
PALETTE_TITLES = {
    "drain": "Drain the selected agent",
    "drain_all": "Drain all agents",
    "restart": "Restart the selected agent",
    "restart_all": "Restart all agents",
    "resume": "Resume the selected agent",
    "scale_up": "Scale up: one more agent",
    "scale_down": "Scale down: one agent fewer",
    "logs": "Logs of the selected agent",
    "history": "History of finished jobs (GPU memory and duration trends)",
    "pause": "Pause / resume replenishing",
    "gpu_clear": "Clear a quarantined GPU (asks first)",
    "reload": "Reload the configuration file (shows what would change first)",
    "reset_overrides": "Reload and drop the runtime overrides: scale, pause, drains (asks first)",
    "stale": "Stale registrations: list and prune (asks first)",
    "image_pull": "Pull the selected agent's image now",
    "help": "Help: keys and agent states",
}


class DashboardCommands:
    """What the dashboard's keys do, on behalf of the dashboard that owns it.

    It reads the screen's handle, snapshot and selected slot when a key is pressed,
    and runs its workers and dialogs on that screen (so they end with it).
    """

    def __init__(self, screen: DashboardBase) -> None:
        """Act for ``screen``."""
        self.screen = screen
        self.host = ""
        """The fleet host acted on, named in every confirmation and answer (empty: this one)."""
        self.pending_desired: int | None = None
        """The count last asked for, so ``+ + +`` adds three before the next snapshot."""
        self.pulls = ConsolePull(screen)

    def snapshot_changed(
        self, old: SupervisorSnapshot | None, new: SupervisorSnapshot | None
    ) -> None:
        """A snapshot that reflects (or overrides) the count asked for ends the local guess."""
        if new is None:
            return
        changed = old is not None and new.desired_count != old.desired_count
        if changed or self.pending_desired == new.desired_count:
            self.pending_desired = None

    # ------------------------------------------------------------------ helpers

    def _say(
        self, message: str, *, severity: SeverityLevel = "information", title: str = ""
    ) -> None:
        # Messages carry names and server text: never let "[...]" be taken as markup.
        self.screen.notify(message, severity=severity, title=title or self.host, markup=False)

    def _refused(self, what: str) -> bool:
        if self.screen.services.readonly:
            self._say(
                f"read-only: {what} is disabled (the console was started with --readonly).",
                title="Read-only",
                severity="warning",
            )
            return True
        return False

    def _selected(self) -> SlotSnapshot | None:
        slot = self.screen.selected_slot()
        if slot is None:
            self._say("No agent is selected: the supervisor has not reported any slot yet.")
        return slot

    def _connected(self) -> SupervisorSnapshot | None:
        snapshot = self.screen.snapshot
        if self.screen.handle is None or snapshot is None:
            self._say(
                "No supervisor is connected yet, so there is nothing to act on.", severity="warning"
            )
            return None
        return snapshot

    def _confirm_then_send(self, prompt: Prompt, command: Command) -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                self.send(command)

        prompt = prompt.on(self.host) if self.host else prompt
        self.screen.app.push_screen(ConfirmScreen(prompt), answered)

    def _confirm(self, command: Command, words: Callable[[CommandPreview], Prompt]) -> None:
        """Ask the supervisor what ``command`` would do, put it into words, confirm, send."""
        self.screen.run_worker(self._ask(command, words), group="commands", exit_on_error=False)

    async def _ask(self, command: Command, words: Callable[[CommandPreview], Prompt]) -> None:
        handle, snapshot = self.screen.handle, self.screen.snapshot
        if handle is None or snapshot is None:
            return
        try:
            answer = await handle.preview(command)
        except Exception:  # noqa: BLE001 - e.g. a daemon from before previews: same rules here
            answer = preview(snapshot, command)
        if not answer.ok:
            self._say(answer.message, severity="error")
            return
        self._confirm_then_send(words(answer), command)

    def send(self, command: Command) -> None:
        """Send ``command`` in a worker and notify its result."""
        self.screen.run_worker(self._send(command), group="commands", exit_on_error=False)

    async def _send(self, command: Command) -> None:
        handle = self.screen.handle
        if handle is None:
            self._say("No supervisor is connected: the command was not sent.", severity="error")
            return
        try:
            result = await handle.send(command)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, the console goes on
            self._say(
                f"The supervisor did not take the command: {exc or type(exc).__name__}",
                title="Command failed",
                severity="error",
            )
            return
        if result.ok and isinstance(command, Scale):
            self.pending_desired = command.count
        self._say(result.message, severity="information" if result.ok else "error")

    def _desired(self, snapshot: SupervisorSnapshot) -> int:
        if self.pending_desired is not None:
            return self.pending_desired
        return snapshot.desired_count

    # ------------------------------------------------------------------ commands

    def drain(self) -> None:
        """Drain the selected agent (asks first)."""
        if self._refused("draining") or self._connected() is None:
            return
        slot = self._selected()
        if slot is None:
            return
        if slot.state is SlotState.DRAINED:
            self._say(f"{slot.name} is already drained. Press u to resume it.")
            return
        if slot.state is SlotState.DRAINING:
            self._say(f"{slot.name} is already draining: {slot.message or 'waiting for its job'}.")
            return
        self._confirm(Drain(slots=(slot.slot,), group=slot.group or None), drain_prompt)

    def drain_all(self) -> None:
        """Drain every agent (asks first)."""
        if self._refused("draining") or self._connected() is None:
            return
        self._confirm(Drain(slots=None), drain_all_prompt)

    def restart(self) -> None:
        """Restart the selected agent (asks first)."""
        if self._refused("restarting") or self._connected() is None:
            return
        slot = self._selected()
        if slot is None:
            return
        self._confirm(Restart(slots=(slot.slot,), group=slot.group or None), restart_prompt)

    def restart_all(self) -> None:
        """Restart every agent (asks first)."""
        if self._refused("restarting") or self._connected() is None:
            return
        self._confirm(Restart(slots=None), restart_all_prompt)

    def resume(self) -> None:
        """Undo drain/park of the selected agent."""
        if self._refused("resuming") or self._connected() is None:
            return
        slot = self._selected()
        if slot is None:
            return
        if not resumable(slot):
            self._say(f"{slot.name} is {slot.state}: there is nothing to resume.")
            return
        self.send(Resume(slots=(slot.slot,), group=slot.group or None))

    def scale_up(self) -> None:
        """Run one more agent."""
        if self._refused("scaling") or (snapshot := self._connected()) is None:
            return
        self.send(Scale(count=self._desired(snapshot) + 1))

    def scale_down(self) -> None:
        """Run one agent fewer (asks first: the highest slot is drained)."""
        if self._refused("scaling") or (snapshot := self._connected()) is None:
            return
        desired = self._desired(snapshot)
        if desired <= 0:
            self._say("No agent is wanted already (desired count 0).")
            return
        new = desired - 1
        self._confirm(Scale(count=new), lambda answer: scale_down_prompt(answer, desired, new))

    def pause(self) -> None:
        """Pause or resume replenishing."""
        if self._refused("pausing") or (snapshot := self._connected()) is None:
            return
        self.send(Unpause() if snapshot.paused else Pause())

    def gpu_clear(self) -> None:
        """Clear the quarantined GPU (every one when several), after a confirmation."""
        if self._refused("clearing a GPU") or (snapshot := self._connected()) is None:
            return
        gates = snapshot.gpu_gates
        problem = gpu_clear_refusal([(g.index, g.uuid) for g in gates] if gates else None, "all")
        quarantined = [g for g in gates if g.state == "quarantined"]
        if problem is not None or not quarantined:
            self._say(problem or nothing_to_clear(g.index for g in gates))
            return
        gpu = str(quarantined[0].index) if len(quarantined) == 1 else "all"
        self._confirm(GpuClear(gpu), lambda answer: gpu_clear_prompt(answer, gpu))

    def reload(self, reset_overrides: bool = False) -> None:
        """Re-read the configuration: the supervisor's dry run first, then confirm and apply.

        ``reset_overrides``: then drop the runtime scale, pause and drains (the dry run names them).
        """
        if self._refused("reloading the configuration") or self._connected() is None:
            return
        command = Reload(reset_overrides=reset_overrides)
        self.screen.run_worker(self._ask_reload(command), group="commands", exit_on_error=False)

    async def _ask_reload(self, command: Reload) -> None:
        handle = self.screen.handle
        if handle is None:
            return
        try:
            # Only the supervisor can read its file again: no local guess to fall back on.
            answer = await handle.preview(command)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, the console goes on
            self._say(
                f"The supervisor could not say what a reload would change: {exc}",
                title="Reload",
                severity="error",
            )
            return
        if not answer.ok:
            self._say(answer.message, title="Reload: nothing changed", severity="error")
            return
        self._confirm_then_send(reload_prompt(answer), command)

    def image_pull(self) -> None:
        """Pull the selected agent's image now (Docker directly; progress as notifications)."""
        if self._refused("pulling an image") or (slot := self._selected()) is None:
            return
        problem = self.pulls.start(slot)
        if problem is not None:
            self._say(problem, severity="warning")

    # ------------------------------------------------------------------ views

    def logs(self) -> None:
        """Open the log view of the selected agent (allowed in read-only mode)."""
        services = self.screen.services
        runtime = services.runtime
        if runtime is None:
            self._say(
                "Logs are not available: no container runtime is connected.", severity="error"
            )
            return
        slot = self._selected()
        if slot is None:
            return
        key = slot.key

        def container_of() -> str | None:
            snapshot = self.screen.snapshot
            current = None if snapshot is None else snapshot.slot_by_key(key)
            return None if current is None else current.container_id

        earlier = slot.last_exit.log_tail if slot.last_exit is not None else ()
        self.screen.app.push_screen(
            LogScreen(
                slot_name=slot.name,
                container_of=container_of,
                runtime=runtime,
                interval=services.log_interval,
                earlier_lines=earlier,
            )
        )

    def history(self) -> None:
        """Open the history of finished jobs (read-only, so allowed in read-only mode)."""
        self.screen.app.push_screen(HistoryScreen(self.screen.services))

    def stale(self) -> None:
        """Open the stale registrations (pruning refuses in read-only mode)."""
        snapshot = self.screen.snapshot
        stale = () if snapshot is None else snapshot.stale
        readonly = self.screen.services.readonly
        self.screen.app.push_screen(
            StaleScreen(self.screen.handle, stale, readonly=readonly, host=self.host)
        )

    def help(self) -> None:
        """Show the keys as bound now (keymap applied) and the state legend."""
        keys = keys_as_bound(self.screen.app, DASHBOARD_NAVIGATION)
        self.screen.app.push_screen(
            HelpScreen(
                keys,
                readonly=self.screen.services.readonly,
                title="Keys of the dashboard",
                legends=agent_legends(keys),
                note=HELP_NOTE,
            )
        )
