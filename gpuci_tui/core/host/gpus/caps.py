"""Each slot's GPU capabilities, for the environment of its agent containers.

The agent reports its environment as system capabilities (the Azure Pipelines
agent's EnvironmentCapabilitiesProvider), so a slot's GPU facts given as
environment variables (``gpu.product=NVIDIA-H100-80GB-HBM3``) are what a
pipeline's ``demands:`` match. Names with dots survive Docker and bash (the
image's start.sh and the agent's config.sh/run.sh are bash, which passes such
names on; dash and busybox sh drop them): see docs/gpus.md, "GPU capabilities".

The facts are read once, at the first start of an agent, not per sample: they
do not change while the host runs (a new GPU or driver means a restart).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.config.slot_shapes import MigDevice, shaped_slot
from gpuci_tui.core.docker.agentspec import slot_gpus
from gpuci_tui.core.gpu.capabilities import (
    MEMORY,
    PRODUCT,
    GpuFacts,
    HostGpuFacts,
    select_gpus,
    slot_capabilities,
)
from gpuci_tui.core.protocols import GpuSampler

log = logging.getLogger(__name__)

#: The MIG profile of a slice slot (``1g.10gb``), as the brief of slot shapes names it.
MIG_PROFILE = "gpu.mig.profile"


def mig_capabilities(facts: HostGpuFacts, mig: MigDevice, hostname: str | None) -> dict[str, str]:
    """A MIG slot's capabilities: its parent's facts, the slice's memory and profile.

    As GPU feature discovery's "single" MIG strategy, the product names the slice
    (``NVIDIA-H100-80GB-HBM3-MIG-1g.10gb``): a job that demands a whole H100 must not
    land on a seventh of one. The parent's memory would over-promise, so the slice's
    own is given, or none when it was not read.
    """
    caps = slot_capabilities(facts, select_gpus(facts, (str(mig.parent),)), hostname)
    caps.pop(MEMORY, None)
    if mig.memory_mib is not None:
        caps[MEMORY] = str(mig.memory_mib)
    if mig.profile:
        caps[MIG_PROFILE] = mig.profile
        if PRODUCT in caps:
            caps[PRODUCT] = f"{caps[PRODUCT]}-MIG-{mig.profile}"
    return caps


def facts_from_frame(sampler: GpuSampler) -> HostGpuFacts:
    """Facts any sampler can give from one frame: name, UUID, memory, driver.

    Compute capability and MIG are not in a frame: left out (not guessed).
    """
    frame = sampler.sample()
    gpus = tuple(
        GpuFacts(
            index=g.index,
            uuid=g.uuid,
            name=g.name,
            memory_total_mib=int(g.memory_total_mib) if g.memory_total_mib is not None else None,
        )
        for g in frame.gpus
    )
    return HostGpuFacts(frame.host.driver_version, frame.host.cuda_driver_version, gpus)


def facts_reader(sampler: GpuSampler) -> Callable[[], HostGpuFacts]:
    """How to read ``sampler``'s host facts: its own ``facts()``, NVML's, or from a frame."""
    own = getattr(sampler, "facts", None)
    if callable(own):
        return lambda: own()
    from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: PLC0415 - pynvml only here

    if isinstance(sampler, NvmlSampler):
        from gpuci_tui.core.gpu.nvml_facts import read_nvml_facts  # noqa: PLC0415

        return lambda: read_nvml_facts(sampler)
    return lambda: facts_from_frame(sampler)


class SlotCapabilities:
    """``(config, slot) -> capabilities`` of the slot's GPUs; the facts are read once."""

    def __init__(self, read: Callable[[], HostGpuFacts], hostname: str | None = None) -> None:
        """``read`` gives the host's facts; ``hostname`` defaults to this machine's name."""
        self._read = read
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self._facts: HostGpuFacts | None = None
        self._lock = threading.Lock()

    def facts(self) -> HostGpuFacts:
        """The host's facts; read until a read sees GPUs (a driver loaded late), then kept."""
        with self._lock:
            if self._facts is not None:
                return self._facts
            try:
                facts = self._read()
            except Exception as exc:  # noqa: BLE001 - no capabilities is no reason to fail a start
                log.warning("could not read the GPUs' facts for the agents' capabilities: %s", exc)
                return HostGpuFacts()
            if facts.gpus:
                self._facts = facts
            return facts

    def __call__(self, config: Config, slot: int) -> dict[str, str]:
        """The capabilities of ``slot`` under ``config``'s GPU policy."""
        facts = self.facts()
        shaped = shaped_slot(config.agents, slot)
        if shaped is not None and shaped.mig is not None:
            return mig_capabilities(facts, shaped.mig, self.hostname)
        return slot_capabilities(facts, select_gpus(facts, slot_gpus(config, slot)), self.hostname)


__all__ = [
    "MIG_PROFILE",
    "SlotCapabilities",
    "facts_from_frame",
    "facts_reader",
    "mig_capabilities",
]
