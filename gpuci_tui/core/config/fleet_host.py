"""One host of the fleet: a ``[fleet] hosts`` entry (or ``--host``), its value and its rules.

An entry is what ``ssh`` takes, with the port folded in, ``[user@]host[:port]``,
or a table that adds a display label, the configuration the host's daemon was
started with, and where gpuci-tui is installed there (see `config.fleet`).

The rules follow `core.config.validate`: every problem names its dotted key, says
what is wrong, shows what was given and what to write instead. ``host`` is
checked strictly because it ends up on ssh's command line: it can never be
read as an ssh option.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuci_tui.core.config.file import ConfigError, is_ascii_number, raise_if_any, show
from gpuci_tui.core.config.validate import as_text, check_keys

LABEL_MAX = 24
HOST_KEYS = ("host", "label", "config", "command")
EXAMPLE = '"ci@gpu2" or "ci@gpu2:2222"'

_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_PROGRAM = re.compile(r"[A-Za-z0-9_.+~/-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCOPE_ID = re.compile(r"[A-Za-z0-9_.-]{1,15}")
"""An IPv6 zone is an interface name (IFNAMSIZ 16 with the NUL): nothing else goes to ssh."""


@dataclass(frozen=True)
class FleetHost:
    """One host of the fleet, as its entry says."""

    target: str
    """``[user@]host[:port]``, normalised (IPv6 addresses in brackets)."""
    hostname: str
    """The host name, alias or address (no brackets), as ssh gets it."""
    user: str | None = None
    port: int | None = None
    label: str | None = None
    """The name shown in the console; None: derived (see `config.fleet.FleetConfig.labels`)."""
    config: str | None = None
    """The configuration file of the daemon on that host (``bridge --config``);
    None: that host's default (``$GPUCI_CONFIG`` or ``~/.config/gpuci-tui/config.toml``)."""
    command: str | None = None
    """gpuci-tui on that host; None: `config.fleet.FleetConfig.command`."""

    def to_entry(self) -> str | dict[str, str]:
        """The entry as written in ``[fleet] hosts``: a string unless a table is needed."""
        extra = {"label": self.label, "config": self.config, "command": self.command}
        table = {key: value for key, value in extra.items() if value is not None}
        return {"host": self.target, **table} if table else self.target


def parse_target(value: object, key: str) -> FleetHost:
    """Check ``[user@]host[:port]`` and split it.

    Raises:
        ConfigError: with ``key``, saying what is wrong and how to write it.
    """
    raw = as_text(value, key, "[user@]host[:port]")
    if not raw:
        raise ConfigError(f"is empty; write [user@]host[:port], e.g. {EXAMPLE}", key=key)
    if any(c.isspace() for c in raw):
        raise ConfigError(
            f"must not contain spaces; write [user@]host[:port], e.g. {EXAMPLE}; got {show(raw)}",
            key=key,
        )
    if "://" in raw:
        raise ConfigError(
            f"must be [user@]host[:port] without a scheme, e.g. {EXAMPLE}; got {show(raw)}", key=key
        )
    if raw.startswith("-"):
        raise ConfigError(
            f"must not start with '-' (ssh would read it as an option); got {show(raw)}", key=key
        )
    if raw.count("@") > 1:
        raise ConfigError(f"has more than one '@'; write user@host, got {show(raw)}", key=key)
    user, at, rest = raw.rpartition("@")
    if at and not _USER.fullmatch(user):
        problem = "has an empty user name" if not user else f"has an invalid user name {show(user)}"
        raise ConfigError(f"{problem}; write user@host or leave the user out", key=key)
    hostname, port_text = _split_port(rest, raw, key)
    if not hostname:
        raise ConfigError(f"is missing the host name; e.g. {EXAMPLE}, got {show(raw)}", key=key)
    port = _port(port_text, raw, key)
    shown = f"[{hostname}]" if ":" in hostname else hostname
    target = (f"{user}@" if at else "") + shown + (f":{port}" if port is not None else "")
    return FleetHost(target=target, hostname=hostname, user=user or None, port=port)


def _split_port(rest: str, raw: str, key: str) -> tuple[str, str | None]:
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise ConfigError(f"has '[' without ']'; e.g. \"[::1]:22\", got {show(raw)}", key=key)
        address, tail = rest[1:close], rest[close + 1 :]
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise ConfigError(
                f"has {show(address)} in brackets, which is not an IPv6 address", key=key
            ) from None
        _, percent, scope = address.partition("%")
        if percent and not _SCOPE_ID.fullmatch(scope):
            raise ConfigError(
                f"has the IPv6 zone {show(scope)}: a network interface name (letters, digits, "
                f"'.', '-', '_', at most 15), e.g. \"[fe80::1%eth0]:22\"; got {show(raw)}",
                key=key,
            )
        if tail and not tail.startswith(":"):
            raise ConfigError(f"has text after ']'; write \"[::1]:22\", got {show(raw)}", key=key)
        return address, (tail[1:] if tail else None)
    if rest.count(":") > 1:
        raise ConfigError(
            f'has an IPv6 address without brackets; write e.g. "[::1]:22", got {show(raw)}',
            key=key,
        )
    hostname, colon, port_text = rest.partition(":")
    if hostname and not _HOSTNAME.fullmatch(hostname):
        raise ConfigError(
            "has an invalid host name (letters, digits, '.', '-' and '_'; a name from "
            f"~/.ssh/config works too), got {show(hostname)}",
            key=key,
        )
    return hostname, (port_text if colon else None)


def _port(text: str | None, raw: str, key: str) -> int | None:
    if text is None:
        return None
    if not is_ascii_number(text) or not 1 <= int(text) <= 65535:
        raise ConfigError(
            f"has an invalid port {show(text)} (a number from 1 to 65535); got {show(raw)}", key=key
        )
    return int(text)


def validate_path(value: object, key: str, where: str = " on that host", example: str = "") -> str:
    """Check a path on a host (or here, with ``where=""``): absolute, or starting with ``~/``."""
    text = as_text(value, key, "a path")
    if not text or _CONTROL.search(text) or not text.startswith(("/", "~/")):
        example = example or "/etc/gpuci-tui/config.toml"
        raise ConfigError(
            f'must be an absolute path{where}, or start with "~/" (e.g. "{example}"); '
            f"got {show(value)}",
            key=key,
        )
    return text


def validate_command(value: object, key: str) -> str:
    """Check the gpuci-tui program on a host: a name on its PATH, or an absolute or ``~/`` path."""
    text = as_text(value, key, "a program")
    bare = "/" not in text and not text.startswith("~")
    if not _PROGRAM.fullmatch(text) or not (bare or text.startswith(("/", "~/"))):
        raise ConfigError(
            'must be one program: a name on that host\'s PATH such as "gpuci-tui", or a path '
            'such as "/opt/gpuci-tui/bin/gpuci-tui" or "~/.local/bin/gpuci-tui" (no spaces or '
            f"arguments); got {show(value)}",
            key=key,
        )
    return text


def validate_label(value: object, key: str) -> str:
    """Check a host's display label: 1 to 24 printable characters."""
    text = as_text(value, key, "a short name")
    if not text or len(text) > LABEL_MAX or _CONTROL.search(text):
        raise ConfigError(
            f'must be a short name of 1 to {LABEL_MAX} printable characters, e.g. "gpu2"; '
            f"got {show(value)}",
            key=key,
        )
    return text


def validate_host_entry(value: object, key: str) -> FleetHost:
    """Check one entry of ``hosts``: a ``[user@]host[:port]`` string or a table with ``host``.

    Raises:
        ConfigError: one problem, or `ConfigErrors` for several fields of a table.
    """
    if not isinstance(value, Mapping):
        if not isinstance(value, str):
            raise ConfigError(
                f"must be [user@]host[:port] in quotes, e.g. {EXAMPLE}, or a table "
                f'{{ host = "ci@gpu2", label = "gpu2" }}; got {show(value)}',
                key=key,
            )
        return parse_target(value, key)
    errors = check_keys(value, key, HOST_KEYS)
    if "host" not in value:
        errors.append(ConfigError('is missing host; add host = "ci@gpu2"', key=key))
        raise_if_any(errors)
    fields: dict[str, Any] = {}
    checks = {"label": validate_label, "config": validate_path, "command": validate_command}
    host: FleetHost | None = None
    try:
        host = parse_target(value["host"], f"{key}.host")
    except ConfigError as exc:
        errors.append(exc)
    for name, check in checks.items():
        if name in value:
            try:
                fields[name] = check(value[name], f"{key}.{name}")
            except ConfigError as exc:
                errors.append(exc)
    raise_if_any(errors)
    assert host is not None  # noqa: S101 - no errors means it was parsed
    return replace(host, **fields)
