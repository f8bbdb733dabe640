"""The CUDA check before every start: does the driver still run each group's image?

An image built for a newer CUDA than the driver supports cannot start
(nvidia-container-cli refuses it), so the slot would crash-loop and park. The
guard reads what each group's image needs (`DockerRuntime.image_config`: the
``NVIDIA_REQUIRE_CUDA``/``CUDA_VERSION`` of its configuration and our
``io.gpuci.cuda`` label; parsed once per image id) and what the driver supports
(the GPU watch's frames: the sampler re-reads the driver at each sample), asks
`cuda_fit.refusal`, and tells each group's engine (`steps.CudaChecked`), which
holds the group's slots while the answer is a refusal.

When: once before the supervisor's first plan (`at_start`: no container starts
before the answer), then whenever NVML reports another driver (an upgrade or a
rollback under the running daemon), and every ``recheck`` seconds for the image
(a tag moved to another image by a pull or a build). A group sends nothing when
its answer did not change. A group without GPUs (``gpus = "none"``) and a host
without NVML are never held; an image Docker cannot inspect now keeps its last
answer (the engine being down is not the driver's fault), and so does a driver
NVML cannot read for a while after it read one (a driver being reloaded: the
sampler starts NVML again and the new driver is checked then).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.engine.steps import CudaChecked, Observation
from gpuci_tui.core.gpu.cuda_fit import CudaNeed, DriverCuda, need_of, refusal
from gpuci_tui.core.gpu_readings import GpuHostInfo
from gpuci_tui.core.protocols import ImageConfig

log = logging.getLogger("gpuci_tui.gpu")

Inspect = Callable[[str], ImageConfig | None]

#: Seconds between two looks at a group's image (one local inspect each).
RECHECK = 10.0
#: Longest wait for NVML and Docker at start before the supervisor starts anyway.
START_TIMEOUT = 15.0


class CudaFeed(Protocol):
    """A group's supervisor, as the guard sees it."""

    @property
    def config(self) -> Config:
        """The group's configuration (its image and GPUs)."""
        ...

    @property
    def group(self) -> str:
        """The group's name ("" for the implicit one)."""
        ...

    def deliver(self, obs: Observation) -> None:
        """Hand an observation to its loop."""
        ...

    def observe(self, obs: Observation) -> None:
        """Fold an observation in now, before its next plan."""
        ...


class CudaGuard:
    """Checks every group's image against the driver and holds the groups that cannot run."""

    def __init__(
        self,
        feeds: Callable[[], Iterable[CudaFeed]],
        inspect: Inspect,
        *,
        recheck: float = RECHECK,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """Check the groups ``feeds()`` gives, reading images with ``inspect``."""
        self.feeds = feeds
        self.inspect = inspect
        self.recheck = recheck
        self.clock = clock
        self.wall = wall
        self._needs: dict[str, CudaNeed | None] = {}
        """By image id: an image's requirement never changes, its tag may move."""
        self._said: dict[str, str] = {}
        """The last answer sent to each group."""
        self._driver: DriverCuda | None = None
        self._known = False
        """A driver was read once: losing it later is not "no NVML on this host"."""
        self._seen = False
        self._due = 0.0

    def refusal_now(self, config: Config) -> str:
        """Why ``config``'s image cannot run on the driver read last; "" when it can.

        A reload asks it before it applies a new image (`group_reload`): an image the
        driver cannot run is refused there, and no lane leaves the image it runs. ""
        also when it cannot tell (no driver read yet, the image absent or not readable):
        the checks before every start still hold the group then.
        """
        if not self._seen:
            return ""
        return self._reason(config, self._driver) or ""

    def check_soon(self) -> None:
        """Look at every group's image again on the next GPU frame (a reload changed them)."""
        self._due = 0.0

    async def at_start(self, host_info: Callable[[], GpuHostInfo]) -> None:
        """The first check, folded into every group before its first plan (bounded)."""
        try:
            async with asyncio.timeout(START_TIMEOUT):
                host = await asyncio.to_thread(host_info)
                await self._check(driver_of(host), now=True)
        except TimeoutError:
            log.warning("the CUDA check at start took over %.0f s; it runs again", START_TIMEOUT)

    async def observe(self, host: GpuHostInfo) -> None:
        """One GPU frame: check again when the driver changed or the images are due."""
        driver = driver_of(host)
        changed = self._seen and driver != self._driver
        if not changed and self._seen and self.clock() < self._due:
            return
        if changed:
            log.info("NVIDIA driver now %s: checking the agent images again", driver)
        try:
            await self._check(driver, now=False)
        except Exception:  # noqa: BLE001 - a bug here must not stop the GPU watch
            log.exception("the CUDA check of the agent images failed")

    async def _check(self, driver: DriverCuda | None, *, now: bool) -> None:
        self._driver, self._seen, self._due = driver, True, self.clock() + self.recheck
        self._known = self._known or driver is not None
        for feed in list(self.feeds()):
            reason = await asyncio.to_thread(self._reason, feed.config, driver)
            if reason is None:
                continue
            # At start the answer is folded in whatever was said: a frame of the GPU watch
            # may have said it first, but only to the inbox, which the first plan has not read.
            if self._said.get(feed.group) == reason and not now:
                continue
            if reason and self._said.get(feed.group) != reason:
                log.warning("%s: %s", feed.group or "agents", reason)
            self._said[feed.group] = reason
            obs = CudaChecked(self.wall(), reason)
            if now:
                feed.observe(obs)
            else:
                feed.deliver(obs)

    def _reason(self, config: Config, driver: DriverCuda | None) -> str | None:
        """The refusal for ``config``'s image ("" when it may start; None: cannot tell now)."""
        agents = config.agents
        if agents.gpus == "none":
            return ""
        if driver is None:
            return None if self._known else ""
        try:
            image = self.inspect(agents.image)
        except Exception as exc:  # noqa: BLE001 - Docker down or slow: ask again later
            log.debug("cannot inspect %s for its CUDA: %s", agents.image, exc)
            return None
        if image is None:
            return ""  # missing: the start says so, with its own fix
        if image.image_id not in self._needs:
            self._needs[image.image_id] = need_of(image.env, image.labels)
        return refusal(agents.image, self._needs[image.image_id], driver) or ""


def driver_of(host: GpuHostInfo) -> DriverCuda | None:
    """The driver as the check needs it; None on a host without a usable NVML."""
    if not host.available:
        return None
    return DriverCuda(host.driver_version, host.cuda_driver_version)


def inspector(runtime: object) -> Inspect | None:
    """The runtime's `image_config`, when it has one (test doubles may not)."""
    inspect = getattr(runtime, "image_config", None)
    return inspect if callable(inspect) else None
