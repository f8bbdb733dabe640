"""GPU health: turn the raw facts a sampler reads (`GpuHealthReading`) into faults (pure).

A GPU with a fault gets no new job: its slots are quarantined (see
`gpu_admission.slot_reading`). The rules, chosen as an operator of a shared
lab host would expect:

* **lost** — the GPU fell off the bus, needs a reset, or vanished from the driver's list.
* **xid** — a critical Xid event. Application Xids are skipped exactly as
  NVIDIA's Kubernetes device plugin does (`APPLICATION_XIDS`: 13, 31, 43, 45,
  68, 109): they say a program failed, not the GPU.
* **ecc** — the volatile uncorrectable ECC count rose above the count first
  seen (the baseline): errors that happened before gpuci-tui watched, or
  before the last clear, do not count again.
* **row_remap** — a remapped row is pending (reset needed) or failed (service).
* **slowdown** — hardware slowdown (``hw_slowdown``, ``hw_thermal``,
  ``hw_power_brake``) active for `SUSTAINED_SLOWDOWN` seconds without a break.
* **driver** — the NVIDIA driver and library versions differ (a driver upgrade
  without a reboot): no GPU can run a CUDA job.

Every fault but a slowdown *latches*: it stays until an operator clears it
(`clear`), because a GPU that threw an Xid once is not trusted again by
itself. A slowdown ends by itself when the hardware stops throttling.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from gpuci_tui.core.gpu_readings import GpuFrame, GpuHealthReading, GpuSample
from gpuci_tui.core.wording import plural

#: Xids caused by an application, not the GPU (NVIDIA k8s-device-plugin, internal/rm/health.go).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
#: Seconds of continuous hardware slowdown before a GPU is quarantined.
SUSTAINED_SLOWDOWN = 30.0
HW_SLOWDOWNS = frozenset({"hw_slowdown", "hw_thermal", "hw_power_brake"})
_XID_WORDS = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remap",
    64: "ECC page retirement or row remap failure",
    74: "NVLink error",
    79: "GPU fell off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP timeout",
    120: "GSP error",
}


class Fault(StrEnum):
    """Why a GPU is quarantined; the values are the bounded ``reason`` label of the metrics."""

    LOST = "lost"
    XID = "xid"
    ECC = "ecc"
    ROW_REMAP = "row_remap"
    SLOWDOWN = "slowdown"
    DRIVER = "driver"


@dataclass(frozen=True)
class GpuFault:
    """One fault of one GPU (or of the host's driver)."""

    code: Fault
    reason: str
    """Plain words for the operator, naming the GPU."""
    since: float

    @property
    def latched(self) -> bool:
        """Stays until an operator clears it (everything but a slowdown)."""
        return self.code is not Fault.SLOWDOWN


@dataclass(frozen=True)
class GpuRecord:
    """What the assessment remembers of one GPU between frames."""

    index: int
    uuid: str | None = None
    faults: tuple[GpuFault, ...] = ()
    ecc_baseline: int | None = None
    slowdown_since: float | None = None


@dataclass(frozen=True)
class HealthBook:
    """The health of every GPU seen so far, and of the host's driver."""

    gpus: tuple[GpuRecord, ...] = ()
    driver: GpuFault | None = None

    def record(self, index: int) -> GpuRecord | None:
        """The GPU with NVML index ``index``, or None."""
        return next((g for g in self.gpus if g.index == index), None)

    def faults_of(self, index: int) -> tuple[GpuFault, ...]:
        """The faults that quarantine GPU ``index`` now (the driver's included)."""
        record = self.record(index)
        own = record.faults if record is not None else ()
        return (*own, self.driver) if self.driver is not None else own


@dataclass(frozen=True)
class HealthChange:
    """A fault raised or ended (cleared, or a slowdown that stopped): one event-log line."""

    fault: GpuFault
    raised: bool
    index: int | None = None
    """The GPU; None for the driver."""


@dataclass(frozen=True)
class Assessment:
    """The result of folding one frame."""

    book: HealthBook
    changes: tuple[HealthChange, ...] = ()
    xids: tuple[tuple[int, int], ...] = ()
    """(GPU index, Xid) of every critical Xid in this frame (jobs that ran are marked)."""


def assess(book: HealthBook, frame: GpuFrame) -> Assessment:
    """Fold one frame into the health book."""
    now = frame.taken_at
    changes: list[HealthChange] = []
    driver = book.driver
    if not frame.host.available:
        if driver is None and "mismatch" in frame.host.reason.lower():
            driver = GpuFault(Fault.DRIVER, frame.host.reason, now)
            changes.append(HealthChange(driver, True))
        # Without a frame nothing else can be told: the GPUs keep what they had.
        return Assessment(replace(book, driver=driver), tuple(changes))
    records: list[GpuRecord] = []
    xids: list[tuple[int, int]] = []
    seen: set[int] = set()
    for gpu in frame.gpus:
        seen.add(gpu.index)
        old = _match(book, gpu) or GpuRecord(gpu.index, gpu.uuid)
        new, raised, ended, critical = _fold(old, gpu, now)
        records.append(new)
        changes += [HealthChange(f, True, gpu.index) for f in raised]
        changes += [HealthChange(f, False, gpu.index) for f in ended]
        xids += [(gpu.index, xid) for xid in critical]
    for old in book.gpus:
        if old.index in seen:
            continue
        # A GPU the driver listed before and no longer does fell off the bus.
        gone = GpuFault(Fault.LOST, f"GPU {old.index} is no longer seen by the driver", now)
        if any(f.code is Fault.LOST for f in old.faults):
            records.append(old)
            continue
        records.append(replace(old, faults=(*old.faults, gone)))
        changes.append(HealthChange(gone, True, old.index))
    records.sort(key=lambda r: r.index)
    return Assessment(HealthBook(tuple(records), driver), tuple(changes), tuple(xids))


NO_GPU_WATCH = "this supervisor watches no GPU (no NVIDIA driver, or not a daemon)"
"""Why a ``gpu clear`` cannot be done at all (an in-process supervisor, or no driver)."""


def names_gpu(gpu: str, index: int, uuid: str | None) -> bool:
    """Whether ``gpu`` (an index, a UUID or ``all``) names the GPU ``index``/``uuid``."""
    return gpu == "all" or gpu == str(index) or bool(uuid and gpu == uuid)


def gpu_clear_refusal(gpus: Sequence[tuple[int, str | None]] | None, gpu: str) -> str | None:
    """Why ``gpu clear GPU`` is refused, or None when it may go ahead.

    The one rule for the CLI (through the daemon's preview), the console's
    key and the daemon's GPU watch, so all three refuse in the same words.

    Args:
        gpus: (index, UUID) of each GPU the supervisor knows; None when it
            watches no GPU.
        gpu: What the operator named: an index, a UUID or ``all``.
    """
    if gpus is None:
        return NO_GPU_WATCH
    if any(names_gpu(gpu, index, uuid) for index, uuid in gpus):
        return None
    known = ", ".join(str(index) for index, _ in gpus) or "none seen yet"
    return f"no GPU {gpu!r} (GPUs are {known}, or all)"


def nothing_to_clear(indexes: Iterable[int]) -> str:
    """The answer when the GPUs named are not quarantined (not a refusal: nothing to do)."""
    listed = ", ".join(f"GPU {index}" for index in indexes)
    return f"{listed or 'no GPU'}: not quarantined, nothing to clear"


def clear(book: HealthBook, gpu: str) -> tuple[HealthBook, tuple[HealthChange, ...], bool]:
    """An operator's ``gpu clear GPU``: forget the faults of ``gpu`` (index, UUID or ``all``).

    The ECC baseline is taken again from the next frame, so errors counted
    before the clear do not quarantine the GPU again; a condition that is still
    there (a pending row remap, a lost GPU) is found again in the next frame.

    Returns:
        The new book, the faults cleared, and whether ``gpu`` named a known GPU.
    """
    changes: list[HealthChange] = []
    records: list[GpuRecord] = []
    found = False
    for record in book.gpus:
        if names_gpu(gpu, record.index, record.uuid):
            found = True
            changes += [HealthChange(f, False, record.index) for f in record.faults]
            record = replace(record, faults=(), ecc_baseline=None)
        records.append(record)
    driver = book.driver
    if found and driver is not None:
        changes.append(HealthChange(driver, False))
        driver = None
    return HealthBook(tuple(records), driver), tuple(changes), found


def book_data(book: HealthBook) -> dict[str, object]:
    """The latched faults of ``book`` as JSON data (kept across daemon restarts)."""

    def fault(f: GpuFault) -> dict[str, object]:
        return {"code": f.code.value, "reason": f.reason, "since": f.since}

    return {
        "gpus": [
            {"index": g.index, "uuid": g.uuid, "faults": [fault(f) for f in g.faults if f.latched]}
            for g in book.gpus
            if any(f.latched for f in g.faults)
        ],
        "driver": fault(book.driver) if book.driver is not None else None,
    }


def book_from_data(data: object) -> HealthBook:
    """The inverse of `book_data`; anything malformed is left out (a fresh start, not a crash)."""

    def fault(item: object) -> GpuFault | None:
        if not isinstance(item, dict):
            return None
        try:
            return GpuFault(Fault(item["code"]), str(item["reason"]), float(item["since"]))
        except (KeyError, TypeError, ValueError):
            return None

    if not isinstance(data, dict):
        return HealthBook()
    records = []
    for item in data.get("gpus") or ():
        if not isinstance(item, dict) or not isinstance(item.get("index"), int):
            continue
        faults = tuple(f for f in map(fault, item.get("faults") or ()) if f is not None)
        uuid = item.get("uuid") if isinstance(item.get("uuid"), str) else None
        records.append(GpuRecord(item["index"], uuid, faults))
    return HealthBook(tuple(records), fault(data.get("driver")))


def _match(book: HealthBook, gpu: GpuSample) -> GpuRecord | None:
    if gpu.uuid:
        by_uuid = next((g for g in book.gpus if g.uuid == gpu.uuid), None)
        if by_uuid is not None:
            return replace(by_uuid, index=gpu.index)
    return book.record(gpu.index)


def _fold(
    old: GpuRecord, gpu: GpuSample, now: float
) -> tuple[GpuRecord, list[GpuFault], list[GpuFault], list[int]]:
    """One GPU's record after one sample: (record, faults raised, faults ended, critical Xids)."""
    health = gpu.health or GpuHealthReading()
    found, critical = _faults_now(old, gpu, health, now)
    baseline = old.ecc_baseline
    if baseline is None and health.ecc_uncorrected_volatile is not None:
        baseline = health.ecc_uncorrected_volatile
    slowing = bool(HW_SLOWDOWNS.intersection(health.slowdown_reasons))
    since = None
    if slowing:
        since = old.slowdown_since if old.slowdown_since is not None else now
    if since is not None and now - since >= SUSTAINED_SLOWDOWN:
        names = ", ".join(sorted(HW_SLOWDOWNS.intersection(health.slowdown_reasons)))
        found.append(
            GpuFault(
                Fault.SLOWDOWN,
                f"GPU {gpu.index} in hardware slowdown ({names}) for {now - since:.0f} s",
                since,
            )
        )
    kept = [f for f in old.faults if f.latched or (slowing and f.code is Fault.SLOWDOWN)]
    ended = [f for f in old.faults if f not in kept]
    raised = [f for f in found if not _known(kept, f)]
    record = GpuRecord(gpu.index, gpu.uuid or old.uuid, (*kept, *raised), baseline, since)
    return record, raised, ended, critical


def _faults_now(
    old: GpuRecord, gpu: GpuSample, health: GpuHealthReading, now: float
) -> tuple[list[GpuFault], list[int]]:
    name = f"GPU {gpu.index}"
    found: list[GpuFault] = []
    if health.lost:
        found.append(GpuFault(Fault.LOST, f"{name} fell off the bus (lost)", now))
    if health.reset_required:
        found.append(GpuFault(Fault.LOST, f"{name} needs a reset", now))
    critical = [e.xid for e in health.xid_events if e.xid not in APPLICATION_XIDS]
    for xid in dict.fromkeys(critical):
        words = _XID_WORDS.get(xid)
        what = f" ({words})" if words else ""
        found.append(GpuFault(Fault.XID, f"{name}: Xid {xid}{what}", now))
    count, baseline = health.ecc_uncorrected_volatile, old.ecc_baseline
    if count is not None and baseline is not None and count > baseline:
        found.append(
            GpuFault(
                Fault.ECC,
                f"{name}: {plural(count - baseline, 'new uncorrectable ECC error')}",
                now,
            )
        )
    if health.remapped_rows_failed:
        found.append(GpuFault(Fault.ROW_REMAP, f"{name}: a row remap failed (service it)", now))
    elif health.remapped_rows_pending:
        found.append(
            GpuFault(Fault.ROW_REMAP, f"{name}: a row remap is pending (reset the GPU)", now)
        )
    return found, critical


def _known(faults: Iterable[GpuFault], fault: GpuFault) -> bool:
    """The same fault is already latched (same kind; for Xids, the same text)."""
    for f in faults:
        if f.code is fault.code and (fault.code is not Fault.XID or f.reason == fault.reason):
            return True
    return False
