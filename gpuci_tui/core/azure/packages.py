"""Agent packages (``GET _apis/distributedtask/packages/agent``, azure-devops-api.md §2.9).

The organisation lists the agent packages it offers, newest first, each with its
download URL and the tarball's SHA-256 (``hashValue``). gpuci-tui reads it to show
the current agent version and to fetch that package once for its agent cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuci_tui.core.azure.parse import MalformedError, as_mapping, opt_int, opt_str
from gpuci_tui.core.packages import AgentPackage

PACKAGES = "_apis/distributedtask/packages/agent"


def parse_agent_package(obj: object) -> AgentPackage:
    """A ``PackageMetadata`` JSON object as an `AgentPackage`.

    Raises:
        MalformedError: No object, or no readable version.
    """
    pkg = as_mapping(obj)
    if pkg is None:
        raise MalformedError("agent package is not an object")
    version = _version(as_mapping(pkg.get("version")))
    if version is None:
        raise MalformedError("agent package without a version")
    return AgentPackage(
        version=version,
        platform=opt_str(pkg.get("platform")) or "",
        download_url=opt_str(pkg.get("downloadUrl")) or "",
        filename=opt_str(pkg.get("filename")) or "",
        hash_value=(opt_str(pkg.get("hashValue")) or "").strip().lower(),
    )


def newest_first(packages: list[AgentPackage]) -> list[AgentPackage]:
    """The packages sorted newest first (the service does so; do not rely on it)."""

    def key(p: AgentPackage) -> tuple[int, ...]:
        return tuple(int(x) for x in p.version.split("."))

    return sorted(packages, key=key, reverse=True)


def _version(v: Mapping[str, Any] | None) -> str | None:
    if v is None:
        return None
    parts = [opt_int(v.get(k)) for k in ("major", "minor", "patch")]
    if any(p is None or p < 0 for p in parts):
        return None
    return ".".join(str(p) for p in parts)
