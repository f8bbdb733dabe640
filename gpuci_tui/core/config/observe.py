"""The observability sections of ``config.toml``: ``[gpu]`` (sampling), ``[history]``
(retention) and ``[metrics]`` (the Prometheus endpoint of ``gpuci-tui run``).

All are optional and their defaults suit most hosts (metrics are off). `config` registers them
like its other sections; the value rules live here, next to the dataclasses,
so that `validate` (the rules of the agent set itself) stays focused.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuci_tui.core.config.file import ConfigError, is_ascii_number, show

SAMPLE_INTERVAL_RANGE = (0.1, 3600.0)
"""Seconds; below 0.1 s NVML sweeps start to cost real CPU on many-GPU hosts."""
KEEP_DAYS_RANGE = (1, 36500)
METRICS_EXAMPLE = "127.0.0.1:9464"
"""The address the messages and docs/metrics.md suggest (loopback: see `check_metrics_remote`)."""
MAX_ROWS_RANGE = (1000, 10_000_000)
"""A row is a few hundred bytes: 10 million rows is a few GB, the most worth keeping locally."""


@dataclass(frozen=True)
class GpuConfig:
    """``[gpu]`` (optional)."""

    sample_interval: float = 1.0
    """Seconds between two NVML samples used for per-job accounting (default: 1 Hz)."""


@dataclass(frozen=True)
class HistoryConfig:
    """``[history]`` (optional): how much of the local job history is kept."""

    keep_days: int = 90
    """Jobs that ended longer ago than this are deleted."""
    max_rows: int = 100_000
    """Only the newest this many jobs are kept."""


def number_in(value: object, low: float, high: float) -> bool:
    """Whether ``value`` is a finite number (not a bool) from ``low`` to ``high``."""
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and low <= value <= high
    )


def validate_gpu(field: str, value: object) -> float:
    """Check one ``[gpu]`` value (``sample_interval``: seconds from 0.1 to 3600).

    Raises:
        ConfigError: with key ``gpu.<field>``.
    """
    low, high = SAMPLE_INTERVAL_RANGE
    if not number_in(value, low, high):
        raise ConfigError(
            f"must be a number of seconds from {low:g} to {high:g} (1.0 = one sample per "
            f"second), got {show(value)}",
            key=f"gpu.{field}",
        )
    assert isinstance(value, int | float)  # noqa: S101 - number_in said so
    return float(value)


def validate_history(field: str, value: object) -> int:
    """Check one ``[history]`` value: ``keep_days`` (1–36500) or ``max_rows`` (1000–10000000).

    Raises:
        ConfigError: with key ``history.<field>``.
    """
    low, high = KEEP_DAYS_RANGE if field == "keep_days" else MAX_ROWS_RANGE
    unit = " of days" if field == "keep_days" else ""
    # bool is an int subclass in Python, but `keep_days = true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(
            f"must be a whole number{unit} from {low} to {high}, got {show(value)}",
            key=f"history.{field}",
        )
    return value


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]`` (optional): the Prometheus ``/metrics`` endpoint of ``gpuci-tui run``."""

    listen: str = ""
    """``HOST:PORT`` to serve on, e.g. ``127.0.0.1:9464``; empty (the default) serves nothing."""
    allow_remote: bool = False
    """Allow a non-loopback ``listen`` address. The endpoint has no authentication and
    names pools and pipelines' results, so exposing it is an explicit choice."""


def parse_listen(value: str) -> tuple[str, int]:
    """Split a ``[metrics] listen`` value into (IPv4 address, port); ``localhost`` is 127.0.0.1.

    Raises:
        ConfigError: with key ``metrics.listen`` and an example of a good value.
    """
    example = f'e.g. "{METRICS_EXAMPLE}"'
    if value.startswith("["):
        raise ConfigError(
            f"must be an IPv4 address and a port, {example}; IPv6 addresses are not supported, "
            f"got {show(value)}",
            key="metrics.listen",
        )
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(
            f"must be HOST:PORT, {example} (a port alone is not enough: say which address "
            f"to listen on), got {show(value)}",
            key="metrics.listen",
        )
    if not is_ascii_number(port_text) or not 1 <= int(port_text) <= 65535:
        raise ConfigError(
            f"must end with a port from 1 to 65535, {example}, got {show(value)}",
            key="metrics.listen",
        )
    # A host name could resolve to several addresses, some of them remote: only
    # literal addresses (and localhost) make "is this loopback?" a sure answer.
    address = "127.0.0.1" if host == "localhost" else host
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise ConfigError(
            f"must be an IPv4 address (or localhost) and a port, {example}, got {show(value)}",
            key="metrics.listen",
        ) from None
    return address, int(port_text)


def is_loopback(address: str) -> bool:
    """Whether the IPv4 ``address`` (as returned by `parse_listen`) is on this machine only."""
    return ipaddress.IPv4Address(address).is_loopback


def validate_metrics(field: str, value: object) -> str | bool:
    """Check one ``[metrics]`` value: ``listen`` (``HOST:PORT`` or empty) or ``allow_remote``.

    Raises:
        ConfigError: with key ``metrics.<field>``.
    """
    if field == "allow_remote":
        if not isinstance(value, bool):
            raise ConfigError(
                f"must be true or false, got {show(value)}", key="metrics.allow_remote"
            )
        return value
    if not isinstance(value, str):
        raise ConfigError(
            f'must be a string like "{METRICS_EXAMPLE}" (or "" for no metrics), got {show(value)}',
            key="metrics.listen",
        )
    if value.strip():
        parse_listen(value.strip())
    return value.strip()


def check_metrics_remote(
    table: Mapping[str, object], valid: Mapping[str, Any]
) -> list[ConfigError]:
    """The rule between the two ``[metrics]`` values: a remote address must be allowed.

    Args:
        table: The ``[metrics]`` table as written.
        valid: Its values that passed `validate_metrics` (a wrong one is already reported).
    """
    if any(name in table and name not in valid for name in ("listen", "allow_remote")):
        return []
    listen, allow_remote = valid.get("listen", ""), valid.get("allow_remote", False)
    if not listen or allow_remote:
        return []
    address, port = parse_listen(listen)
    if is_loopback(address):
        return []
    return [
        ConfigError(
            f"is {show(listen)}, which other machines can reach, and /metrics has no "
            f'authentication; use "127.0.0.1:{port}" (with a reverse proxy or an ssh tunnel '
            "for remote scrapes), or add allow_remote = true to [metrics] if that is intended",
            key="metrics.listen",
        )
    ]
