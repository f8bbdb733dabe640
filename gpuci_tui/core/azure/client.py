"""Azure DevOps agent-pool client: the real `AgentPoolApi`.

`AzureDevOpsClient` knows the endpoints (pools, agents, job requests,
connectionData) and what their failures mean to an operator (a pool's agents and
job requests, and the reading of answers, are its base `PoolAgentCalls` in
`pool_agents.py`); the transport
underneath (`http.py`) handles auth, retries and rate limits, and
`parse.py` turns the JSON into the dataclasses of `core/protocols.py`.

All methods block (requests); the supervisor calls them via
`asyncio.to_thread`, and one client may be shared between threads.

Example:
    >>> client = AzureDevOpsClient("https://dev.azure.com/contoso", token_source)
    >>> pool = client.resolve_pool("gpu")
    >>> busy = [a for a in client.list_agents(pool.id) if a.assigned_request]
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import requests

from gpuci_tui import __version__
from gpuci_tui.core.azure.errors import AzurePoolAmbiguousError, no_pool_message
from gpuci_tui.core.azure.http import AzureTransport, TokenProvider
from gpuci_tui.core.azure.packages import PACKAGES, newest_first, parse_agent_package
from gpuci_tui.core.azure.parse import RateLimitState, as_mapping, opt_str, parse_pool
from gpuci_tui.core.azure.pool_agents import LOG, POOLS, PoolAgentCalls
from gpuci_tui.core.azure.usage import HttpAttempt
from gpuci_tui.core.azure.validate import check_pat
from gpuci_tui.core.errors import AzureAuthError, AzureError, AzureNotFoundError
from gpuci_tui.core.host_readings import AzureUsage
from gpuci_tui.core.packages import AgentPackage
from gpuci_tui.core.protocols import PatCheck, Pool
from gpuci_tui.core.secrets.credentials import Credential

__all__ = ["AzureDevOpsClient", "AzurePoolAmbiguousError", "RateLimitState"]


class AzureDevOpsClient(PoolAgentCalls):
    """Talks to one Azure DevOps organisation with one PAT; thread-safe.

    Args:
        org_url: e.g. ``https://dev.azure.com/contoso`` (``http://`` only for loopback).
        token: A `Credential` (service principal, managed identity, PAT), or the PAT,
            or a callable returning it (re-read before every request,
            so a PAT replaced in the keyring is used at once).
        timeout: Seconds for connecting and for each read, on every call.
        max_retries: Extra attempts after a 5xx, a short 429 or a dropped connection
            (none after a 5xx or a dropped connection while the organisation is known
            down: `organisation_down`).
        session: A `requests.Session` to use instead of a new one.
        api_version: Sent in the ``Accept`` header of every request.
        user_agent: ``User-Agent``; defaults to ``gpuci-tui/<version>``.
        clock: Wall-clock time source (epoch seconds), injectable for tests.
        sleep: Used for backoff waits, injectable for tests (None: real time).
        jitter: Returns a float in [0, 1) that spreads retries out.
        max_requests_per_minute: ``[azure] max_requests_per_minute``: this client's cap
            on its attempts (None: none); periodic reads give way first (`budget`).

    Raises:
        AzureError: The URL is malformed or would send the PAT in clear text.
    """

    def __init__(
        self,
        org_url: str,
        token: TokenProvider | Credential,
        *,
        timeout: float = 15.0,
        max_retries: int = 4,
        session: requests.Session | None = None,
        api_version: str = "7.1",
        user_agent: str | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        jitter: Callable[[], float] = random.random,
        max_requests_per_minute: int | None = None,
    ) -> None:
        self._http = AzureTransport(
            org_url,
            token,
            timeout=timeout,
            max_retries=max_retries,
            session=session,
            api_version=api_version,
            user_agent=user_agent or f"gpuci-tui/{__version__}",
            clock=clock,
            sleep=sleep,
            jitter=jitter,
            max_requests_per_minute=max_requests_per_minute,
        )
        # connectionData only exists as a preview resource; a released version
        # without "-preview" is refused by the service.
        self._preview_version = api_version if "-" in api_version else f"{api_version}-preview.1"

    def __repr__(self) -> str:
        return f"AzureDevOpsClient(org_url={self.org_url!r}, requests={self.request_count})"

    def __enter__(self) -> AzureDevOpsClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def observe_requests(self, observer: Callable[[HttpAttempt], None] | None) -> None:
        """Tell ``observer`` every attempt (its route, status, bytes), e.g. metrics."""
        self._http.observer = observer

    def usage(self) -> AzureUsage:
        """What this client's calls cost: the last minute, the cap, the service's budget."""
        return self._http.usage()

    def set_request_cap(self, cap: int | None) -> None:
        """Apply a new ``[azure] max_requests_per_minute`` at once (None: no cap)."""
        self._http.set_request_cap(cap)

    def close(self) -> None:
        """Release the HTTP connections (only those of a session made here)."""
        self._http.close()

    # ------------------------------------------------------------------ figures

    @property
    def credential(self) -> Credential:
        """What this client signs in with (the header and ``status`` describe it)."""
        return self._http.credential

    @property
    def organisation_down(self) -> bool:
        """The organisation is known down: each call makes one attempt meanwhile (`outage`)."""
        return self._http.outage.down

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far, retries included (callers derive per-minute rates)."""
        return self._http.request_count

    @property
    def rate_limit_state(self) -> RateLimitState:
        """What the service last said about the rate limit; check ``throttled(now)``."""
        return self._http.rate_limit_state

    # ------------------------------------------------------------------ identity

    def connection_data(self) -> dict[str, Any]:
        """``GET _apis/connectionData``: proves the PAT is valid (not its scope).

        Raises:
            AzureAuthError: The PAT was rejected.
            AzureError: See `AzureTransport.request`.
        """
        answer = self._http.request(
            "GET",
            "_apis/connectionData",
            api_version=self._preview_version,
            confirms_identity=True,
        )
        data = as_mapping(answer.body)
        if data is None:
            raise AzureError(self._unreadable("connectionData", "not a JSON object"))
        user = as_mapping(data.get("authenticatedUser")) or {}
        if (opt_str(user.get("descriptor")) or "").startswith("System:PublicAccess"):
            # A public organisation answers anonymously instead of refusing the PAT.
            self._http.forget_identity()
            raise AzureAuthError(
                "The organisation ignored the PAT and answered anonymously: the PAT is wrong, "
                "expired or revoked. Create a new one with the Agent Pools (read & manage) "
                "scope and store it with `gpuci-tui setup`."
            )
        return dict(data)

    # ------------------------------------------------------------------ pools

    def list_pools(self, *, pool_type: str | None = "automation") -> list[Pool]:
        """The agent pools the PAT's user can see, with their sizes.

        Args:
            pool_type: ``automation`` (pipeline agents), ``deployment``, or None for all.
        """
        params = {"poolType": pool_type} if pool_type else None
        answer = self._http.request("GET", POOLS, params=params, pool_endpoint=True)
        return self._items(answer, parse_pool, "pool")

    def get_pool(self, pool_id: int) -> Pool:
        """One pool by id.

        Raises:
            AzureNotFoundError: There is no such pool (any more).
        """
        try:
            answer = self._http.request("GET", f"{POOLS}/{int(pool_id)}", pool_endpoint=True)
        except AzureNotFoundError:
            raise self._pool_gone(pool_id) from None
        return self._one(answer, parse_pool, "pool")

    def resolve_pool(self, name: str) -> Pool:
        """The pool called ``name`` (exact match preferred, then case-insensitive).

        Raises:
            AzureNotFoundError: No such pool; the message lists the visible ones.
            AzurePoolAmbiguousError: Several pools answer to the name.
        """
        wanted = name.strip()
        if not wanted:
            raise AzureNotFoundError("The agent pool name is empty. Set it in the configuration.")
        answer = self._http.request("GET", POOLS, params={"poolName": wanted}, pool_endpoint=True)
        pools = self._items(answer, parse_pool, "pool")
        matches = [p for p in pools if p.name == wanted] or [
            p for p in pools if p.name.casefold() == wanted.casefold()
        ]
        if len(matches) == 1:
            return matches[0]
        if matches:
            ids = ", ".join(str(p.id) for p in matches)
            raise AzurePoolAmbiguousError(
                f"{len(matches)} agent pools in {self.org_name} are named {wanted!r} "
                f"(ids {ids}). Rename all but one in Organization settings → Agent pools.",
                tuple(matches),
            )
        raise AzureNotFoundError(self._no_pool_message(wanted))

    def _no_pool_message(self, name: str) -> str:
        try:
            visible: list[str] | None = [p.name for p in self.list_pools(pool_type=None)]
        except AzureError as exc:  # the list is a courtesy; the main error stands
            LOG.debug("Could not list the pools for the not-found message: %s", exc)
            visible = None
        return no_pool_message(name, self.org_name, visible)

    def agent_packages(self, platform: str) -> list[AgentPackage]:
        """The agent packages the organisation offers for ``platform``, newest first (§2.9)."""
        answer = self._http.request("GET", PACKAGES, params={"platform": platform})
        return newest_first(self._items(answer, parse_agent_package, "agent package"))

    # ------------------------------------------------------------------ validation

    def validate_pat(self, pool_name: str | None) -> PatCheck:
        """Check the PAT (and the pool) and say what is wrong; never raises for that.

        Reasons: ``ok``, ``bad_pat``, ``no_scope``, ``pool_not_found``,
        ``pool_ambiguous``, ``unreachable``, ``rate_limited``, ``error``
        (see `azure_validate.check_pat`).

        Args:
            pool_name: The pool to look for, or None to check pool access only.
        """
        return check_pat(self, pool_name, self._http.credential.kind)

    def can_manage_pool(self, pool: Pool) -> bool:
        """Whether the PAT's user may manage ``pool`` (register, disable, delete agents).

        Asks for the pool with ``actionFilter=manage``, which only returns pools
        the caller administers.
        """
        answer = self._http.request(
            "GET",
            POOLS,
            params={"poolName": pool.name, "actionFilter": "manage"},
            pool_endpoint=True,
        )
        return any(p.id == pool.id for p in self._items(answer, parse_pool, "pool"))
