"""The wizard test harness: a console without configuration, wired to fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from gpuci_tui.app import GpuciApp, make_app
from gpuci_tui.core.protocols import PatCheck, Pool
from gpuci_tui.screens.wizard import WizardScreen
from tests.ui.fakes import (
    GOOD_PAT,
    FakeAzure,
    FakeHandle,
    FakeRuntime,
    FakeTokenStore,
    make_services,
)
from tests.ui.helpers import wait_for
from tests.ui.scenarios import loaded_snapshot

URL = "https://dev.azure.com/contoso"
IMAGE = "gpuci-agent:amd64-ubuntu24.04-cuda13.0"
USABLE = SimpleNamespace(
    usable=True, kind="secret-service", backend_name="SecretService Keyring", message="", advice=""
)
ABSENT = SimpleNamespace(
    usable=False,
    kind="absent",
    backend_name="fail Keyring",
    message="No keyring backend is available (no D-Bus session).",
    advice="Run under dbus-run-session, use the encrypted file store, or GPUCI_PAT_FILE.",
)


@dataclass
class Setup:
    """Everything a wizard test can look at afterwards."""

    app: GpuciApp
    pilot: Pilot[Any]
    azure: FakeAzure
    tokens: FakeTokenStore
    config_path: Path
    started: list[Any] = field(default_factory=list)

    @property
    def wizard(self) -> WizardScreen:
        screen = self.app.screen
        assert isinstance(screen, WizardScreen), f"expected the wizard, got {screen!r}"
        return screen

    @property
    def message(self) -> str:
        return self.wizard.step.message

    def field(self, selector: str) -> Input:
        return self.wizard.query_one(selector, Input)

    async def click_shown(self, selector: str) -> None:
        """Click ``selector`` once it is on screen where the click lands.

        A panel the step's check shows scrolls into view after the next refresh: a click
        before that lands on whatever was there (seen with both cores busy), and the
        dialog it opens never comes.
        """
        widget = self.wizard.query_one(selector)

        def under_the_pointer() -> bool:
            region = widget.region
            if not region:
                return False
            try:
                return self.app.get_widget_at(region.x, region.y)[0] is widget
            except Exception:  # noqa: BLE001 - nothing there yet (off screen)
                return False

        # Twice in a row, a refresh apart: a panel still scrolling into view (both cores busy)
        # passed one look and had moved by the click. A miss lands where the button was a
        # moment before (the same panel, moving): look again and click once more.
        for _ in range(3):
            await wait_for(self.pilot, under_the_pointer, what=f"{selector} on screen")
            await self.pilot.pause()
            if under_the_pointer() and await self.pilot.click(selector):
                return
        raise AssertionError(f"the click missed {selector}")

    async def fill(self, selector: str, value: str) -> None:
        self.field(selector).value = value
        self.field(selector).focus()
        await self.pilot.pause()

    async def next(self) -> None:
        """Press Next (ctrl+n) and wait until the check has run.

        A check may sign in (an OpenID metadata request, a token request, then the
        organisation, each a fresh TLS connection): with both cores busy at the end of
        a long run that took over 10 s once, so this deadline is 30 s.
        """
        index = self.wizard.index
        await self.pilot.press("ctrl+n")
        try:
            await wait_for(
                self.pilot,
                lambda: (
                    not isinstance(self.app.screen, WizardScreen)
                    or self.wizard.index != index
                    or bool(self.message and not self.message.endswith("…"))
                ),
                timeout=30.0,
                what="the step's check",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe step says: {self.message!r}") from None

    async def at(self, index: int) -> None:
        await wait_for(self.pilot, lambda: self.wizard.index == index, what=f"step {index + 1}")

    async def through(self, last: int) -> None:
        """Fill valid values up to step ``last`` (0-based) and stop there."""
        values = {0: ("#url", URL), 1: ("#pat", GOOD_PAT), 2: ("#pool-name", "gpu-a100")}
        for index in range(last):
            await self.at(index)
            if index in values:
                await self.fill(*values[index])
            if index == 3:
                await wait_for(
                    self.pilot,
                    lambda: self.field("#image").value != "",
                    what="the image suggestion",
                )
            if index == 4:
                await wait_for(
                    self.pilot, lambda: self.field("#count").value != "", what="the defaults"
                )
            await self.next()
            assert self.wizard.index == index + 1, f"step {index + 1} refused: {self.message}"


def wizard_app(
    tmp_path: Path, **overrides: Any
) -> tuple[GpuciApp, FakeAzure, FakeTokenStore, Path, list[Any]]:
    """A console with no configuration, wired to fakes (not running yet).

    Returns the app, its Azure DevOps and token store fakes, the configuration path
    and the configurations it started a supervisor with.
    """
    azure = overrides.pop("azure", None) or FakeAzure(
        checks={GOOD_PAT: PatCheck(True, "ok", "", user="Jane Doe")},
        pools=[
            Pool(12, "gpu-a100", size=6),
            Pool(3, "Default", size=1),
            Pool(1, "Azure Pipelines", is_hosted=True),
        ],
    )
    tokens = overrides.pop("tokens", None) or FakeTokenStore()
    config_path = overrides.pop("config_path", None) or tmp_path / "cfg" / "config.toml"
    started: list[Any] = []

    async def start(config: Any) -> FakeHandle:
        started.append(config)
        return FakeHandle(loaded_snapshot())

    kwargs: dict[str, Any] = {
        "config": None,
        "config_path": config_path,
        "azure_factory": azure.factory,
        "token_store": tokens,
        "keyring_diagnose": lambda: USABLE,
        "hostname": "gpuhost.example.com",
        "runtime": FakeRuntime(images=[IMAGE]),
        "start_supervisor": start,
    }
    kwargs.update(overrides)
    return make_app(make_services(**kwargs)), azure, tokens, config_path, started


@asynccontextmanager
async def wizard(
    tmp_path: Path, size: tuple[int, int] = (100, 30), **overrides: Any
) -> AsyncIterator[Setup]:
    """A console with no configuration, wired to fakes."""
    app, azure, tokens, config_path, started = wizard_app(tmp_path, **overrides)
    async with app.run_test(size=size) as pilot:
        setup = Setup(app, pilot, azure, tokens, config_path, started)
        await wait_for(pilot, lambda: isinstance(app.screen, WizardScreen), what="the wizard")
        yield setup
