"""A test double of the roll-out inside a group (`Supervisor.reconfigure`), built elsewhere."""

from __future__ import annotations

import pytest

from gpuci_tui.core.command_types import CommandResult
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.runtime import DEFAULT_IMAGE


def two_groups(url: str, name_prefix: str) -> str:
    """A configuration of groups ``a`` and ``b`` (one slot each, no GPUs, no standby)."""
    return f"""
[azure]
url = "{url}"
pool = "gpu"

[agents]
image = "{DEFAULT_IMAGE}"
name_prefix = "{name_prefix}"
gpus = "none"
standby = false

[supervisor]
poll_interval = 0.5

[groups.a]
count = 1

[groups.b]
count = 1
"""


class Recorded:
    """Records the kept groups' reconfigure calls (the roll-out itself is not built here)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, Config, int, int | None]] = []
        self.previews: list[tuple[str, Config, int]] = []
        recorded = self

        def reconfigure(
            self: Supervisor, config: Config, *, canary: int = 0, canary_jobs: int | None = None
        ) -> CommandResult:
            recorded.calls.append((self.group, config, canary, canary_jobs))
            return CommandResult(True, f"image {config.agents.image} rolling out")

        def preview_reconfigure(
            self: Supervisor, config: Config, *, canary: int = 0
        ) -> tuple[str, ...]:
            recorded.previews.append((self.group, config, canary))
            return (f"slot 0: replaced now with {config.agents.image}",)

        monkeypatch.setattr(Supervisor, "reconfigure", reconfigure)
        monkeypatch.setattr(Supervisor, "preview_reconfigure", preview_reconfigure)
