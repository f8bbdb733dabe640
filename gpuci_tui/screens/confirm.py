"""Modal questions: confirm a destructive action, and how to quit.

Both are keyboard-first: the safe answer is always one key away (n / Escape),
the confirm button has the focus so Enter confirms, and ``y`` confirms too.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from textual import on
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Static

from gpuci_tui.screens.prompts import Prompt


class ConfirmScreen(ModalScreen[bool]):
    """Ask "are you sure?" with the exact consequences; dismisses True to go ahead."""

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm.yes", tooltip="Go ahead"),
        Binding("n,escape", "cancel", "No", id="confirm.no", tooltip="Do nothing"),
    ]

    def __init__(self, prompt: Prompt) -> None:
        """Create the dialog for ``prompt``."""
        super().__init__(classes="dialog-screen")
        self.prompt = prompt

    def compose(self) -> Iterable[Widget]:
        """Title, consequences, buttons."""
        with Vertical(classes="dialog", id="confirm-dialog"):
            yield Static(self.prompt.title, classes="dialog-title", markup=False)
            yield Static(self.prompt.body, classes="dialog-body", id="confirm-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.prompt.confirm} (y)", id="yes", variant="warning")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        """Enter confirms: the confirm button starts focused."""
        self.query_one("#yes", Button).focus()

    @on(Button.Pressed, "#yes")
    def action_confirm(self) -> None:
        """Go ahead."""
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        """Do nothing."""
        self.dismiss(False)


class QuitChoice(StrEnum):
    """What the operator chose in the quit dialog."""

    LEAVE_RUNNING = "leave-running"
    DRAIN_THEN_QUIT = "drain-then-quit"


class QuitScreen(ModalScreen[QuitChoice | None]):
    """Quit, leaving agents running (default) or draining them first; None cancels."""

    BINDINGS = [
        Binding(
            "l", "leave", "Leave running", id="quit.leave", tooltip="Quit; agents keep running"
        ),
        Binding(
            "d", "drain", "Drain, then quit", id="quit.drain", tooltip="Drain all agents, then quit"
        ),
        Binding("c,n,escape", "cancel", "Cancel", id="quit.cancel", tooltip="Stay in the console"),
    ]

    def __init__(self, body: str, *, allow_drain: bool) -> None:
        """Create the dialog.

        Args:
            body: What quitting means for the agents (see `prompts.quit_body`).
            allow_drain: False in read-only mode (the drain option is not offered).
        """
        super().__init__(classes="dialog-screen")
        self.body = body
        self.allow_drain = allow_drain

    def compose(self) -> Iterable[Widget]:
        """Title, consequences, three buttons."""
        with Vertical(classes="dialog", id="quit-dialog"):
            yield Static("Quit gpuci-tui?", classes="dialog-title")
            yield Static(self.body, classes="dialog-body", id="quit-body", markup=False)
            if not self.allow_drain:
                yield Static(
                    "Read-only: draining is not offered.", classes="dialog-body muted", markup=False
                )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Leave agents running (l)", id="leave", variant="primary")
                if self.allow_drain:
                    yield Button("Drain all, then quit (d)", id="drain", variant="warning")
                yield Button("Cancel (c)", id="cancel")

    def on_mount(self) -> None:
        """Enter picks the default: leave agents running."""
        self.query_one("#leave", Button).focus()

    @on(Button.Pressed, "#leave")
    def action_leave(self) -> None:
        """Quit and leave agents running."""
        self.dismiss(QuitChoice.LEAVE_RUNNING)

    @on(Button.Pressed, "#drain")
    def action_drain(self) -> None:
        """Drain all agents, then quit."""
        if self.allow_drain:
            self.dismiss(QuitChoice.DRAIN_THEN_QUIT)
        else:
            self.notify(
                "read-only: draining is disabled (started with --readonly)",
                severity="warning",
                markup=False,
            )

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Stay in the console."""
        self.dismiss(None)
