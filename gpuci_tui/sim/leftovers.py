"""Registrations from the past for the demo: what ``agents prune`` and the stale view are for.

A real pool of a host that has run for a while holds offline registrations:
slots scaled away, a name prefix renamed, and other hosts' agents. The demo
seeds a few, dated days back (`Backdate` turns the organisation's clock back
while they are registered), so the stale view has something to show and the
rule can be seen keeping another host's.
"""

from __future__ import annotations

import time

from gpuci_tui.sim.names import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.sim.org import SimOrg

DAY = 86400.0
OTHER_HOST = "gpu-lab-7"
"""The host name of another host's registration (never ours)."""


class Backdate:
    """A wall clock that can be turned back while the past is seeded (0 after that)."""

    def __init__(self) -> None:
        """Real time until `offset` is set."""
        self.offset = 0.0

    def __call__(self) -> float:
        """``time.time()`` minus the offset."""
        return time.time() - self.offset


def seed_leftovers(
    org: SimOrg,
    clock: Backdate,
    pool: str,
    token: str,
    *,
    old_prefix: str,
    old_instance: str,
    host: str,
) -> list[str]:
    """Register, offline and days old: two of this host's earlier prefix, one of another host's.

    Args:
        org: The organisation (its clock must be ``clock``).
        clock: Turned back while registering, then reset.
        pool: The pool's name.
        token: A PAT with the manage scope.
        old_prefix: The earlier name prefix of this host.
        old_instance: The instance id that prefix had (its agents' marker).
        host: This host's marker.

    Returns:
        The names registered.
    """
    seeded = [
        (f"{old_prefix}-0", {MARKER_INSTANCE: old_instance, MARKER_HOST: host}, 3 * DAY),
        (f"{old_prefix}-1", {MARKER_INSTANCE: old_instance, MARKER_HOST: host}, 9 * DAY),
        (f"{OTHER_HOST}-0", {MARKER_INSTANCE: "5e1f0c2a9b7d", MARKER_HOST: OTHER_HOST}, 2 * DAY),
    ]
    try:
        for name, marker, ago in seeded:
            clock.offset = ago
            org.register(pool, name, token, name, capabilities=marker, open_session=False)
    finally:
        clock.offset = 0.0
    return [name for name, _, _ in seeded]
