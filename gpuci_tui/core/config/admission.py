"""Reading ``agents.gpu_admission`` and ``agents.gpu_hold_down`` from ``config.toml``.

The rule itself (`GpuAdmission`, its verdict and a slot's gate) is the engine's
(`engine.gpu_admission`); this module only turns the file's values into it, with
a `ConfigError` that names the key, the problem and what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.observe import number_in
from gpuci_tui.core.engine.gpu_admission import EXCLUSIVE, LIMITS, OFF, GpuAdmission

_KEY = "agents.gpu_admission"
_LIMIT_KEYS = ("foreign_memory_max", "foreign_util_max")
_EXAMPLE = '"exclusive", "off" or { foreign_memory_max = "8GiB", foreign_util_max = 20 }'
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B)", re.IGNORECASE)
_MIB_PER = {
    "kib": 1 / 1024,
    "mib": 1.0,
    "gib": 1024.0,
    "tib": 1024.0 * 1024,
    "kb": 1e3 / 2**20,
    "mb": 1e6 / 2**20,
    "gb": 1e9 / 2**20,
    "tb": 1e12 / 2**20,
}
HOLD_DOWN_RANGE = (0.0, 3600.0)


def parse_size_mib(value: object, key: str) -> tuple[float, str]:
    """A size such as ``"8GiB"`` or ``"512MiB"`` in MiB, and its text.

    Raises:
        ConfigError: not a size with a unit (KiB, MiB, GiB, TiB or KB, MB, GB, TB).
    """
    text = value.strip() if isinstance(value, str) else ""
    match = _SIZE.fullmatch(text)
    if not match:
        raise ConfigError(
            f'must be a size with a unit in quotes, like "8GiB" or "512MiB" (units KiB, MiB, '
            f"GiB, TiB, KB, MB, GB, TB), got {show(value)}",
            key=key,
        )
    return float(match[1]) * _MIB_PER[match[2].lower()], text


def parse_admission(value: object) -> GpuAdmission:
    """Check an ``agents.gpu_admission`` value (see the module docstring).

    Raises:
        ConfigError: with the key, the problem and what is allowed.
    """
    if isinstance(value, str):
        if value.strip() in (EXCLUSIVE, OFF):
            return GpuAdmission(value.strip())
        raise ConfigError(
            f"must be {_EXAMPLE}, got {show(value)}", key=_KEY, allowed=(EXCLUSIVE, OFF)
        )
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be {_EXAMPLE}, got {show(value)}", key=_KEY)
    unknown = sorted(str(k) for k in value if k not in _LIMIT_KEYS)
    if unknown or not value:
        keys = "key" if len(unknown) == 1 else "keys"
        what = f"has unknown {keys} {', '.join(unknown)}" if unknown else "is an empty table"
        raise ConfigError(
            f"{what}; a limits table takes foreign_memory_max and/or foreign_util_max, "
            'e.g. { foreign_memory_max = "8GiB", foreign_util_max = 20 }',
            key=_KEY,
            allowed=_LIMIT_KEYS,
        )
    memory: float | None = None
    memory_text = ""
    if "foreign_memory_max" in value:
        memory, memory_text = parse_size_mib(
            value["foreign_memory_max"], f"{_KEY}.foreign_memory_max"
        )
    util: float | None = None
    if "foreign_util_max" in value:
        raw = value["foreign_util_max"]
        if not number_in(raw, 0, 100):
            raise ConfigError(
                f"must be a percentage from 0 to 100 (summed SM utilisation of the processes "
                f"that are not ours), got {show(raw)}",
                key=f"{_KEY}.foreign_util_max",
            )
        assert isinstance(raw, int | float)  # noqa: S101 - number_in said so
        util = float(raw)
    return GpuAdmission(LIMITS, memory, memory_text, util)


def validate_hold_down(value: object) -> float:
    """Check ``agents.gpu_hold_down``: seconds from 0 to 3600.

    Raises:
        ConfigError: with key ``agents.gpu_hold_down``.
    """
    low, high = HOLD_DOWN_RANGE
    if not number_in(value, low, high):
        raise ConfigError(
            f"must be a number of seconds from {low:g} to {high:g} (how long a GPU that "
            f"flaps must stay free before its slot takes jobs again), got {show(value)}",
            key="agents.gpu_hold_down",
        )
    assert isinstance(value, int | float)  # noqa: S101 - number_in said so
    return float(value)
