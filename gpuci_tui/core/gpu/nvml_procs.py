"""The per-process half of an NVML sample: who runs on a GPU, and how hard.

`NvmlSampler` calls these once per GPU per sample, through its own error
wrapper (`DeviceCall`): a lost GPU aborts that GPU's sample, a function the
driver lacks or refuses becomes None ("N/A"). Kept apart from `gpu` because
the process list has three driver generations to support and per-process
utilisation has state of its own (the last-seen timestamp per GPU).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

DeviceCall = Callable[..., tuple[Any, bool]]
"""``call(fn, *args) -> (value, missing)``: value None on any NVML error,
``missing`` True when the driver lacks ``fn``; raises on a lost GPU."""

ProcessUtil = dict[int, tuple[float, float]]
"""Host PID → (SM %, memory %) averaged over the samples since the last call."""


def running_processes(handle: Any, call: DeviceCall) -> list[Any]:
    """The compute processes on one GPU (objects with ``pid`` and ``usedGpuMemory``).

    Tries the v3, v2 and v1 layouts in turn: each driver generation knows only
    some of them, and a missing one is `FunctionNotFound`, not an answer.
    Any other error (NOT_SUPPORTED on some vGPU setups) ends the search with
    an empty list.
    """
    for name in (
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
    ):
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        procs, missing = call(fn, handle)
        if not missing:
            return list(procs or [])
    procs, _missing = call(compute_processes_v1, handle)
    return list(procs or [])


class ProcessUtilization:
    """Per-process SM/memory utilisation, each sample covering the time since the last one.

    NVML keeps a short buffer of per-process samples and returns those newer
    than a caller-supplied timestamp; remembering the newest one seen per GPU
    makes consecutive calls cover consecutive intervals without overlap.
    """

    def __init__(self) -> None:
        """Start with no timestamps: the first call returns what NVML has buffered."""
        self._last_seen: dict[str, int] = {}

    def read(self, handle: Any, gpu_key: str, call: DeviceCall) -> ProcessUtil | None:
        """Utilisation of the processes active on one GPU since the previous call.

        Args:
            handle: The NVML device handle.
            gpu_key: A stable name for the GPU (its UUID, else its index), so a
                GPU that disappears does not hand its timestamp to another.
            call: The sampler's NVML error wrapper.

        Returns:
            PID → (SM %, memory %); a process absent from it had no activity in
            the interval (NVML only reports processes that were active). None
            when the driver cannot report per-process utilisation at all.
        """
        samples, _missing = call(_process_utilization, handle, self._last_seen.get(gpu_key, 0))
        if samples is None:
            return None
        sums: dict[int, list[float]] = {}
        newest = self._last_seen.get(gpu_key, 0)
        for sample in samples:
            # Several samples of one process can fall in one interval: average
            # them, so the value is the process's mean over the interval.
            acc = sums.setdefault(int(sample.pid), [0.0, 0.0, 0.0])
            acc[0] += float(sample.smUtil)
            acc[1] += float(sample.memUtil)
            acc[2] += 1.0
            newest = max(newest, int(sample.timeStamp))
        self._last_seen[gpu_key] = newest
        return {pid: (sm / n, mem / n) for pid, (sm, mem, n) in sums.items()}


def _process_utilization(handle: Any, last_seen: int) -> list[Any]:
    """``nvmlDeviceGetProcessUtilization`` with "no sample in the interval" as an empty list."""
    try:
        return list(pynvml.nvmlDeviceGetProcessUtilization(handle, last_seen))
    except pynvml.NVMLError_NotFound:
        # The driver's answer when no process was active since last_seen.
        return []
    except pynvml.NVMLError as exc:
        # pynvml raises NVMLError(SUCCESS) when the size query already succeeds,
        # which happens when the driver has nothing to return.
        if getattr(exc, "value", None) == pynvml.NVML_SUCCESS:
            return []
        raise


class _ProcessInfoV1(ctypes.Structure):
    """``nvmlProcessInfo_v1_t``: drivers before r470 only know this layout."""

    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


class _Proc:
    """A process entry shaped like pynvml's friendly objects."""

    def __init__(self, pid: int, used: int | None) -> None:
        self.pid = pid
        self.usedGpuMemory = used


def compute_processes_v1(handle: Any) -> list[_Proc]:
    """``nvmlDeviceGetComputeRunningProcesses`` (v1 layout) for old drivers.

    nvidia-ml-py ≥ 12 maps the unversioned name to v3 and has no v1 wrapper,
    so this calls the C symbol directly with the v1 struct.
    """
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses")
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == pynvml.NVML_SUCCESS:
        return []
    if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
        raise pynvml.NVMLError(ret)
    count.value = count.value * 2 + 5
    array = (_ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), array)
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    not_available = 0xFFFFFFFFFFFFFFFF
    return [
        _Proc(int(item.pid), None if item.usedGpuMemory == not_available else item.usedGpuMemory)
        for item in array[: count.value]
    ]
