"""What the dashboard's helpers see of it: services, handle, newest snapshot, selection.

`DashboardScreen` owns its key handlers (`dashboard_actions`) and its console pulls
(`image_pull`); they act on the screen that owns them. They are typed against this
base, which the screen extends, so neither imports the screen that imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.reactive import var
from textual.screen import Screen

from gpuci_tui.core.models import SlotSnapshot, SupervisorSnapshot

if TYPE_CHECKING:
    from gpuci_tui.core.host.handle import SupervisorHandle
    from gpuci_tui.services import Services


class DashboardBase(Screen[None]):
    """A screen with a supervisor's handle, its newest snapshot and a selected slot."""

    # always_update: an unchanged snapshot still tells the header the link is back.
    snapshot: var[SupervisorSnapshot | None] = var(None, always_update=True, init=False)
    """The supervisor's newest snapshot (None until the first one)."""

    def __init__(self, services: Services, *, id: str | None = None) -> None:  # noqa: A002
        """Hold ``services`` and its handle (Textual's ``id`` passes through)."""
        super().__init__(id=id)
        self.services = services
        self.handle: SupervisorHandle | None = services.handle

    def selected_slot_key(self) -> str | None:
        """The ``SLOT`` or ``GROUP/SLOT`` under the cursor (None: nothing selected)."""
        raise NotImplementedError

    def selected_slot(self) -> SlotSnapshot | None:
        """The selected slot as the newest snapshot has it (None: nothing selected)."""
        key = self.selected_slot_key()
        return None if self.snapshot is None or key is None else self.snapshot.slot_by_key(key)
