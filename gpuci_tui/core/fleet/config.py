"""The fleet: which GPU hosts one console watches (``[fleet]`` or ``--host``), and their rules.

A host entry is what ``ssh`` takes, with the port folded in, ``[user@]host[:port]``,
or a table that adds a display label, the configuration the host's daemon was
started with, and where gpuci-tui is installed there::

    [fleet]
    hosts = [
        "ci@gpu2",
        "ci@gpu3:2222",
        { host = "ci@gpu4", label = "a100", config = "/etc/gpuci-tui/config.toml",
          command = "/opt/gpuci-tui/bin/gpuci-tui" },
    ]
    command = "gpuci-tui"           # gpuci-tui on the hosts (default: on their PATH)
    ssh_config = "~/.ssh/fleet"     # optional: ssh -F FILE instead of ~/.ssh/config
    connect_timeout = 10            # seconds ssh may take to connect

The rules follow `core.config.validate`: every problem names its dotted key, says
what is wrong, shows what was given and what to write instead. ``host`` is
checked strictly because it ends up on ssh's command line: it can never be
read as an ssh option.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.file import ConfigError, is_ascii_number, raise_if_any, read_toml, show
from gpuci_tui.core.config.validate import as_text, check_keys, validate_key_binding

DEFAULT_COMMAND = "gpuci-tui"
DEFAULT_CONNECT_TIMEOUT = 10.0
MAX_HOSTS = 100
LABEL_MAX = 24
FLEET_KEYS = ("hosts", "command", "ssh_config", "connect_timeout")
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
    """The name shown in the console; None: derived (see `FleetConfig.labels`)."""
    config: str | None = None
    """The configuration file of the daemon on that host (``bridge --config``);
    None: that host's default (``$GPUCI_CONFIG`` or ``~/.config/gpuci-tui/config.toml``)."""
    command: str | None = None
    """gpuci-tui on that host; None: `FleetConfig.command`."""

    def to_entry(self) -> str | dict[str, str]:
        """The entry as written in ``[fleet] hosts``: a string unless a table is needed."""
        extra = {"label": self.label, "config": self.config, "command": self.command}
        table = {key: value for key, value in extra.items() if value is not None}
        return {"host": self.target, **table} if table else self.target


@dataclass(frozen=True)
class FleetConfig:
    """``[fleet]``: the hosts and how to reach them."""

    hosts: tuple[FleetHost, ...] = ()
    command: str = DEFAULT_COMMAND
    """gpuci-tui on the hosts, unless an entry names its own."""
    ssh_config: str | None = None
    """An ssh configuration file used instead of ``~/.ssh/config`` (``ssh -F``)."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds ssh may take to connect (``ConnectTimeout``)."""

    def labels(self) -> tuple[str, ...]:
        """The display name of every host, unique, in entry order.

        An entry's own label wins; otherwise the host name, or the whole target
        when two entries share a host name (e.g. two ports of one machine).
        """
        names = [host.label or host.hostname for host in self.hosts]
        taken = Counter(names)
        labels = []
        for host, name in zip(self.hosts, names, strict=True):
            if host.label is None and taken[name] > 1:
                name = host.target.split("@")[-1]
            labels.append(name)
        seen: Counter[str] = Counter()
        unique = []
        for name in labels:  # the same target twice with different configs
            seen[name] += 1
            unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
        return tuple(unique)

    def command_of(self, host: FleetHost) -> str:
        """The gpuci-tui program to run on ``host``."""
        return host.command or self.command

    def to_table(self) -> dict[str, Any]:
        """The ``[fleet]`` table as `config_to_toml` writes it (defaults left out)."""
        table: dict[str, Any] = {}
        if self.hosts:
            table["hosts"] = [host.to_entry() for host in self.hosts]
        if self.command != DEFAULT_COMMAND:
            table["command"] = self.command
        if self.ssh_config is not None:
            table["ssh_config"] = self.ssh_config
        if self.connect_timeout != DEFAULT_CONNECT_TIMEOUT:
            table["connect_timeout"] = self.connect_timeout
        return table


# --------------------------------------------------------------------------- one entry


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


def _path(value: object, key: str, where: str = " on that host", example: str = "") -> str:
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
    checks = {"label": validate_label, "config": _path, "command": validate_command}
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


# --------------------------------------------------------------------------- the table


def check_fleet_table(table: object) -> tuple[FleetConfig | None, list[ConfigError]]:
    """Every problem of a ``[fleet]`` table; the configuration when there is none."""
    if not isinstance(table, Mapping):
        return None, [ConfigError(f"must be a table ([fleet]), got {show(table)}", key="fleet")]
    errors = check_keys(table, "fleet", FLEET_KEYS)
    values: dict[str, Any] = {}
    if "command" in table:
        try:
            values["command"] = validate_command(table["command"], "fleet.command")
        except ConfigError as exc:
            errors.append(exc)
    if "ssh_config" in table:
        try:
            values["ssh_config"] = _path(
                table["ssh_config"], "fleet.ssh_config", "", "~/.ssh/fleet"
            )
        except ConfigError as exc:
            errors.append(exc)
    if "connect_timeout" in table:
        try:
            values["connect_timeout"] = _timeout(table["connect_timeout"])
        except ConfigError as exc:
            errors.append(exc)
    hosts = table.get("hosts", [])
    if not isinstance(hosts, list | tuple):
        problem = f'must be a list such as ["ci@gpu2", "ci@gpu3:2222"], got {show(hosts)}'
        errors.append(ConfigError(problem, key="fleet.hosts"))
        hosts = []
    values["hosts"] = tuple(_hosts(hosts, "fleet.hosts", errors))
    if errors:
        return None, errors
    return FleetConfig(**values), []


def _hosts(raw: Sequence[object], key: str, errors: list[ConfigError]) -> list[FleetHost]:
    if len(raw) > MAX_HOSTS:
        errors.append(ConfigError(f"lists {len(raw)} hosts; at most {MAX_HOSTS}", key=key))
        return []
    accepted: list[tuple[int, FleetHost]] = []

    def place(i: int) -> str:
        return key if key == "--host" else f"{key}[{i}]"

    for i, item in enumerate(raw):
        at = place(i)
        try:
            host = validate_host_entry(item, at)
        except ConfigError as exc:
            errors.extend(exc.errors)
            continue
        for j, other in accepted:
            if (other.target, other.config) == (host.target, host.config):
                problem = f"repeats {host.target} (given before); drop one"
                errors.append(ConfigError(problem, key=at))
                break
            if host.label is not None and host.label == other.label:
                problem = f"{show(host.label)} is the label of {place(j)} too; labels are unique"
                errors.append(ConfigError(problem, key=f"{at}.label"))
                break
        else:
            accepted.append((i, host))
    return [host for _, host in accepted]


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 300:
        raise ConfigError(
            f"must be a number of seconds from 1 to 300, got {show(value)}",
            key="fleet.connect_timeout",
        )
    return float(value)


def parse_cli_hosts(values: Sequence[str]) -> tuple[FleetHost, ...]:
    """The hosts given with ``--host`` (each ``[user@]host[:port]``).

    Raises:
        ConfigError: naming ``--host`` (`ConfigErrors` when several are wrong).
    """
    errors: list[ConfigError] = []
    hosts = _hosts(list(values), "--host", errors)
    raise_if_any(errors)
    return tuple(hosts)


def load_fleet(path: Path) -> tuple[FleetConfig, dict[str, str]]:
    """Read only ``[fleet]`` and ``[keys]`` of a configuration file (for the fleet console).

    A workstation that watches other hosts may have a file with nothing else;
    ``[azure]`` and ``[agents]`` are the daemon's business and are not read here.

    Returns:
        The fleet (no hosts when the file has no ``[fleet]``) and the key bindings.

    Raises:
        ConfigError: the file cannot be read or parsed, or those two sections are wrong.
    """
    tables = read_toml(path)
    errors: list[ConfigError] = []
    fleet, problems = check_fleet_table(tables.get("fleet", {}))
    errors += problems
    keys: dict[str, str] = {}
    raw_keys = tables.get("keys", {})
    if not isinstance(raw_keys, Mapping):
        errors.append(ConfigError(f"must be a table ([keys]), got {show(raw_keys)}", key="keys"))
        raw_keys = {}
    for binding, value in raw_keys.items():
        try:
            keys[binding] = validate_key_binding(binding, value)
        except ConfigError as exc:
            errors.append(exc)
    raise_if_any(errors, path)
    assert fleet is not None  # noqa: S101 - no errors means it was built
    return fleet, keys
