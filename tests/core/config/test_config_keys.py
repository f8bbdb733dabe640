"""``[keys]`` is checked like every other table: unknown actions, key names, clashes, reserved keys.

Issue 28: ``drain = "q"`` took Quit's key and a typo ``drian`` was ignored, where
every other table answers "did you mean". Each problem is reported under its own
``keys.ACTION`` with what to do; ``check-config`` and ``run`` refuse the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.keys import ACTIONS, check_keys_table, key_name
from gpuci_tui.core.config.loader import load_config
from tests.core.config_helpers import base_doc, problems, write


def with_keys(**keys: Any) -> dict[str, Any]:
    doc = base_doc()
    doc["keys"] = keys
    return doc


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"drian": "k"},
            'keys.drian: is not an action of the console; did you mean "drain"? actions: quit, '
            "help, drain",
        ),
        (
            {"drain": "q"},
            'keys.drain: binds "q", which is also quit\'s key (on the dashboard and the fleet and '
            "the host dashboard): one of them would never fire; give one of them another key",
        ),
        (
            {"drain": "x"},
            'keys.drain: binds "x", which is also stale\'s key (on the dashboard and the host '
            "dashboard)",
        ),
        (
            {"restart": "?"},
            'keys.restart: binds "question_mark", which is also help\'s key',
        ),
        (
            {"drain": "k", "pause": "k"},
            'keys.drain: binds "k", which is also pause\'s key (on the dashboard and the host '
            "dashboard)",
        ),
        (
            {"drain": ","},
            'keys.drain: leaves the action without a key; give one or more, e.g. "x" or '
            '"ctrl+d,f5" (or delete the line to keep its default)',
        ),
        ({"drain": ""}, "keys.drain: leaves the action without a key"),
        ({"drain": "escape"}, 'keys.drain: binds "escape", which the console keeps: it goes back'),
        ({"logs": "ctrl+p"}, "it opens the command palette; choose another key"),
        ({"pause": "tab"}, 'keys.pause: binds "tab", which the console keeps: it moves the focus'),
        (
            {"drain": "crtl+d"},
            'keys.drain: has the key "crtl+d": "crtl" is not a modifier; did you mean "ctrl"? '
            "modifiers are ctrl+, shift+, alt+, meta+, super+, hyper+",
        ),
        ({"drain": "ctrl+Page Up"}, 'has the key "ctrl+Page Up", which is no key name'),
        ({"quit": 5}, 'keys.quit: must be key names in quotes, such as "x" or "ctrl+d,f5", got 5'),
    ],
)
def test_a_bad_keys_table_is_refused_under_its_own_key(
    tmp_path: Path, keys: dict[str, Any], expected: str
) -> None:
    found = problems(tmp_path, with_keys(**keys))
    assert any(expected in line for line in found), found


def test_good_bindings_load_and_a_key_moved_off_an_action_frees_it(tmp_path: Path) -> None:
    keymap = {
        "drain": " ctrl+d ",
        "quit": "q,f10",  # its own default with another key: not a clash with fleet_back's q
        "stale": "w",  # x is free now
        "restart": "x",
        "scale_up": "+",  # Textual's "plus", its own key
        "fleet_back": "b,escape",  # escape is reserved, but back is what it does
    }
    config = load_config(write(tmp_path / "k.toml", with_keys(**keymap)))
    assert config.keys == {
        "drain": "ctrl+d",
        "quit": "q,f10",
        "stale": "w",
        "restart": "x",
        "scale_up": "+",
        "fleet_back": "b,escape",
    }


def test_a_key_on_screens_that_never_meet_is_no_clash() -> None:
    # resume_all acts on the fleet overview only, logs on a dashboard only.
    keys, errors = check_keys_table({"resume_all": "l"})
    assert errors == [] and keys == {"resume_all": "l"}


def test_a_clash_between_two_rebound_actions_is_said_once() -> None:
    _, errors = check_keys_table({"pause": "k", "drain": "k"})
    assert [e.key for e in errors] == ["keys.drain"]


def test_key_names_are_compared_as_textual_names_them() -> None:
    assert [key_name(k) for k in ("?", "+", "-", "/", "@", "_", "x", "f5", " D ")] == [
        "question_mark", "plus", "minus", "slash", "at", "underscore", "x", "f5", "D",
    ]  # fmt: skip
    assert set(ACTIONS) >= {"quit", "help", "drain", "reload", "reset_overrides"}
