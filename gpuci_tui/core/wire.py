"""The wire format of the supervisor's vocabulary: model dataclasses to JSON-ready dicts and back.

`to_dict()` / `*_from_dict()` are the only (de)serialisers of `gpuci_tui.core.models`;
the control socket, `status --json`, the fleet's ssh bridge and the history all use
them. They never raise on unknown keys (a newer daemon may add fields) and fill
absent ones with defaults; a value of the wrong shape is a `ValueError` naming the
field, so a bad command line gets an answer, not a traceback.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import StrEnum
from typing import Any, TypeVar, Union, get_args, get_origin

from gpuci_tui.core.command_types import COMMAND_TYPES, Command
from gpuci_tui.core.models import SupervisorSnapshot

_COMMAND_NAMES = {cls: name for name, cls in COMMAND_TYPES.items()}


def to_dict(value: Any) -> dict[str, Any]:
    """Turn a model dataclass into JSON-ready dicts/lists (commands get a ``type`` key)."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        raise TypeError(f"not a model dataclass: {value!r}")
    data: dict[str, Any] = _plain(value)
    name = _COMMAND_NAMES.get(type(value))
    if name is not None:
        data["type"] = name
    return data


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Build dataclass ``cls`` from ``data``, ignoring unknown keys.

    Raises:
        ValueError: a required field is missing or a value has the wrong shape.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name], f"{cls.__name__}.{f.name}")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from None


def _coerce(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        last_error: ValueError | None = None
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(option, value, where)
            except ValueError as exc:
                last_error = exc
        raise last_error or ValueError(f"{where}: bad value {value!r}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        item_hint = get_args(hint)[0]
        return tuple(_coerce(item_hint, item, where) for item in value)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        try:
            return hint(value)
        except ValueError:
            raise ValueError(f"{where}: unknown value {value!r}") from None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return from_dict(hint, value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is Any:
        return value
    if hint is int and isinstance(value, bool):  # bool is an int subclass: true is no count
        raise ValueError(f"{where}: expected a whole number, got {value!r}")
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ValueError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def command_from_dict(data: dict[str, Any]) -> Command:
    """Parse a command sent over the control socket.

    Raises:
        ValueError: unknown ``type`` or bad fields, with a message naming them.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    cls = COMMAND_TYPES.get(str(kind))
    if cls is None:
        known = ", ".join(sorted(COMMAND_TYPES))
        raise ValueError(f"unknown command type {kind!r}; expected one of: {known}")
    body = {key: value for key, value in data.items() if key != "type"}
    command: Command = from_dict(cls, body)
    return command


def snapshot_from_dict(data: dict[str, Any]) -> SupervisorSnapshot:
    """Parse a `SupervisorSnapshot` (as sent by a daemon)."""
    return from_dict(SupervisorSnapshot, data)
