"""Keeping a long-running daemon's resident memory flat (glibc's allocator, where present).

What the daemon's Python objects hold per job is bounded (deques, capped caches,
pruned records; see bench/bench_soak.py). What remained was the C allocator:
glibc gives each thread that allocates its own arena (up to 8 per core), and
memory freed in one arena is not returned to the system while a live block sits
above it, so the worker threads that parse Docker's and Azure DevOps' answers
leave resident memory creeping up by a few KiB per job. Two arenas suffice for a
process whose work is mostly waiting, and a periodic collection followed by
``malloc_trim`` hands the free pages back. Elsewhere (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import logging

log = logging.getLogger("gpuci_tui.memory")

_M_ARENA_MAX = -8
#: Seconds between two trims of the allocator's free memory.
TRIM_INTERVAL = 30.0


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_arenas(count: int = 2) -> bool:
    """Cap glibc's malloc arenas (call before threads start); False where not glibc."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(_M_ARENA_MAX, count) == 1)


def trim() -> bool:
    """Return the allocator's free memory to the system now; False where not glibc."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


async def trim_now_and_then(interval: float | None = None) -> None:
    """Trim every ``interval`` seconds (default `TRIM_INTERVAL`) until cancelled."""
    if _libc() is None:
        return
    while True:
        await asyncio.sleep(interval or TRIM_INTERVAL)
        # Cyclic garbage first (a few ms for this heap), so its memory is free to return.
        gc.collect()
        trim()
