"""The observability sections of ``config.toml``: ``[gpu]`` (sampling) and ``[history]`` (retention).

Both are optional and their defaults suit most hosts. `config` registers them
like its other sections; the value rules live here, next to the dataclasses,
so that `config_validate` (the rules of the agent set itself) stays focused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuci_tui.core.config_file import ConfigError, show

SAMPLE_INTERVAL_RANGE = (0.1, 3600.0)
"""Seconds; below 0.1 s NVML sweeps start to cost real CPU on many-GPU hosts."""
KEEP_DAYS_RANGE = (1, 36500)
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


def validate_gpu(field: str, value: object) -> float:
    """Check one ``[gpu]`` value (``sample_interval``: seconds from 0.1 to 3600).

    Raises:
        ConfigError: with key ``gpu.<field>``.
    """
    low, high = SAMPLE_INTERVAL_RANGE
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ConfigError(
            f"must be a number of seconds from {low:g} to {high:g} (1.0 = one sample per "
            f"second), got {show(value)}",
            key=f"gpu.{field}",
        )
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
