"""Read each GPU's fixed facts through NVML once, for the agents' capabilities.

Only cheap calls (name, UUID, memory, compute capability, MIG mode: 0.007-0.42
ms each, measured on an H100 and an H200) and only once per supervisor start:
these facts do not change while the host runs, so the sampler's per-second
frame does not carry them. NVML is started by the sampler (`host_info`), which
keeps it initialised; NVML itself is thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts
from gpuci_tui.core.protocols import GpuSampler

log = logging.getLogger(__name__)

T = TypeVar("T")

_MIB = 1024 * 1024


def nvml_call(
    fn: Callable[..., T], *args: Any, fact: str = "capability", logger: logging.Logger = log
) -> T | None:
    """One NVML call; any NVML error (not supported, missing from the driver, lost) → None.

    Args:
        fn: The pynvml function.
        *args: Its arguments.
        fact: What the caller leaves out when the call fails (for the debug log).
        logger: The caller's logger.
    """
    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        logger.debug("%s: %s (%s left out)", getattr(fn, "__name__", "nvml"), exc, fact)
        return None


def memory_mib(handle: Any, fact: str = "capability", logger: logging.Logger = log) -> int | None:
    """A device's (GPU's or MIG device's) total memory in MiB, None when NVML cannot say.

    ``fact`` and ``logger`` are `nvml_call`'s.
    """
    # Total is the same in v1 and v2; v1 answers on every driver.
    memory = nvml_call(pynvml.nvmlDeviceGetMemoryInfo, handle, fact=fact, logger=logger)
    return int(memory.total) // _MIB if memory is not None else None


def _mig_capable(handle: Any) -> bool | None:
    # As NVIDIA's go-nvlib: the call answering means MIG-capable (whatever the mode),
    # NOT_SUPPORTED means not capable, any other error means unknown.
    try:
        pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError_NotSupported:
        return False
    except pynvml.NVMLError as exc:
        log.debug("nvmlDeviceGetMigMode: %s (capability left out)", exc)
        return None
    return True


def _gpu(index: int) -> GpuFacts:
    handle = nvml_call(pynvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return GpuFacts(index=index)
    name = nvml_call(pynvml.nvmlDeviceGetName, handle)
    uuid = nvml_call(pynvml.nvmlDeviceGetUUID, handle)
    compute = nvml_call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    return GpuFacts(
        index=index,
        uuid=str(uuid) if uuid is not None else None,
        name=str(name) if name is not None else None,
        memory_total_mib=memory_mib(handle),
        compute_capability=(int(compute[0]), int(compute[1])) if compute is not None else None,
        mig_capable=_mig_capable(handle),
    )


def read_nvml_facts(sampler: GpuSampler) -> HostGpuFacts:
    """The driver's and each GPU's facts; no GPU facts when NVML is unavailable.

    ``sampler`` is the `NvmlSampler` that initialised NVML (its `host_info`
    starts NVML on first use and gives the driver's versions).
    """
    host = sampler.host_info()
    if not host.available:
        return HostGpuFacts(host.driver_version, host.cuda_driver_version)
    gpus = tuple(_gpu(index) for index in range(host.gpu_count))
    return HostGpuFacts(host.driver_version, host.cuda_driver_version, gpus)


__all__ = ["memory_mib", "nvml_call", "read_nvml_facts"]
