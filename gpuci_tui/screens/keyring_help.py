"""When the keyring cannot hold the PAT: explain why and offer the three ways out.

Headless GPU hosts reached over SSH usually have no Secret Service, so storing
the PAT fails. The wizard never falls back to plain text silently; it offers:

1. the Secret Service, unlocked for this login (a recipe to run, then restart setup);
2. the encrypted file store, unlocked with a passphrase typed into a modal;
3. a PAT file readable only by this user, named by ``GPUCI_PAT_FILE`` (what a
   systemd service uses).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual import on
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Static

from gpuci_tui.core.files import atomic_write

SECRET_SERVICE_RECIPE = (
    "Quit setup, then start it inside a D-Bus session with an unlocked keyring "
    "(needs the gnome-keyring and dbus packages):\n"
    "  read -rs KEYRING_PASSWORD && export KEYRING_PASSWORD\n"
    '  dbus-run-session -- sh -c \'printf %s "$KEYRING_PASSWORD" | '
    "gnome-keyring-daemon --unlock --components=secrets >/dev/null; exec gpuci-tui'\n"
    "The first unlock creates the keyring with that password; the supervisor must run "
    "in such a session too."
)


def write_pat_file(path: Path, pat: str) -> None:
    """Write ``pat`` to ``path`` readable only by this user (0600, directory 0700).

    Written with `atomic_write`, so a half-written PAT never exists under the
    final name; a symlink at the final name is replaced, not followed.

    Raises:
        OSError: the directory or file cannot be written.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, pat.strip() + "\n", mode=0o600)


class KeyringOptions(Vertical):
    """The explanation and the three choices, shown inside the PAT step."""

    def __init__(self, *, id: str) -> None:
        """Create the (initially hidden) panel."""
        super().__init__(id=id, classes="keyring-options")
        self.display = False

    def compose(self) -> Iterable[Widget]:
        """Why, then one button per way out, then the recipe area."""
        yield Static("", id="keyring-why", classes="error-text", markup=False)
        yield Static(
            "Keep the PAT in an encrypted file (unlocked with a passphrase), in a file only you "
            "can read (for a systemd service), or set up the Secret Service:",
            classes="hint",
        )
        with Horizontal(classes="dialog-buttons"):
            yield Button("Encrypted file", id="use-cryptfile", variant="primary")
            yield Button("PAT file (systemd)", id="use-pat-file")
            yield Button("Secret Service help", id="show-recipe")
        yield Static("", id="keyring-recipe", classes="hint", markup=False)

    def explain(self, why: str) -> None:
        """Show the panel with ``why`` the keyring cannot be used."""
        self.query_one("#keyring-why", Static).update(why)
        self.display = True
        # The way-outs are what matters now; on a short terminal they may be below the fold.
        self.call_after_refresh(self.scroll_visible, animate=False)

    @on(Button.Pressed, "#show-recipe")
    def _recipe(self) -> None:
        self.query_one("#keyring-recipe", Static).update(SECRET_SERVICE_RECIPE)


class PassphraseScreen(ModalScreen[str | None]):
    """Ask for the encrypted file store's passphrase (twice when creating it)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="passphrase.cancel")]

    def __init__(self, *, store: Path, creating: bool, error: str = "") -> None:
        """Create the dialog.

        Args:
            store: The encrypted file (named in the text).
            creating: No store exists yet: ask twice so a typo cannot lock the PAT away.
            error: Why the previous attempt failed (e.g. wrong passphrase).
        """
        super().__init__(classes="dialog-screen")
        self.store = store
        self.creating = creating
        self.error = error

    def compose(self) -> Iterable[Widget]:
        """Password fields and buttons."""
        action = "Choose a passphrase for" if self.creating else "Enter the passphrase of"
        with Vertical(classes="dialog", id="passphrase-dialog"):
            yield Static("Encrypted PAT store", classes="dialog-title")
            yield Static(
                f"{action} {self.store}. The console asks for it again each time it starts; "
                "a service without a terminal should use GPUCI_PAT_FILE instead.",
                classes="dialog-body",
                markup=False,
            )
            yield Input(password=True, placeholder="passphrase", id="passphrase")
            if self.creating:
                yield Input(
                    password=True, placeholder="the same passphrase again", id="passphrase2"
                )
            yield Static(self.error, id="passphrase-error", classes="error-text", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Unlock", id="unlock", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        """Type straight away."""
        self.query_one("#passphrase", Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if self.creating and event.input.id == "passphrase":
            self.query_one("#passphrase2", Input).focus()
        else:
            self._unlock()

    @on(Button.Pressed, "#unlock")
    def _unlock(self) -> None:
        first = self.query_one("#passphrase", Input).value
        error = self.query_one("#passphrase-error", Static)
        if not first:
            error.update("Type the passphrase.")
            return
        if self.creating and first != self.query_one("#passphrase2", Input).value:
            error.update("The two passphrases differ; type them again.")
            return
        self.dismiss(first)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Back to the PAT step without a store."""
        self.dismiss(None)
