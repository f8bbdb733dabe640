"""What NVML says of the host's GPUs, as plain data: frames of samples, processes, health.

The `protocols.GpuSampler` seam returns these; the sampler, the accounting, the GPU
gates and the console read them. Kept out of `protocols` (the seams) because they
are most of the GPU vocabulary and grow with it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GpuProcess",
    "XidEvent",
    "GpuHealthReading",
    "GpuSample",
    "JobGpuNow",
    "GpuHostInfo",
    "GpuFrame",
]


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU (host PID)."""

    pid: int
    used_memory_mib: float | None = None
    name: str | None = None
    container_id: str | None = None
    container_name: str | None = None
    sm_util_pct: float | None = None
    """SM (compute) utilisation of this process since the previous sample; None when the
    driver cannot say. 0 when the driver reports no activity for it in that interval."""
    mem_util_pct: float | None = None
    """Memory-controller utilisation of this process, same rules as `sm_util_pct`."""


@dataclass(frozen=True)
class XidEvent:
    """One critical-error (Xid) event NVML delivered for a GPU.

    Every Xid the driver reports is passed on, application-caused ones included:
    which Xids are critical is a rule of `gpu_health`, not of the sampler.
    """

    xid: int
    at: float
    """Wall-clock time the sampler received the event."""


@dataclass(frozen=True)
class GpuHealthReading:
    """Raw health facts of one GPU at one sample; None: the driver cannot say (Not Supported).

    The sampler only reports what NVML says; turning readings into a health state
    (what is critical, what is "rising", what is "sustained", what stays until an
    operator clears it) is the pure rule of the engine's GPU health assessment.
    """

    lost: bool = False
    """The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)."""
    reset_required: bool = False
    """NVML says the GPU needs a reset (NVML_ERROR_RESET_REQUIRED)."""
    xid_events: tuple[XidEvent, ...] = ()
    """Xid events received since the previous sample of this GPU."""
    ecc_uncorrected_volatile: int | None = None
    """Uncorrectable ECC errors since the driver loaded (volatile counter, all memory)."""
    ecc_uncorrected_aggregate: int | None = None
    """Uncorrectable ECC errors over the board's life (aggregate counter)."""
    remapped_rows_pending: bool | None = None
    """A row remap is pending: the GPU needs a reset to apply it."""
    remapped_rows_failed: bool | None = None
    """A row remap failed: the GPU should be serviced."""
    slowdown_reasons: tuple[str, ...] = ()
    """Active hardware slowdown reasons from the clocks-event reasons, by name:
    "hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal"."""
    clocks_event_mask: int | None = None  # the raw reasons: per-job throttle seconds (job_facts)
    ecc_corrected_volatile: int | None = None  # corrected ECC errors since the driver loaded


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one instant. None means "N/A" (not supported / failed)."""

    index: int
    name: str
    uuid: str | None = None
    utilization_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    energy_mj: int | None = None
    """Energy used since the driver was loaded, in millijoules (a counter; Volta and newer)."""
    health: GpuHealthReading | None = None
    """Health facts of this sample; None when the sampler does not read health."""


@dataclass(frozen=True)
class JobGpuNow:
    """What one job uses of the GPUs in the latest folded frame (the live agents table).

    Folded by `gpu.accounting.JobAccountant`; here so the engine's snapshots can
    name it without importing the GPU package (the engine is a leaf).

    None means "not known" in that frame (the driver gave no figure, or the
    GPU was shared so its own utilisation cannot be the job's).
    """

    memory_mib: float | None
    """The job's processes' GPU memory, summed over its GPUs."""
    util_pct: float | None
    """The job's utilisation, averaged over its GPUs (same rules as the statistics)."""
    at: float
    """Unix time of the frame."""


@dataclass(frozen=True)
class GpuHostInfo:
    """What the host's driver offers; ``available`` False means "no GPU visible"."""

    available: bool
    reason: str = ""
    """Why no GPU is visible (e.g. "NVML library not found: no NVIDIA driver")."""
    driver_version: str | None = None
    cuda_driver_version: tuple[int, int] | None = None
    """Highest CUDA (major, minor) the driver supports."""
    gpu_count: int = 0


@dataclass(frozen=True)
class GpuFrame:
    """All GPUs at one instant."""

    taken_at: float
    host: GpuHostInfo
    gpus: tuple[GpuSample, ...] = ()
