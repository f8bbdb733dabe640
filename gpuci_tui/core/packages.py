"""Agent packages: what the organisation offers and what the host mounts into agents.

Plain values of the base tier, shared by the Azure client (``packages/agent``),
the host's package cache and the container spec (issue 20: agent versions never
stop the pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class AgentPackage:
    """One agent package the organisation offers (``packages/agent``, §2.9)."""

    version: str
    """``major.minor.patch``."""
    platform: str
    download_url: str
    filename: str
    hash_value: str
    """SHA-256 of the tarball, lower-case hex (empty when the server named none)."""


@dataclass(frozen=True)
class AgentPackageMount:
    """A verified agent package on the host, to mount read-only into a new agent container."""

    host: str
    """The unpacked package directory (the host's agent cache)."""
    version: str


@runtime_checkable
class AgentPackagesApi(Protocol):
    """Reads the organisation's agent packages; the real client and the sim's API have it.

    Kept apart from `AgentPoolApi` so that a pool client (or a test double) without it
    still supervises: the daemon then just does not watch agent versions.
    """

    def agent_packages(self, platform: str) -> list[AgentPackage]:
        """The agent packages offered for ``platform`` (e.g. ``linux-x64``), newest first."""
        ...
