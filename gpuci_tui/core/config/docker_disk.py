"""``[docker]`` in ``config.toml``: the disk watermarks of Docker's data root.

``min_free``: below it, images that nothing needs are removed (off unless set: on a
shared host the engine holds other people's images too, so removing them is opted
into). ``hard_floor``: below it no pull starts (a pull that fills the disk breaks
every container start on the host). ``check_interval``: seconds between two reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.observe import number_in

DEFAULT_HARD_FLOOR = "2GiB"
CHECK_INTERVAL_RANGE = (1.0, 3600.0)
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
_EXAMPLE = 'a size in quotes like "20GiB", "50g" or "500MB"'


def size_bytes(text: str) -> int:
    """Bytes of a size such as ``"20g"``, ``"20GiB"`` (binary) or ``"20GB"`` (decimal).

    Docker's own short units (``k``, ``m``, ``g``, ``t``, as ``mem_limit``) and the
    ``*iB`` ones are binary; ``KB``, ``MB``, ``GB``, ``TB`` are decimal.

    Raises:
        ValueError: not such a size.
    """
    match = _SIZE.fullmatch(text.strip())
    if not match or (match[3] and not match[2]) or match[3].lower() == "i":
        raise ValueError(text)
    decimal = match[3].lower() == "b"
    return int(float(match[1]) * (1000 if decimal else 1024) ** _POWER[match[2].lower()])


@dataclass(frozen=True)
class DockerConfig:
    """``[docker]`` (optional)."""

    min_free: str | None = None
    """Below this much free space on Docker's data root, unused images are removed
    (least recently used first) and dangling build cache is pruned; None: never."""
    hard_floor: str = DEFAULT_HARD_FLOOR
    """Below this much free space no pull starts."""
    check_interval: float = 60.0
    """Seconds between two reads of the free space."""

    @property
    def min_free_bytes(self) -> int | None:
        """``min_free`` in bytes (None: no removal)."""
        return None if self.min_free is None else size_bytes(self.min_free)

    @property
    def hard_floor_bytes(self) -> int:
        """``hard_floor`` in bytes."""
        return size_bytes(self.hard_floor)


def validate_docker(field: str, value: object) -> object:
    """Check one ``[docker]`` value.

    Raises:
        ConfigError: with key ``docker.<field>``, the problem and what is allowed.
    """
    key = f"docker.{field}"
    if field == "check_interval":
        low, high = CHECK_INTERVAL_RANGE
        if not number_in(value, low, high):
            raise ConfigError(
                f"must be a number of seconds from {low:g} to {high:g}, got {show(value)}", key=key
            )
        assert isinstance(value, int | float)  # noqa: S101 - number_in said so
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"must be {_EXAMPLE}, got {show(value)}", key=key)
    try:
        size = size_bytes(value)
    except ValueError:
        raise ConfigError(
            f"must be {_EXAMPLE} (units k, m, g, t or KiB…TiB binary, KB…TB decimal), "
            f"got {show(value)}",
            key=key,
        ) from None
    if field == "min_free" and size <= 0:
        raise ConfigError(
            f"must be more than 0 (leave it out: never remove), got {show(value)}", key=key
        )
    return value.strip()


def check_docker_table(values: dict[str, object]) -> list[ConfigError]:
    """The rule between the two sizes: the hard floor must be below ``min_free``."""
    min_free = values.get("min_free")
    floor = values.get("hard_floor", DEFAULT_HARD_FLOOR)
    if not isinstance(min_free, str) or not isinstance(floor, str):
        return []
    if size_bytes(floor) >= size_bytes(min_free):
        return [
            ConfigError(
                f"must be below min_free ({min_free}): the hard floor stops pulls, min_free "
                f"starts removing images first, got {show(floor)}",
                key="docker.hard_floor",
            )
        ]
    return []
