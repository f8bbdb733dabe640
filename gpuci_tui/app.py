"""The Textual application and `make_app`, the one factory the CLI, tests and screenshots use.

The App picks the first screen (setup wizard without a config, dashboard
otherwise), applies the keymap from ``config.keys``, starts or attaches the
supervisor through the injected callable, and owns the quit dialog. It never
creates clients itself: everything comes from `Services`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from gpuci_tui.core.command_types import Drain, Stop
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.engine.preview import preview
from gpuci_tui.core.fleet.link import Fleet
from gpuci_tui.core.host.handle import SupervisorHandle
from gpuci_tui.screens.confirm import ConfirmScreen, QuitChoice, QuitScreen
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.dashboard_actions import DASHBOARD_BINDINGS, PALETTE_TITLES
from gpuci_tui.screens.fleet import FLEET_BINDINGS, FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.fleet_prompts import fleet_quit_prompt
from gpuci_tui.screens.prompts import Prompt, quit_body
from gpuci_tui.services import Services
from gpuci_tui.ui_messages import SetupSaved, TokenStoreChosen

#: Binding ids a ``[keys]`` table may rebind (anything else is reported).
KNOWN_BINDING_IDS = frozenset(
    {b.id for b in [*DASHBOARD_BINDINGS, *FLEET_BINDINGS, *HostDashboardScreen.BINDINGS]
     if isinstance(b, Binding) and b.id and "." not in b.id} | {"quit"}
)  # fmt: skip


class GpuciApp(App[QuitChoice | None]):
    """gpuci-tui's console. Returns the quit choice (None when setup was abandoned)."""

    CSS_PATH = "gpuci.tcss"
    TITLE = "gpuci-tui"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "q",
            "quit",
            "Quit",
            id="quit",
            tooltip="Quit the console (asks whether to leave agents running)",
        ),
    ]

    def __init__(self, services: Services) -> None:
        """Create the console around ``services``; nothing is started before mount."""
        super().__init__()
        self.services = services
        self._starting = False

    # ------------------------------------------------------------------ start-up

    def get_default_screen(self) -> Screen[Any]:
        """The dashboard when there is a configuration; a blank base under the wizard otherwise.

        The wizard is pushed on top of the base (not made the base itself) so it can be
        replaced by the dashboard with `switch_screen` once it has saved.
        """
        if self.services.fleet is not None:
            return FleetScreen(self.services)
        if self.services.config is None or self.services.force_setup:
            return Screen(id="base")
        return DashboardScreen(self.services)

    def on_mount(self) -> None:
        """Open the wizard, or apply the keymap and start the supervisor when none came."""
        if self.services.fleet is not None:
            self.apply_keymap(self.services.fleet)
            return
        config = self.services.config
        if config is None or self.services.force_setup:
            from gpuci_tui.screens.wizard import WizardScreen

            self.push_screen(WizardScreen(self.services))
            return
        self.apply_keymap(config)
        if self.services.handle is None:
            self.start_supervisor(config)

    def apply_keymap(self, config: Config | Fleet) -> None:
        """Rebind keys from ``config.keys``; unknown ids are reported, not fatal."""
        keys = dict(config.keys)
        unknown = sorted(set(keys) - KNOWN_BINDING_IDS)
        if unknown:
            self.notify(
                f"[keys] in the configuration names unknown actions: {', '.join(unknown)}. "
                f"Known: {', '.join(sorted(KNOWN_BINDING_IDS))}.",
                title="Configuration",
                severity="warning",
                markup=False,
            )
        known = {name: value for name, value in keys.items() if name in KNOWN_BINDING_IDS}
        if known:
            self.set_keymap(known)

    def start_supervisor(self, config: Config) -> None:
        """Start (or attach to) the supervisor for ``config`` in a worker."""
        if self.services.start_supervisor is None:
            self._dashboard_waiting("No supervisor is attached, and this console cannot start one.")
            return
        self._starting = True
        self._dashboard_waiting("starting the supervisor…")
        self.run_worker(self._start(config), group="start", exclusive=True, exit_on_error=False)

    async def _start(self, config: Config) -> None:
        starter = self.services.start_supervisor
        assert starter is not None
        try:
            handle = await starter(config)
        except Exception as exc:  # noqa: BLE001 - shown plainly; the console stays usable
            self._starting = False
            message = str(exc) or type(exc).__name__
            self._dashboard_waiting(f"The supervisor did not start: {message}")
            self.notify(message, title="Supervisor did not start", severity="error", markup=False)
            return
        self._starting = False
        self.attach(handle)

    def attach(self, handle: SupervisorHandle) -> None:
        """Make ``handle`` the console's supervisor and follow it on the dashboard."""
        self.services = replace(self.services, handle=handle)
        for screen in self.screen_stack:
            if isinstance(screen, DashboardScreen):
                screen.attach(handle)

    def on_setup_saved(self, message: SetupSaved) -> None:
        """The wizard saved the configuration: on to the dashboard."""
        self.show_dashboard(message.config)

    def on_token_store_chosen(self, message: TokenStoreChosen) -> None:
        """The wizard unlocked another token store: the App's services use it from now on."""
        self.services = replace(self.services, token_store=message.token_store)

    def show_dashboard(self, config: Config) -> None:
        """Leave the wizard for the dashboard and start the supervisor (called by the wizard)."""
        self.services = replace(self.services, config=config)
        self.apply_keymap(config)
        self.switch_screen(DashboardScreen(self.services))
        if self.services.handle is None:
            self.start_supervisor(config)

    def _dashboard_waiting(self, message: str) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.show_waiting(message)

    # ------------------------------------------------------------------ quitting

    async def action_quit(self) -> None:
        """Ask how to quit (also reached with ctrl+q and the command palette)."""
        if any(isinstance(s, QuitScreen) for s in self.screen_stack):
            return
        if self.services.fleet is not None:
            if not isinstance(self.screen, ConfirmScreen):
                prompt = fleet_quit_prompt(len(self.services.fleet.members))
                self.push_screen(ConfirmScreen(prompt), self._leave_fleet)
            return
        dashboard = self._dashboard()
        if dashboard is None:
            self.push_screen(
                ConfirmScreen(
                    Prompt(
                        "Leave setup?",
                        "Nothing has been saved: the configuration is written only at the "
                        "review step.",
                        "Leave",
                    )
                ),
                self._leave_setup,
            )
            return
        handle = self.services.handle
        mode = handle.mode if handle is not None else "in-process"
        mode = "demo" if self.services.demo else mode
        snapshot = dashboard.snapshot
        if handle is None:
            body = "No supervisor is running: nothing else is affected."
        else:
            stop = preview(snapshot, Stop()) if snapshot is not None else None
            body = quit_body(snapshot, mode, stop)
        allow_drain = handle is not None and not self.services.readonly
        self.push_screen(QuitScreen(body, allow_drain=allow_drain), self._quit_chosen)

    def _leave_fleet(self, leave: bool | None) -> None:
        if leave:
            self.exit(QuitChoice.LEAVE_RUNNING)

    def _leave_setup(self, leave: bool | None) -> None:
        if leave:
            self.exit(None)

    def _dashboard(self) -> DashboardScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, DashboardScreen):
                return screen
        return None

    async def _quit_chosen(self, choice: QuitChoice | None) -> None:
        if choice is None:
            return
        handle = self.services.handle
        if handle is not None:
            daemon = handle.mode == "daemon"
            if choice is QuitChoice.DRAIN_THEN_QUIT:
                # A daemon keeps running and drains on its own; an in-process
                # supervisor disables every agent and stops idle ones before it stops.
                command: Drain | Stop = Drain(slots=None) if daemon else Stop(drain=True)
            elif daemon:
                self.exit(choice)
                return
            else:
                command = Stop(drain=False)
            try:
                result = await handle.send(command)
            except Exception as exc:  # noqa: BLE001 - reported; quitting is not blocked by it
                message = str(exc) or type(exc).__name__
                if choice is QuitChoice.DRAIN_THEN_QUIT:
                    self.notify(
                        f"Draining failed, so the console stays open: {message}",
                        severity="error",
                        markup=False,
                    )
                    return
            else:
                if not result.ok and choice is QuitChoice.DRAIN_THEN_QUIT:
                    self.notify(
                        f"Draining failed, so the console stays open: {result.message}",
                        severity="error",
                        markup=False,
                    )
                    return
        self.exit(choice)

    # ------------------------------------------------------------------ palette

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The dashboard's actions in the command palette, with their tooltips."""
        yield from super().get_system_commands(screen)
        if isinstance(screen, DashboardScreen):
            for binding in DASHBOARD_BINDINGS:
                if isinstance(binding, Binding) and binding.description:
                    action = binding.action

                    async def run(action: str = action, target: Screen[Any] = screen) -> None:
                        await target.run_action(action)

                    title = PALETTE_TITLES.get(binding.id or "", binding.description)
                    yield SystemCommand(title, binding.tooltip, run)


def make_app(services: Services) -> GpuciApp:
    """Build the console around ``services`` (the CLI, tests and screenshot script use this)."""
    return GpuciApp(services)
