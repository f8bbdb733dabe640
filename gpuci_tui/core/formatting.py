"""Plain-text formatters shared by the CLI and the console (no Rich, no I/O).

One formatter per quantity, so ``gpuci-tui status`` and the dashboard never
disagree about how long an agent has been up.
"""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    """A compact duration that always keeps its unit: ``45s``, ``12m05s``, ``3h02m``, ``2d04h``.

    None, and a negative span (a clock that stepped back), are ``-``: a made-up
    ``0s`` would look like a fact. At most six characters, so a column of them
    never cuts a unit off.
    """
    if seconds is None or seconds < 0:
        return "-"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
