"""The console's image pull (key ``i``): the selected agent's group image, pulled now.

Like ``gpuci-tui image pull`` it goes through Docker directly (a pull is
idempotent; Docker joins it with a pull the daemon may be running for the same
image), with Docker's own credentials. The pull runs in a thread worker of the
dashboard; its progress is shown as notifications: one when it starts, one per
finished layer or every `NOTIFY_EVERY` seconds, and the result, with the same
messages as the daemon's events and the CLI.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gpuci_tui.core.config.loader import agent_groups
from gpuci_tui.core.docker.pull_progress import PullProgress
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.images.puller import ImagePuller, ImageRegistry
from gpuci_tui.core.models import SlotSnapshot

if TYPE_CHECKING:
    from gpuci_tui.screens.dashboard_base import DashboardBase

#: Seconds between two progress notifications when no layer finished in between.
NOTIFY_EVERY = 5.0


def image_of(screen: DashboardBase, slot: SlotSnapshot) -> str:
    """The image the configuration names for ``slot`` (its group's), as the snapshot says."""
    if slot.image:
        return slot.image
    config = screen.services.config
    if config is None:
        return ""
    for group in agent_groups(config):
        if group.implicit or group.name == slot.group:
            return group.agents.image
    return ""


class ConsolePull:
    """Pulls started from the dashboard: at most one per image at a time."""

    def __init__(self, screen: DashboardBase) -> None:
        """Pull for ``screen`` (its workers end with it)."""
        self.screen = screen
        self.running: set[str] = set()

    def start(self, slot: SlotSnapshot) -> str | None:
        """Start pulling ``slot``'s image; why not (None: started)."""
        registry = getattr(self.screen.services.runtime, "registry", None)
        if not isinstance(registry, ImageRegistry):
            return (
                "Pulling is not available here: this console has no Docker engine of the "
                "agents' host (on that host: gpuci-tui image pull)."
            )
        image = image_of(self.screen, slot)
        if not image:
            return f"No image is configured for {slot.name}."
        if image in self.running:
            return f"{image} is being pulled already."
        self.running.add(image)
        self.screen.run_worker(
            lambda: self._pull(registry, image),
            thread=True,
            group="image-pull",
            exit_on_error=False,
        )
        return None

    def _pull(self, registry: ImageRegistry, image: str) -> None:
        """The worker thread: pull, and notify through the app's thread."""
        app = self.screen.app
        shown = {"at": time.monotonic(), "layers": -1}

        def say(message: str, severity: str = "information") -> None:
            app.call_from_thread(
                self.screen.notify, message, severity=severity, title="Image pull", markup=False
            )

        def progress(p: PullProgress) -> None:
            now = time.monotonic()
            if p.layers_done != shown["layers"] or now - shown["at"] >= NOTIFY_EVERY:
                shown["at"], shown["layers"] = now, p.layers_done
                say(p.describe())

        say(f"pulling {image}…")
        try:
            final = ImagePuller(registry).pull(image, on_progress=progress)
        except GpuciError as exc:
            say(str(exc), "error")
        else:
            say(final.describe())
        finally:
            app.call_from_thread(self.running.discard, image)
