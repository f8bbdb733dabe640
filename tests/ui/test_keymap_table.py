"""The configuration's table of rebindable actions (`config.keys`) is the console's own.

The core imports no Textual, so ``[keys]`` is checked against a table of its own:
every action id, its default keys and the screens it acts on. Here that table is
held against the screens' real bindings, and its key names against Textual's, so
``check-config`` never refuses a key the console takes or passes one it would not.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.keys import _normalize_key_list

from gpuci_tui.app import KNOWN_BINDING_IDS, GpuciApp
from gpuci_tui.core.config.keys import ACTIONS, DASHBOARD, FLEET, HOST, key_name
from gpuci_tui.screens.dashboard_actions import DASHBOARD_BINDINGS
from gpuci_tui.screens.fleet import FLEET_BINDINGS
from gpuci_tui.screens.fleet_host import HostDashboardScreen


def bound(bindings: list[object]) -> dict[str, str]:
    return {b.id: b.key for b in bindings if isinstance(b, Binding) and b.id and "." not in b.id}


def test_every_action_has_the_id_keys_and_screens_the_console_binds() -> None:
    quit_keys = bound(list(GpuciApp.BINDINGS))
    screens = {
        DASHBOARD: {**bound(list(DASHBOARD_BINDINGS)), **quit_keys},
        FLEET: {**bound(list(FLEET_BINDINGS)), **quit_keys},
        HOST: {**bound(list(HostDashboardScreen.BINDINGS)), **quit_keys},
    }
    assert set(ACTIONS) == set(KNOWN_BINDING_IDS)
    for action, spec in ACTIONS.items():
        where = tuple(name for name, keys in screens.items() if action in keys)
        assert where == spec.screens, action
        assert {screens[name][action] for name in where} == {spec.default}, action


def test_key_names_are_textual_s() -> None:
    for key in ("?", "+", "-", "/", "\\", "@", "_", "!", "#", "x", "D", "f5", "ctrl+d"):
        assert key_name(key) == _normalize_key_list(key), key
