"""``[keys]``: the console actions a file may rebind, their keys, and the rules of a keymap.

The console's screens bind these actions by id (``drain``, ``quit``, ...); a
``[keys]`` table rebinds them (``drain = "x"``, several keys with commas:
``"ctrl+d,f5"``). The table here is the console's as the configuration knows it
(the core imports no Textual; tests/ui checks it against the screens' bindings):
each action's default keys and the screens it acts on. The rules, checked with
every other table's, so ``check-config`` and ``run`` refuse what the console
would get wrong:

* an unknown action gets "did you mean" (``drian`` → ``drain``), as every table;
* a key is a Textual key name, modifiers first (``ctrl+``, ``shift+``, ``alt+``, ...);
* an action left without a key (``drain = ","``) is refused;
* a key the console keeps for itself (escape, enter, tab, the arrows, ctrl+c, ...)
  cannot be taken;
* a key bound to two actions on one screen (``drain = "q"`` takes Quit's key) is
  refused naming both: one of them would never fire.

Keys are compared as Textual compares them (``"?"`` is ``question_mark``, `key_name`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.validate import suggest

__all__ = ["ACTIONS", "RESERVED", "KeyAction", "check_keys_table", "key_name"]

DASHBOARD, FLEET, HOST = "dashboard", "fleet", "host dashboard"
"""The console's screens with rebindable actions (a host's dashboard is the fleet's view of one
host: the dashboard's actions, and the fleet's reconnect and back)."""


@dataclass(frozen=True)
class KeyAction:
    """One rebindable action of the console."""

    default: str
    """Its keys unless the file says otherwise (Textual's names, comma-separated)."""
    screens: tuple[str, ...]
    """Where it acts: two actions on one screen cannot share a key."""


_BOTH = (DASHBOARD, HOST)
_ALL = (DASHBOARD, FLEET, HOST)
ACTIONS: Mapping[str, KeyAction] = {
    "quit": KeyAction("q", _ALL),
    "help": KeyAction("question_mark", _ALL),
    "drain": KeyAction("d", _ALL),
    "drain_all": KeyAction("D", _ALL),
    "restart": KeyAction("r", _ALL),
    "restart_all": KeyAction("R", _ALL),
    "resume": KeyAction("u", _ALL),
    "resume_all": KeyAction("U", (FLEET,)),
    "scale_up": KeyAction("plus", _BOTH),
    "scale_down": KeyAction("minus", _BOTH),
    "logs": KeyAction("l", _BOTH),
    "history": KeyAction("h", _BOTH),
    "pause": KeyAction("p", _BOTH),
    "gpu_clear": KeyAction("g", _BOTH),
    "reload": KeyAction("ctrl+r", _BOTH),
    "reset_overrides": KeyAction("ctrl+o", _BOTH),
    "stale": KeyAction("x", _BOTH),
    "image_pull": KeyAction("i", _BOTH),
    "open_host": KeyAction("enter", (FLEET,)),
    "reconnect": KeyAction("c", (FLEET, HOST)),
    "fleet_back": KeyAction("q,escape", (HOST,)),
}

#: Keys the console keeps for itself on every screen, and what they do there.
RESERVED: Mapping[str, str] = {
    "escape": "goes back and closes dialogs",
    "enter": "opens and confirms",
    "tab": "moves the focus",
    "shift+tab": "moves the focus",
    **dict.fromkeys(("up", "down", "left", "right"), "moves in tables and lists"),
    **dict.fromkeys(("pageup", "pagedown", "home", "end"), "moves in tables and lists"),
    "ctrl+c": "copies the selection",
    "ctrl+q": "quits at once",
    "ctrl+p": "opens the command palette",
}

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
_NAME = re.compile(r"[a-z0-9_]+")
_REPLACED = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}


def key_name(key: str) -> str:
    """A key as Textual names it: one character by its Unicode name (``?`` → ``question_mark``)."""
    key = key.strip()
    if len(key) != 1 or key.isalnum():
        return key
    try:
        name = unicodedata.name(key).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        return key
    return _REPLACED.get(name, name)


def _checked_key(text: str, where: str) -> str:
    """One key of a binding, named as Textual names it; ConfigError when it cannot be one."""
    *mods, last = text.split("+") if len(text) > 1 else [text]
    for mod in mods:
        if mod not in MODIFIERS:
            listed = "+, ".join(MODIFIERS) + "+"
            problem = (
                f'has the key "{text}": "{mod}" is not a modifier; {suggest(mod, MODIFIERS)}'
                f"modifiers are {listed}"
            )
            raise ConfigError(problem, key=where, allowed=MODIFIERS)
    if not last or (len(last) > 1 and not _NAME.fullmatch(last)):
        problem = (
            f'has the key "{text}", which is no key name: one character ("x", "?") or a '
            'lowercase name ("f5", "space", "question_mark"), modifiers first ("ctrl+d")'
        )
        raise ConfigError(problem, key=where)
    return "+".join([*mods, key_name(last)])


def _keys_of(action: str, value: object) -> tuple[str, ...]:
    """The keys ``value`` binds ``action`` to (ConfigError naming ``keys.ACTION``)."""
    where = f"keys.{action}"
    if not isinstance(value, str):
        problem = f'must be key names in quotes, such as "x" or "ctrl+d,f5", got {show(value)}'
        raise ConfigError(problem, key=where)
    parts = [part.strip() for part in value.split(",")]
    if not any(parts):
        raise ConfigError(
            'leaves the action without a key; give one or more, e.g. "x" or "ctrl+d,f5" '
            "(or delete the line to keep its default)",
            key=where,
        )
    keys = [_checked_key(part, where) for part in parts if part]
    own = {key_name(k) for k in ACTIONS[action].default.split(",")}
    for key in keys:
        if key in RESERVED and key not in own:
            problem = (
                f'binds "{key}", which the console keeps: it {RESERVED[key]}; choose another key'
            )
            raise ConfigError(problem, key=where)
    return tuple(dict.fromkeys(keys))


def check_keys_table(table: Mapping[str, Any]) -> tuple[dict[str, str], list[ConfigError]]:
    """The ``[keys]`` table checked (see the module): its bindings, and every problem."""
    errors: list[ConfigError] = []
    bound: dict[str, tuple[str, ...]] = {}
    for action, value in table.items():
        if action not in ACTIONS:
            listed = ", ".join(ACTIONS)
            problem = (
                f"is not an action of the console; {suggest(action, ACTIONS)}actions: {listed}"
            )
            errors.append(ConfigError(problem, key=f"keys.{action}", allowed=tuple(ACTIONS)))
            continue
        try:
            bound[action] = _keys_of(action, value)
        except ConfigError as exc:
            errors.append(exc)
    errors.extend(_clashes(bound))
    return {action: table[action].strip() for action in bound}, errors


def _clashes(bound: Mapping[str, tuple[str, ...]]) -> list[ConfigError]:
    """A key of the file's that another action has on the same screen (one would never fire).

    Keys two actions share by default (``q``: quit, and back on a host's dashboard) are the
    console's own design, not a clash.
    """
    default = {
        action: tuple(key_name(k) for k in spec.default.split(","))
        for action, spec in ACTIONS.items()
    }
    keymap = {action: bound.get(action) or default[action] for action in ACTIONS}
    errors = []
    for action, keys in bound.items():
        for key in keys:
            for other, spec in ACTIONS.items():
                if other == action or key not in keymap[other]:
                    continue
                if key in default[action] and key in default[other]:
                    continue
                shared = [s for s in ACTIONS[action].screens if s in spec.screens]
                if not shared or (other in bound and other < action):
                    continue  # another screen; or this pair is said from the other side
                problem = (
                    f'binds "{key}", which is also {other}\'s key (on the '
                    f"{' and the '.join(shared)}): one of them would never fire; give one "
                    "of them another key"
                )
                errors.append(ConfigError(problem, key=f"keys.{action}"))
    return errors
