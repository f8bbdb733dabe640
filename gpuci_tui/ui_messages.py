"""Textual messages that carry engine data from workers to the widgets.

Workers (the supervisor update stream, the GPU and log pollers) never touch
widgets: they post one of these messages, which is thread-safe. The high-rate
ones say they may replace a still-queued older copy (`can_replace`), so a slow
terminal renders the newest state instead of working through a backlog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot

if TYPE_CHECKING:
    from gpuci_tui.services import TokenStoreLike


@dataclass
class SnapshotReceived(Message):
    """A new supervisor snapshot arrived; only the newest one matters."""

    snapshot: SupervisorSnapshot

    def can_replace(self, message: Message) -> bool:
        """A queued older snapshot is superseded by this one."""
        return isinstance(message, SnapshotReceived)


@dataclass
class SupervisorEventReceived(Message):
    """One supervisor event for the event log (never coalesced: each is shown)."""

    event: SupervisorEvent


@dataclass
class SupervisorLinkChanged(Message):
    """The connection to the supervisor was lost or came back."""

    connected: bool
    message: str = ""


@dataclass
class GpuFrameSampled(Message):
    """A new GPU frame; only the newest one matters for the panel.

    Coalescing drops a queued frame, which leaves a gap in the sparkline history;
    that is preferable to rendering a backlog late.
    """

    frame: GpuFrame

    def can_replace(self, message: Message) -> bool:
        """A queued older frame is superseded by this one."""
        return isinstance(message, GpuFrameSampled)


@dataclass
class LogTailFetched(Message):
    """The tail of a container's output, as last polled."""

    container_id: str
    lines: list[str]
    error: str = ""

    def can_replace(self, message: Message) -> bool:
        """A queued older tail of the same container is superseded (tails overlap)."""
        return isinstance(message, LogTailFetched) and message.container_id == self.container_id


@dataclass
class SetupSaved(Message):
    """The setup wizard wrote the configuration; the App switches to the dashboard."""

    config: Config


@dataclass
class TokenStoreChosen(Message):
    """The wizard changed where the PAT lives (e.g. unlocked the encrypted file store).

    The App builds new `Services` with it (they are frozen), so the supervisor it
    starts reads the PAT from the same store.
    """

    token_store: TokenStoreLike
