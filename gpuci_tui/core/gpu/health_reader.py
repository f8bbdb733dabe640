"""What NVML says about a GPU's health: counters per sample, Xid events from a thread.

`read_health` reads, for one GPU handle, the facts `GpuHealthReading` carries:
ECC counts, remapped rows and the clocks-event (throttle) reasons (also kept raw,
for the per-job throttle seconds of `job_facts`).
Each call that the board does not support (retired pages on Hopper, ECC on a
consumer card) leaves its field None; all of them together cost well under a
millisecond on a real H100 (0.003-0.25 ms a call, shared/gpu-h100).

`XidWatch` owns one NVML event set registered for Xid-critical-error events
(and ECC events, which only wake it) on every GPU, and waits on it in a daemon
thread with a short timeout, so a wait never stalls the sampler or the event
loop: events are queued per GPU and the sampler drains them into the next
sample. NVML is thread-safe; the watch never holds the sampler's lock while
it waits. A driver without event support is logged once and simply has no
Xid events.

``python bench/nvml_health_probe.py`` on a GPU host prints one frame with its
health readings and the cost of each call.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pynvml

from gpuci_tui.core.gpu_readings import GpuHealthReading, XidEvent

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Calls a device function: (value or None, whether the function is missing).
DeviceCall = Callable[..., tuple[Any, bool]]

SLOWDOWN_BITS: tuple[tuple[str, int], ...] = (
    ("hw_slowdown", 0x8),
    ("sw_thermal", 0x20),
    ("hw_thermal", 0x40),
    ("hw_power_brake", 0x80),
)
"""Clocks-event reasons that mean the GPU is slowed down by its own protection, by name.

Idle (0x1), application clocks, the software power cap (0x4, normal under full
load) and sync boost are not slowdowns of a failing or overheating board.
"""

WAIT_MS = 200
"""How long one event wait blocks; bounds how long `XidWatch.close` takes."""
MAX_QUEUED = 64
"""Xid events kept per GPU between two samples (a storm is summarised, not stored)."""
_EVENT_TYPES = (
    pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
)


def slowdown_names(mask: int) -> tuple[str, ...]:
    """The names of the slowdown reasons set in a clocks-event reasons bitmask."""
    return tuple(name for name, bit in SLOWDOWN_BITS if mask & bit)


def read_health(
    handle: Any, call: DeviceCall, xids: Sequence[XidEvent] = (), *, busy: bool = True
) -> GpuHealthReading:
    """One GPU's health counters; a lost GPU is reported by the caller, not here.

    ``busy``: a process runs on the GPU; only then is the corrected ECC counter read
    (only a job's facts use it, as only they use the energy counter).
    """
    unc = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    volatile, _ = call(pynvml.nvmlDeviceGetTotalEccErrors, handle, unc, pynvml.NVML_VOLATILE_ECC)
    aggregate, _ = call(pynvml.nvmlDeviceGetTotalEccErrors, handle, unc, pynvml.NVML_AGGREGATE_ECC)
    corrected = None
    if busy:  # corrected errors only matter per job (a count rising during one job)
        corr = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        vol = pynvml.NVML_VOLATILE_ECC
        corrected, _ = call(pynvml.nvmlDeviceGetTotalEccErrors, handle, corr, vol)
    rows, _ = call(pynvml.nvmlDeviceGetRemappedRows, handle)
    mask = _clocks_event_mask(handle, call)
    return GpuHealthReading(
        xid_events=tuple(xids),
        ecc_uncorrected_volatile=int(volatile) if volatile is not None else None,
        ecc_uncorrected_aggregate=int(aggregate) if aggregate is not None else None,
        remapped_rows_pending=bool(rows[2]) if rows is not None else None,
        remapped_rows_failed=bool(rows[3]) if rows is not None else None,
        slowdown_reasons=slowdown_names(mask) if mask is not None else (),
        clocks_event_mask=mask,
        ecc_corrected_volatile=int(corrected) if corrected is not None else None,
    )


def _clocks_event_mask(handle: Any, call: DeviceCall) -> int | None:
    # "Throttle" was renamed "clocks event" in CUDA 12.2 drivers; older ones lack the new name.
    mask, missing = call(pynvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
    if missing:
        mask, _ = call(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
    return int(mask) if mask is not None else None


class XidWatch:
    """Xid events of every GPU, collected by a daemon thread that waits on an NVML event set."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """Create the watch; nothing is registered until `start`."""
        self._clock = clock
        self._lock = threading.Lock()
        self._queued: dict[int, list[XidEvent]] = {}
        self._dropped: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set: Any = None
        self._index_of: dict[int, int] = {}
        self.unsupported: str | None = None
        """Why no events are watched (None while they are)."""

    @property
    def running(self) -> bool:
        """Whether the waiting thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, handles: Sequence[Any]) -> None:
        """Register every GPU for Xid (and ECC) events and start waiting; never raises."""
        if self._thread is not None:
            return
        try:
            self._set = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            self._unsupported(f"NVML cannot create an event set ({exc})")
            return
        registered = 0
        for index, handle in enumerate(handles):
            try:
                supported = int(pynvml.nvmlDeviceGetSupportedEventTypes(handle))
                wanted = supported & _EVENT_TYPES
                if wanted & pynvml.nvmlEventTypeXidCriticalError:
                    pynvml.nvmlDeviceRegisterEvents(handle, wanted, self._set)
                    registered += 1
            except pynvml.NVMLError as exc:
                log.info("GPU %d: Xid events cannot be watched (%s)", index, exc)
            self._index_of[_address(handle)] = index
        if registered == 0:
            self._free()
            self._unsupported("no GPU supports Xid events")
            return
        self._thread = threading.Thread(target=self._run, name="nvml-xid-watch", daemon=True)
        self._thread.start()

    def drain(self, index: int) -> tuple[XidEvent, ...]:
        """The Xid events of GPU ``index`` received since the last drain."""
        with self._lock:
            events = self._queued.pop(index, [])
            dropped = self._dropped.pop(index, 0)
        if dropped:
            log.warning("GPU %d: %d more Xid events were not kept", index, dropped)
        return tuple(events)

    def close(self) -> None:
        """Stop waiting (within about `WAIT_MS`) and free the event set."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * WAIT_MS / 1000 + 1)
            self._thread = None
        self._free()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = pynvml.nvmlEventSetWait_v2(self._set, WAIT_MS)
            except pynvml.NVMLError_Timeout:
                continue
            except pynvml.NVMLError as exc:
                # E.g. GPU lost or NVML shut down under us: back off, do not spin.
                log.debug("NVML event wait failed: %s", exc)
                self._stop.wait(WAIT_MS / 1000)
                continue
            if int(data.eventType) & pynvml.nvmlEventTypeXidCriticalError:
                self._queue(self._device_index(data.device), int(data.eventData))

    def _queue(self, index: int | None, xid: int) -> None:
        if index is None:
            return
        event = XidEvent(xid=xid, at=self._clock())
        log.warning("GPU %d raised Xid %d", index, xid)
        with self._lock:
            queued = self._queued.setdefault(index, [])
            if len(queued) < MAX_QUEUED:
                queued.append(event)
            else:
                self._dropped[index] = self._dropped.get(index, 0) + 1

    def _device_index(self, device: Any) -> int | None:
        try:
            return int(pynvml.nvmlDeviceGetIndex(device))
        except pynvml.NVMLError:
            return self._index_of.get(_address(device))

    def _free(self) -> None:
        if self._set is None:
            return
        try:
            pynvml.nvmlEventSetFree(self._set)
        except pynvml.NVMLError as exc:
            log.debug("nvmlEventSetFree failed: %s", exc)
        self._set = None

    def _unsupported(self, why: str) -> None:
        self.unsupported = why
        log.info("GPU Xid events are not watched: %s", why)


def _address(handle: Any) -> int:
    """A device handle's pointer value (the same GPU always has the same handle)."""
    return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)
