"""Checking a PAT against an organisation and pool, with one reason code per outcome.

Used by the setup wizard and by the supervisor after a 401: `check_pat` never
raises for an expected failure; it returns a `PatCheck` whose ``reason`` tells
the caller what to offer (re-enter the PAT, fix the pool name, wait…) and
whose ``message`` can be shown as is.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpuci_tui.core.azure.errors import AzurePoolAmbiguousError
from gpuci_tui.core.azure.parse import as_mapping, opt_str
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureUnreachableError,
    GpuciError,
)
from gpuci_tui.core.protocols import PatCheck, Pool
from gpuci_tui.core.wording import plural

REASONS = (
    "ok",
    "bad_pat",
    "no_scope",
    "pool_not_found",
    "pool_ambiguous",
    "unreachable",
    "rate_limited",
    "error",
)
"""Every ``PatCheck.reason`` `check_pat` can return."""


class PoolDirectory(Protocol):
    """What `check_pat` needs from a client (`AzureDevOpsClient` has it)."""

    @property
    def org_url(self) -> str:
        """The organisation URL."""
        ...

    @property
    def org_name(self) -> str:
        """The organisation's name, for messages."""
        ...

    def connection_data(self) -> dict[str, Any]:
        """``GET _apis/connectionData``."""
        ...

    def list_pools(self, *, pool_type: str | None = "automation") -> list[Pool]:
        """The visible pools."""
        ...

    def resolve_pool(self, name: str) -> Pool:
        """The pool called ``name``."""
        ...

    def can_manage_pool(self, pool: Pool) -> bool:
        """Whether the PAT's user may manage ``pool``."""
        ...


def check_pat(api: PoolDirectory, pool_name: str | None, kind: str = "pat") -> PatCheck:
    """Check the PAT (connectionData), then pool access and the pool itself.

    Args:
        api: The client holding the PAT to check.
        pool_name: The pool to look for, or None to check pool access only.
        kind: The credential's kind: an Entra identity is worded as such, not as a PAT.

    Returns:
        A `PatCheck`; ``reason`` is one of `REASONS`.
    """
    try:
        data = api.connection_data()
    except AzureNotFoundError:
        return PatCheck(
            False,
            "error",
            f"{api.org_url} does not look like an Azure DevOps organisation (it has no "
            "connectionData). Check the URL: https://dev.azure.com/ORG.",
        )
    except GpuciError as exc:
        return PatCheck(False, reason_for(exc), str(exc))
    who = as_mapping(data.get("authenticatedUser")) or {}
    user = opt_str(who.get("providerDisplayName")) or opt_str(who.get("customDisplayName"))
    if kind != "pat":
        return _check_identity(api, pool_name, kind, user)
    someone = user or "the PAT's user"
    try:
        if pool_name is None:
            # connectionData proves the PAT, not its scope: reading pools does.
            count = len(api.list_pools())
            return PatCheck(
                True,
                "ok",
                f"The PAT works for {someone}, who can see {count} agent "
                f"pool{'' if count == 1 else 's'} in {api.org_name}.",
                user=user,
            )
        pool = api.resolve_pool(pool_name)
        manageable = api.can_manage_pool(pool)
    except GpuciError as exc:
        return _pool_failure(exc, user)
    if not manageable:
        return PatCheck(
            False,
            "no_scope",
            f"The PAT can see pool {pool.name!r} but may not manage its agents: the PAT lacks "
            f"the Agent Pools (read & manage) scope, or {someone} is not an Administrator of "
            "the pool (Organization settings → Agent pools → Security). Fix either, then store "
            "the PAT again with `gpuci-tui setup`.",
            user=user,
            pool=pool,
        )
    size = "" if pool.size is None else f", {pool.size} agent{'' if pool.size == 1 else 's'}"
    return PatCheck(
        True,
        "ok",
        f"The PAT works for {someone}; pool {pool.name!r} (id {pool.id}{size}) is there "
        "and can be managed.",
        user=user,
        pool=pool,
    )


def _check_identity(
    api: PoolDirectory, pool_name: str | None, kind: str, user: str | None
) -> PatCheck:
    """`check_pat`'s pool checks for a service principal or managed identity."""
    who = f"{kind.replace('-', ' ')} {user or ''}".strip()
    try:
        if pool_name is None:
            count = len(api.list_pools())
            return PatCheck(
                True, "ok", f"The {who} can see {plural(count, 'agent pool')}.", user=user
            )
        pool = api.resolve_pool(pool_name)
        manageable = api.can_manage_pool(pool)
    except GpuciError as exc:
        return _pool_failure(exc, user)
    if not manageable:
        return PatCheck(
            False,
            "no_scope",
            f"The {who} can see pool {pool.name!r} but is not its Administrator: add it in "
            "Organization settings → Agent pools → the pool → Security (role Administrator).",
            user=user,
            pool=pool,
        )
    return PatCheck(
        True,
        "ok",
        f"The {who} signed in; pool {pool.name!r} (id {pool.id}) is there and can be managed.",
        user=user,
        pool=pool,
    )


def _pool_failure(exc: GpuciError, user: str | None) -> PatCheck:
    """The failed `PatCheck` for an error raised while listing or resolving pools."""
    if isinstance(exc, AzurePoolAmbiguousError):  # before its base, AzureNotFoundError
        reason = "pool_ambiguous"
    elif isinstance(exc, AzureNotFoundError):
        reason = "pool_not_found"
    else:
        reason = reason_for(exc)
    return PatCheck(False, reason, str(exc), user=user)


def reason_for(exc: GpuciError) -> str:
    """The `PatCheck` reason code for an error raised while checking."""
    if isinstance(exc, AzureAuthError):
        return "bad_pat"
    if isinstance(exc, AzureScopeError):
        return "no_scope"
    if isinstance(exc, AzureUnreachableError):
        return "unreachable"
    if isinstance(exc, AzureRateLimitError):
        return "rate_limited"
    return "error"
