"""`NvmlSampler`: the host's NVIDIA GPUs through NVML (nvidia-ml-py's ``pynvml``).

Design rules, all taken from what breaks on real GPU hosts:

- NVML is initialised lazily, on the first `host_info()` or `sample()`, so a
  console on a machine without a driver starts instantly and just shows
  "no GPU". Any init failure (library missing, kernel driver not loaded,
  driver/library version mismatch after an upgrade without reboot, no
  permission on /dev/nvidia*) becomes ``GpuHostInfo(available=False,
  reason=...)`` in plain words; it is retried after `retry_interval` seconds.
- One field that fails (not supported on this board, function missing from an
  older driver, transient error) becomes None ("N/A") for that field only.
- A GPU that fell off the bus (``GPU_IS_LOST``) or needs a reset is still
  listed, with every metric None and its name marked (`LOST_MARK`).
- Per sample, one pass over the GPUs also reads each compute process's memory
  and SM/memory utilisation since the previous sample (`nvml_procs`), for
  per-job accounting (`accounting`), and the GPU's health counters with the
  Xid events received meanwhile (`health_reader`).
- Memory is NVML's v2 figure: v1 counts the driver's reserved memory as used
  (an idle H100 shows 480 MiB "used" where nvidia-smi shows 0); v1 is the
  fallback where a driver lacks v2.
- The energy counter costs ~3.4 ms a call on an H100, more than all other
  calls of a sample together, and only per-job accounting needs it: it is read
  only for a GPU that runs a compute process.
- Processes are NVML's *host* PIDs, mapped to Docker containers through
  `gpuci_tui.core.docker.cgroups` and, optionally, to container names through a
  callable the caller passes in (the sampler never talks to Docker itself).
- All NVML calls happen under one lock: the sampler may be shared between the
  console's GPU worker and the supervisor.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pynvml

from gpuci_tui.core.docker.cgroups import (
    PROC_ROOT,
    ContainerNames,
    container_id_of_pid,
    process_name,
)
from gpuci_tui.core.gpu.health_reader import XidWatch, read_health
from gpuci_tui.core.gpu.nvml_failures import init_failure_reason
from gpuci_tui.core.gpu.nvml_procs import ProcessUtil, ProcessUtilization, running_processes
from gpuci_tui.core.gpu_readings import (
    GpuFrame,
    GpuHealthReading,
    GpuHostInfo,
    GpuProcess,
    GpuSample,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

LOST_MARK = " (GPU lost)"
"""Appended to the name of a GPU that stopped answering (GPU_IS_LOST / reset required)."""

_MIB = 1024 * 1024


def is_lost(sample: GpuSample) -> bool:
    """Whether `NvmlSampler` marked this GPU as lost (fell off the bus, needs a reset)."""
    return sample.name.endswith(LOST_MARK)


def cuda_version_tuple(encoded: int) -> tuple[int, int]:
    """Decode NVML's CUDA version integer (``1000*major + 10*minor``, e.g. 12040 → (12, 4))."""
    return encoded // 1000, (encoded % 1000) // 10


class _GpuLost(Exception):
    """Raised inside one GPU's sampling when NVML says the GPU is gone."""

    def __init__(self, reset_required: bool) -> None:
        super().__init__("reset required" if reset_required else "GPU is lost")
        self.reset_required = reset_required


class NvmlSampler:
    """Samples the host's GPUs through NVML; implements `GpuSampler`."""

    def __init__(
        self,
        *,
        container_name: Callable[[str], str | None] | None = None,
        library_path: str | os.PathLike[str] | None = None,
        proc_root: Path = PROC_ROOT,
        retry_interval: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Create a sampler; NVML itself is only touched on first use.

        Args:
            container_name: Maps a 64-hex container id to its name (None when
                unknown). Called from the sampling thread; exceptions are
                swallowed. Results are cached.
            library_path: A specific ``libnvidia-ml.so.1`` to load (e.g. when
                the driver lives outside the linker path, or for tests). It is
                preloaded with RTLD_GLOBAL so pynvml's own lookup by soname
                finds it. Without it the normal linker search applies.
            proc_root: Where procfs is mounted (for PID → container mapping).
            retry_interval: Seconds to wait before trying NVML init again
                after it failed.
            clock: Wall clock for `GpuFrame.taken_at`.
        """
        self._library_path = os.fspath(library_path) if library_path is not None else None
        self._proc_root = proc_root
        self._retry_interval = retry_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._initialised = False
        self._host: GpuHostInfo | None = None
        self._failed_at: float | None = None
        self._preloaded: ctypes.CDLL | None = None
        self._names: dict[int, tuple[str, str | None]] = {}
        self._container_names = ContainerNames(container_name)
        self._logged: set[tuple[str, int]] = set()
        self._util = ProcessUtilization()
        self._xids: XidWatch | None = None

    # ------------------------------------------------------------------ GpuSampler

    def host_info(self) -> GpuHostInfo:
        """Driver facts, or ``available=False`` with the reason; never raises."""
        with self._lock:
            return self._ensure_init()

    def sample(self) -> GpuFrame:
        """One frame of all GPUs; an empty frame when NVML is unavailable."""
        with self._lock:
            host = self._ensure_init()
            taken_at = self._clock()
            if not host.available:
                return GpuFrame(taken_at=taken_at, host=host)
            try:
                count = int(pynvml.nvmlDeviceGetCount())
            except pynvml.NVMLError as exc:
                lost = GpuHostInfo(
                    available=False,
                    reason=f"NVML could not count the GPUs ({exc}). Check nvidia-smi.",
                    driver_version=host.driver_version,
                    cuda_driver_version=host.cuda_driver_version,
                )
                # The driver may have been unloaded and reloaded (an upgrade): this session is
                # dead, so NVML is started again after the retry interval, on the new driver.
                self._shutdown()
                self._host, self._failed_at = lost, time.monotonic()
                return GpuFrame(taken_at=taken_at, host=lost)
            version, cuda = self._driver_now(host)
            if (count, version, cuda) != (
                host.gpu_count,
                host.driver_version,
                host.cuda_driver_version,
            ):
                host = self._host = GpuHostInfo(
                    available=count > 0,
                    reason="" if count > 0 else "The NVIDIA driver is loaded but sees no GPU.",
                    driver_version=version,
                    cuda_driver_version=cuda,
                    gpu_count=count,
                )
            self._watch_xids(count)
            gpus = tuple(self._sample_gpu(index) for index in range(count))
            return GpuFrame(taken_at=taken_at, host=host, gpus=gpus)

    def close(self) -> None:
        """Shut NVML down when this sampler initialised it; sampling again re-inits."""
        with self._lock:
            self._shutdown()
            self._host = None
            self._failed_at = None

    def _shutdown(self) -> None:
        if self._xids is not None:  # before the shutdown its wait would fail under
            self._xids.close()
            self._xids = None
        if self._initialised:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as exc:
                log.debug("nvmlShutdown failed: %s", exc)
        self._initialised = False

    # ------------------------------------------------------------------ init

    def _ensure_init(self) -> GpuHostInfo:
        if self._host is not None and (self._initialised or not self._retry_due()):
            return self._host
        self._host = self._init()
        self._failed_at = None if self._initialised else time.monotonic()
        return self._host

    def _retry_due(self) -> bool:
        return self._failed_at is None or time.monotonic() - self._failed_at >= self._retry_interval

    def _init(self) -> GpuHostInfo:
        if self._library_path is not None and self._preloaded is None:
            try:
                # pynvml loads "libnvidia-ml.so.1" by soname; a library already
                # loaded with that soname and RTLD_GLOBAL satisfies the lookup.
                self._preloaded = ctypes.CDLL(self._library_path, mode=ctypes.RTLD_GLOBAL)
            except OSError as exc:
                return GpuHostInfo(
                    available=False,
                    reason=(
                        f"Could not load the NVML library {self._library_path} ({exc}). "
                        "Fix or remove the configured library path."
                    ),
                )
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            # DEBUG: a host without NVIDIA driver is normal; the console shows the reason.
            log.debug("NVML unavailable: %s", exc)
            return GpuHostInfo(available=False, reason=init_failure_reason(exc))
        except (OSError, AttributeError) as exc:
            # A broken or foreign library can fail below pynvml's error mapping.
            return GpuHostInfo(
                available=False,
                reason=f"The NVML library could not be used ({exc}). Check the NVIDIA driver.",
            )
        self._initialised = True
        driver = self._query(pynvml.nvmlSystemGetDriverVersion)
        cuda = self._cuda_driver_version()
        count = self._query(pynvml.nvmlDeviceGetCount)
        gpus = int(count) if count is not None else 0
        return GpuHostInfo(
            available=gpus > 0,
            reason="" if gpus > 0 else "The NVIDIA driver is loaded but sees no GPU.",
            driver_version=str(driver) if driver is not None else None,
            cuda_driver_version=cuda,
            gpu_count=gpus,
        )

    def _driver_now(self, host: GpuHostInfo) -> tuple[str | None, tuple[int, int] | None]:
        # Re-read at each sample: the driver is upgraded or rolled back under the daemon, and
        # the CUDA check of the agent images follows it. A failed read keeps the last one.
        read = self._query(pynvml.nvmlSystemGetDriverVersion)
        version = str(read) if read is not None else host.driver_version
        cuda = self._cuda_driver_version()
        if cuda is None and version == host.driver_version:
            cuda = host.cuda_driver_version
        return version, cuda

    def _cuda_driver_version(self) -> tuple[int, int] | None:
        # _v2 reports an error when libcuda is missing; v1 then returns the
        # version the driver was built for, which is still the right answer
        # for "which CUDA images can this host run".
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            try:
                return cuda_version_tuple(int(fn()))
            except pynvml.NVMLError as exc:
                self._log_once(name, exc)
        return None

    # ------------------------------------------------------------------ one GPU

    def _sample_gpu(self, index: int) -> GpuSample:
        known_name, known_uuid = self._names.get(index, (f"GPU {index}", None))
        try:
            handle = self._device(pynvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                return GpuSample(index=index, name=known_name, uuid=known_uuid)
            name = self._device(pynvml.nvmlDeviceGetName, handle)
            uuid = self._device(pynvml.nvmlDeviceGetUUID, handle)
            name_s = str(name) if name is not None else known_name
            uuid_s = str(uuid) if uuid is not None else known_uuid
            self._names[index] = (name_s, uuid_s)
            util = self._device(pynvml.nvmlDeviceGetUtilizationRates, handle)
            memory = self._memory(handle)
            power = self._device(pynvml.nvmlDeviceGetPowerUsage, handle)
            limit = self._power_limit(handle)
            procs = running_processes(handle, self._device_or_missing)
            # Only per-job accounting needs energy, and only while a process runs.
            energy = (
                self._device(pynvml.nvmlDeviceGetTotalEnergyConsumption, handle) if procs else None
            )
            utils = self._util.read(handle, uuid_s or str(index), self._device_or_missing)
            xids = self._xids.drain(index) if self._xids is not None else ()
            health = read_health(handle, self._device_or_missing, xids, busy=bool(procs))
            return GpuSample(
                index=index,
                name=name_s,
                uuid=uuid_s,
                utilization_pct=float(util.gpu) if util is not None else None,
                memory_used_mib=int(memory.used) / _MIB if memory is not None else None,
                memory_total_mib=int(memory.total) / _MIB if memory is not None else None,
                temperature_c=self._temperature(handle),
                power_w=int(power) / 1000.0 if power is not None else None,
                power_limit_w=int(limit) / 1000.0 if limit is not None else None,
                processes=self._map_processes(procs, utils),
                energy_mj=int(energy) if energy is not None else None,
                health=health,
            )
        except _GpuLost as lost:
            xids = self._xids.drain(index) if self._xids is not None else ()
            return GpuSample(
                index=index,
                name=known_name + LOST_MARK,
                uuid=known_uuid,
                health=GpuHealthReading(
                    lost=not lost.reset_required,
                    reset_required=lost.reset_required,
                    xid_events=xids,
                ),
            )

    def _watch_xids(self, count: int) -> None:
        """Start the Xid event watch once NVML is up (its thread waits, never the sampler)."""
        if self._xids is not None:
            return
        handles = []
        for index in range(count):
            try:
                handles.append(pynvml.nvmlDeviceGetHandleByIndex(index))
            except pynvml.NVMLError as exc:
                self._log_once("nvmlDeviceGetHandleByIndex", exc)
                return
        self._xids = XidWatch(self._clock)
        self._xids.start(handles)

    def _memory(self, handle: Any) -> Any:
        """v2 memory info (``used`` without the driver's reserved memory); v1 where v2 is missing.

        Only a driver without the v2 call falls back: another error of v2 (no
        permission, unknown) is N/A, as for every other field.
        """
        try:
            return pynvml.nvmlDeviceGetMemoryInfo(handle, pynvml.nvmlMemory_v2)
        except (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_ResetRequired) as exc:
            raise _GpuLost(isinstance(exc, pynvml.NVMLError_ResetRequired)) from exc
        except (
            pynvml.NVMLError_FunctionNotFound,
            pynvml.NVMLError_NotSupported,
            pynvml.NVMLError_ArgumentVersionMismatch,
        ) as exc:
            self._log_once("nvmlDeviceGetMemoryInfo_v2", exc)
            return self._device(pynvml.nvmlDeviceGetMemoryInfo, handle)
        except pynvml.NVMLError as exc:
            self._log_once("nvmlDeviceGetMemoryInfo_v2", exc)
            return None

    def _temperature(self, handle: Any) -> float | None:
        # nvmlDeviceGetTemperature is deprecated (gone in CUDA 14 drivers);
        # TemperatureV is missing from older drivers and older nvidia-ml-py.
        fn_v = getattr(pynvml, "nvmlDeviceGetTemperatureV", None)
        if fn_v is not None:
            value, missing = self._device_or_missing(fn_v, handle, pynvml.NVML_TEMPERATURE_GPU)
            if not missing:
                return float(value) if value is not None else None
        value = self._device(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
        return float(value) if value is not None else None

    def _power_limit(self, handle: Any) -> int | None:
        value, missing = self._device_or_missing(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        if missing:
            value = self._device(pynvml.nvmlDeviceGetPowerManagementLimit, handle)
        return int(value) if value is not None else None

    def _map_processes(self, procs: list[Any], utils: ProcessUtil | None) -> tuple[GpuProcess, ...]:
        out = []
        for proc in procs:
            pid = int(proc.pid)
            used = getattr(proc, "usedGpuMemory", None)
            cid = container_id_of_pid(pid, self._proc_root)
            # Absent from a successful utilisation read = idle in the interval.
            sm, mem = (None, None) if utils is None else utils.get(pid, (0.0, 0.0))
            out.append(
                GpuProcess(
                    pid=pid,
                    used_memory_mib=int(used) / _MIB if used is not None else None,
                    name=process_name(pid, self._proc_root),
                    container_id=cid,
                    container_name=self._container_names.lookup(cid) if cid else None,
                    sm_util_pct=sm,
                    mem_util_pct=mem,
                )
            )
        return tuple(out)

    # ------------------------------------------------------------------ NVML calls

    def _query(self, fn: Callable[..., T], *args: Any) -> T | None:
        """Call a system-level NVML function; any NVML error → None."""
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            self._log_once(getattr(fn, "__name__", "nvml"), exc)
            return None

    def _device(self, fn: Callable[..., T], *args: Any) -> T | None:
        """Call a device-level NVML function; lost GPU → `_GpuLost`, other errors → None."""
        value, _missing = self._device_or_missing(fn, *args)
        return value

    def _device_or_missing(self, fn: Callable[..., T], *args: Any) -> tuple[T | None, bool]:
        """Like `_device`, also telling whether the function is missing from the driver."""
        try:
            return fn(*args), False
        except (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_ResetRequired) as exc:
            raise _GpuLost(isinstance(exc, pynvml.NVMLError_ResetRequired)) from exc
        except pynvml.NVMLError_FunctionNotFound as exc:
            self._log_once(getattr(fn, "__name__", "nvml"), exc)
            return None, True
        except pynvml.NVMLError as exc:
            self._log_once(getattr(fn, "__name__", "nvml"), exc)
            return None, False

    def _log_once(self, name: str, exc: BaseException) -> None:
        key = (name, int(getattr(exc, "value", -1)))
        if key not in self._logged:
            self._logged.add(key)
            # FunctionNotFound means nvidia-ml-py is newer than the driver: the
            # field shows N/A, which is the intended outcome, so this is debug.
            log.debug("%s: %s (shown as N/A)", name, exc)
