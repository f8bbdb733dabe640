"""The ``[fleet]`` table: which GPU hosts one console watches (or ``--host``), and their rules.

A host entry is what ``ssh`` takes, with the port folded in, ``[user@]host[:port]``,
or a table that adds a display label, the configuration the host's daemon was
started with, and where gpuci-tui is installed there::

    [fleet]
    hosts = [
        "ci@gpu2",
        "ci@gpu3:2222",
        { host = "ci@gpu4", label = "a100", config = "/etc/gpuci-tui/config.toml", command = "/opt/gpuci-tui/bin/gpuci-tui" },
    ]
    command = "gpuci-tui"           # gpuci-tui on the hosts (default: on their PATH)
    ssh_config = "~/.ssh/fleet"     # optional: ssh -F FILE instead of ~/.ssh/config
    connect_timeout = 10            # seconds ssh may take to connect

One entry's value and rules are in `config.fleet_host`; this module has the
table, ``--host`` and the fleet console's reading of a file. The runtime side
(ssh links, the overview rows) is `core.fleet`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.file import ConfigError, raise_if_any, read_toml, show
from gpuci_tui.core.config.fleet_host import (
    FleetHost,
    validate_command,
    validate_host_entry,
    validate_path,
)
from gpuci_tui.core.config.keys import check_keys_table
from gpuci_tui.core.config.validate import check_keys

DEFAULT_COMMAND = "gpuci-tui"
DEFAULT_CONNECT_TIMEOUT = 10.0
MAX_HOSTS = 100
FLEET_KEYS = ("hosts", "command", "ssh_config", "connect_timeout")


@dataclass(frozen=True)
class FleetConfig:
    """``[fleet]``: the hosts and how to reach them."""

    hosts: tuple[FleetHost, ...] = ()
    """The hosts the console watches, in the overview's order (``--host`` replaces them)."""
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
            values["ssh_config"] = validate_path(
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
    raw_keys = tables.get("keys", {})
    if not isinstance(raw_keys, Mapping):
        errors.append(ConfigError(f"must be a table ([keys]), got {show(raw_keys)}", key="keys"))
        raw_keys = {}
    keys, key_errors = check_keys_table(raw_keys)
    errors += key_errors
    raise_if_any(errors, path)
    assert fleet is not None  # noqa: S101 - no errors means it was built
    return fleet, keys
