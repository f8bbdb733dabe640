"""Agent versions never stop the pool: watch them, cache the required package, mount it.

`AgentUpdates` reads the organisation's agent packages at start, then hourly and
whenever an agent leaves to update (exit 12, the engine's ``agent_updating``
event). It compares the newest version with the one each group's image bakes
(its ``io.gpuci.agent-version`` label) and, when an image is older, fetches that
package ONCE into the host's `AgentPackageCache` (verified against the hash the
organisation lists). `mount_for` then gives every NEW container of such an image
the cached package, read-only; start.sh prefers it to the baked agent. A forced
update so costs at most one container start per lane, never a parked slot.

It also says what differs, before it bites: an ``agent_version`` event and the
snapshot's warnings when an image is older than the organisation's agent or than
what queued jobs demand (``Agent.Version -gtVersion``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform as host_platform
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from gpuci_tui.core.engine.agent_versions import AGENT_VERSION_LABEL, is_newer, version_warnings
from gpuci_tui.core.engine.steps import PackageCached
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.host.images.agent_cache import AgentPackageCache, PackageError, PackageRefused
from gpuci_tui.core.host.reporter import Update
from gpuci_tui.core.models import AgentVersionsSnapshot, ImageAgentVersion, SupervisorEvent
from gpuci_tui.core.packages import AgentPackage, AgentPackageMount, AgentPackagesApi
from gpuci_tui.core.protocols import ImageConfig

LOG = logging.getLogger("gpuci_tui.agent_updates")

#: How often the organisation's packages are read when nothing happens (issue: "rarely").
INTERVAL = 3600.0
#: After a failed download (not a refusal), try again this soon.
RETRY = 60.0
#: The longest a lane's next start waits for the check (and download) an update exit
#: asked for: long enough for a real ~150 MB package, short enough not to stall a slot.
FETCH_WAIT = 120.0

Report = Callable[[str, str], None]


def agent_platform(machine: str | None = None) -> str:
    """The ``packages/agent`` platform of this host (``linux-x64``, ``linux-arm64``…)."""
    m = (machine or host_platform.machine()).lower()
    if m in ("x86_64", "amd64"):
        return "linux-x64"
    if m in ("aarch64", "arm64"):
        return "linux-arm64"
    return "linux-arm"


class AgentUpdates:
    """The organisation's agent version, the images' versions and the package cache.

    Args:
        api: Reads ``packages/agent``.
        cache: Where verified packages are kept.
        images: Group name -> the image it runs ("" for the implicit group).
        inspect: The runtime's ``image_config`` (labels), None when it has none.
        report: ``(kind, message)`` for operator events.
        interval: Seconds between reads when nothing happens.
        clock: Wall-clock time.
        platform: The packages' platform (default: this host's).
    """

    def __init__(
        self,
        api: AgentPackagesApi,
        cache: AgentPackageCache,
        images: Callable[[], Mapping[str, str]],
        inspect: Callable[[str], ImageConfig | None] | None,
        report: Report,
        *,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.time,
        platform: str | None = None,
    ) -> None:
        self.api = api
        self.cache = cache
        self.images = images
        self.inspect = inspect
        self.report = report
        self.interval = interval
        self.clock = clock
        self.platform = platform or agent_platform()
        self.demanded: Callable[[], str | None] = lambda: None
        """The highest version queued jobs demand (set by the assembly: the pool observers)."""
        self.reading = AgentVersionsSnapshot(cached=next(iter(cache.versions()), None))
        self._baked: dict[str, str | None] = {}
        self._refused: dict[str, str] = {}
        """Version -> the listed hash that was refused (not fetched again until it changes)."""
        self._wake = asyncio.Event()
        self._warned: tuple[str, ...] = ()
        self._exits: asyncio.Queue[Update] | None = None
        self._left: list[str] = []
        """Where agents left to update since the last check (said after it)."""
        self._pending: asyncio.Event | None = None
        """Set when the check an update exit asked for is done (None: none asked for)."""
        self.listeners: list[Callable[[], None]] = []
        """Called after every check (the groups tell their engines what `mount_for` gives)."""

    # ------------------------------------------------------------------ what the executor asks

    def mount_for(self, image: str) -> AgentPackageMount | None:
        """The cached package for a new container of ``image``, when it is newer than its agent.

        Called at every container start, in the event loop: it reads only what `check`
        and `prime` learnt (no Docker call). An image not inspected yet counts as older;
        start.sh compares with the agent the image really has and keeps the newer.
        """
        cached = self.reading.cached
        if cached is None or not is_newer(cached, self._baked.get(image)):
            return None
        path = self.cache.cached(cached)
        return AgentPackageMount(str(path), cached) if path is not None else None

    def cached_for(self, image: str) -> PackageCached:
        """What the engine of a group running ``image`` learns: the package `mount_for` gives.

        The engine replaces the containers without it before a job makes them leave to
        update (a forced update so costs one start per slot, not one per lane).
        """
        mount = self.mount_for(image)
        return PackageCached(self.clock(), mount.version if mount is not None else "")

    async def mount_for_start(self, image: str) -> AgentPackageMount | None:
        """`mount_for`, after the check (and download) an agent's update exit asked for.

        The exit was broadcast before the engine planned this start, so the event is
        already queued: it is handled here first, and the start waits (at most
        `FETCH_WAIT`) for the package instead of starting a container that would
        leave to update again.
        """
        self._drain()
        pending = self._pending
        if pending is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pending.wait(), FETCH_WAIT)
        return self.mount_for(image)

    async def follow(self, supervised: Supervised) -> None:
        """Handle the ``agent_updating`` events of ``supervised`` until cancelled."""
        self._exits = supervised.subscribe()
        try:
            while True:
                self._handle(await self._exits.get())
        finally:
            supervised.unsubscribe(self._exits)
            self._exits = None

    def _drain(self) -> None:
        while self._exits is not None and not self._exits.empty():
            self._handle(self._exits.get_nowait())

    def _handle(self, item: Update) -> None:
        if isinstance(item, SupervisorEvent) and item.kind == "agent_updating":
            self.left_to_update(item)

    async def prime(self) -> None:
        """Learn the images' agent versions (local, fast): before the first container starts."""
        images = dict(self.images())
        found = {i: await asyncio.to_thread(self._read_baked, i) for i in set(images.values())}
        self._baked = found

    def _read_baked(self, image: str) -> str | None:
        try:
            config = self.inspect(image) if self.inspect is not None else None
        except Exception:  # noqa: BLE001 - unknown is a fine answer; the supervisor goes on
            return None
        return (config.labels.get(AGENT_VERSION_LABEL) or None) if config is not None else None

    # ------------------------------------------------------------------ running

    def nudge(self) -> None:
        """Read the packages again now (an agent left to update)."""
        self._wake.set()

    def left_to_update(self, event: SupervisorEvent) -> None:
        """An ``agent_updating`` event: check (and fetch) now; said once the check is done."""
        where = f"slot {event.slot}" if event.slot is not None else event.agent or "a slot"
        self._left.append(f"{where} of group {event.group}" if event.group else where)
        if self._pending is None:
            self._pending = asyncio.Event()
        self.nudge()

    def _say_left(self) -> None:
        """What the agents that left get next, from the reading the check just made."""
        org, cached = self.reading.org_version, self.reading.cached
        to = f" to {org}" if org else ""
        if cached is not None and (org is None or not is_newer(org, cached)):
            then = f"the next container uses the cached package {cached}"
        else:
            why = f" ({self.reading.message})" if self.reading.message else ""
            then = f"no verified package is cached{why}: the next agent updates itself again"
        for where in self._left:
            # Its own kind: this part follows "agent_updating" and must not hear itself.
            self.report("agent_package", f"agent on {where} left to update{to}; {then}")
        self._left.clear()

    async def run(self) -> None:
        """Read at once, then every `interval` or when nudged, until cancelled."""
        while True:
            self._wake.clear()  # before the check: a nudge during it is not lost
            # Kept visible during the check: a start planned meanwhile waits for it too
            # (taken away here, that start would not wait, and its agent leave again).
            pending = self._pending
            delay = await self.check()
            for listener in list(self.listeners):
                listener()
            self._say_left()
            if pending is not None:
                pending.set()
                if self._pending is pending:
                    self._pending = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def check(self) -> float:
        """Read the packages and the images, fetch what is needed; seconds until the next read."""
        await self.prime()  # an image rebuilt under the same tag has a new label
        images = dict(self.images())
        baked = {g: self._baked.get(i) for g, i in images.items()}
        delay = self.interval
        message = self.reading.message
        try:
            packages = await asyncio.to_thread(self.api.agent_packages, self.platform)
        except Exception as exc:  # noqa: BLE001 - a failed read (or a test double without it)
            # must never stop the supervisor: the versions are shown as not known.
            LOG.warning("could not read the organisation's agent packages: %s", exc)
            packages, delay = [], RETRY
        newest = packages[0] if packages else None
        org = newest.version if newest else self.reading.org_version
        # Only for images that name their agent: an unlabelled (third-party) image is left alone.
        if newest is not None and any(v and is_newer(newest.version, v) for v in baked.values()):
            message, retry = await self._fetch(newest)
            delay = min(delay, retry)
        cached = next(iter(self.cache.versions()), None)
        demanded = self.demanded()
        self.reading = replace(
            self.reading,
            org_version=org,
            images=tuple(ImageAgentVersion(g, images[g], v) for g, v in sorted(baked.items())),
            cached=cached,
            demanded=demanded,
            warnings=tuple(version_warnings(org, baked, demanded, cached)),
            message=message,
            checked_at=self.clock(),
        )
        if self.reading.warnings != self._warned:
            self._warned = self.reading.warnings
            for warning in self._warned:
                self.report("agent_version", warning)
        return delay

    async def _fetch(self, package: AgentPackage) -> tuple[str, float]:
        """Fetch ``package`` once into the cache: (the problem to show, seconds until a retry)."""
        if self.cache.cached(package.version) is not None:
            return "", self.interval
        if self._refused.get(package.version) == package.hash_value:
            return self.reading.message, self.interval  # said once; a new hash is tried again
        try:
            path = await asyncio.to_thread(self.cache.ensure, package)
        except PackageRefused as exc:
            self._refused[package.version] = package.hash_value
            self.report(
                "agent_package_refused",
                f"{exc}; new agent containers keep the image's agent and update themselves "
                "(slower), or rebuild the image",
            )
            return str(exc), self.interval
        except (PackageError, OSError) as exc:
            self.report("agent_package", f"could not fetch agent package {package.version}: {exc}")
            return str(exc), RETRY
        removed = await asyncio.to_thread(self.cache.prune)
        self.report(
            "agent_package",
            f"agent package {package.version} fetched and verified (SHA-256 "
            f"{package.hash_value[:12]}…) into {path}; new agent containers start with it"
            + (f"; removed the cached {', '.join(removed)}" if removed else ""),
        )
        return "", self.interval
