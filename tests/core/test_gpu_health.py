"""The pure GPU health assessment and the admission verdict: readings in, faults and gates out."""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.gpu_admission import (
    FOREIGN_PROCESS,
    GateKind,
    GpuAdmission,
    slot_reading,
    verdict,
)
from gpuci_tui.core.engine.gpu_health import (
    APPLICATION_XIDS,
    SUSTAINED_SLOWDOWN,
    HealthBook,
    assess,
    clear,
)
from gpuci_tui.core.gpu_readings import (
    GpuFrame,
    GpuHealthReading,
    GpuHostInfo,
    GpuProcess,
    GpuSample,
    XidEvent,
)

HOST = GpuHostInfo(available=True, gpu_count=2)
OURS = "c" * 64


def frame(
    at: float, *healths: GpuHealthReading | None, procs: tuple[GpuProcess, ...] = ()
) -> GpuFrame:
    gpus = tuple(
        GpuSample(i, "H100", uuid=f"GPU-{i}", health=h, processes=procs if i == 0 else ())
        for i, h in enumerate(healths)
    )
    return GpuFrame(at, HOST, gpus)


def run(*frames: GpuFrame, book: HealthBook | None = None) -> HealthBook:
    book = book or HealthBook()
    for f in frames:
        book = assess(book, f).book
    return book


def codes(book: HealthBook, index: int = 0) -> list[str]:
    return [f.code.value for f in book.faults_of(index)]


def test_the_application_xids_are_nvidias() -> None:
    # NVIDIA/k8s-device-plugin internal/rm/health.go, ignoredXids.
    assert frozenset({13, 31, 43, 45, 68, 109}) == APPLICATION_XIDS


@pytest.mark.parametrize("xid", sorted(APPLICATION_XIDS))
def test_application_xids_do_not_quarantine(xid: int) -> None:
    book = run(frame(1.0, GpuHealthReading(xid_events=(XidEvent(xid, 1.0),))))
    assert codes(book) == []


def test_critical_xid_latches_until_cleared_and_is_reported_once() -> None:
    first = assess(
        HealthBook(), frame(1.0, GpuHealthReading(xid_events=(XidEvent(79, 1.0),)), None)
    )
    assert first.xids == ((0, 79),)
    assert [c.fault.reason for c in first.changes] == ["GPU 0: Xid 79 (GPU fell off the bus)"]
    later = assess(first.book, frame(2.0, GpuHealthReading(), None))
    assert later.changes == () and codes(later.book) == ["xid"] and codes(later.book, 1) == []
    book, cleared, found = clear(later.book, "GPU-0")
    assert found and [c.raised for c in cleared] == [False] and codes(book) == []
    assert clear(book, "7")[2] is False


def test_ecc_counts_only_errors_after_the_baseline() -> None:
    seen = [GpuHealthReading(ecc_uncorrected_volatile=n) for n in (4, 4)]
    assert codes(run(frame(1.0, seen[0]), frame(2.0, seen[1]))) == []
    book = run(frame(1.0, seen[0]), frame(2.0, GpuHealthReading(ecc_uncorrected_volatile=6)))
    assert [f.reason for f in book.faults_of(0)] == ["GPU 0: 2 new uncorrectable ECC errors"]
    # Cleared: the next frame is the new baseline, so the same count does not come back.
    book = clear(book, "0")[0]
    assert codes(run(frame(3.0, GpuHealthReading(ecc_uncorrected_volatile=6)), book=book)) == []


@pytest.mark.parametrize(
    ("reading", "code"),
    [
        (GpuHealthReading(lost=True), "lost"),
        (GpuHealthReading(reset_required=True), "lost"),
        (GpuHealthReading(remapped_rows_pending=True), "row_remap"),
        (GpuHealthReading(remapped_rows_failed=True), "row_remap"),
    ],
)
def test_latching_faults(reading: GpuHealthReading, code: str) -> None:
    book = run(frame(1.0, reading), frame(2.0, GpuHealthReading()))
    assert codes(book) == [code]


def test_sustained_slowdown_quarantines_and_ends_by_itself() -> None:
    slow = GpuHealthReading(slowdown_reasons=("hw_thermal",))
    frames = [frame(t, slow) for t in (0.0, 10.0, SUSTAINED_SLOWDOWN - 1)]
    assert codes(run(*frames)) == []
    book = run(*frames, frame(SUSTAINED_SLOWDOWN, slow))
    assert codes(book) == ["slowdown"]
    after = assess(book, frame(SUSTAINED_SLOWDOWN + 1, GpuHealthReading()))
    assert codes(after.book) == [] and [c.raised for c in after.changes] == [False]


def test_a_break_in_the_slowdown_restarts_the_count() -> None:
    slow = GpuHealthReading(slowdown_reasons=("hw_power_brake",))
    book = run(
        frame(0.0, slow), frame(20.0, GpuHealthReading()), frame(25.0, slow), frame(40.0, slow)
    )
    assert codes(book) == []
    # Software thermal slowdown is the driver's own policy, not a failing GPU.
    sw = GpuHealthReading(slowdown_reasons=("sw_thermal",))
    assert codes(run(frame(0.0, sw), frame(100.0, sw))) == []


def test_driver_mismatch_quarantines_every_gpu_until_cleared() -> None:
    mismatch = GpuHostInfo(False, reason="NVIDIA driver/library version mismatch: reboot")
    book = run(frame(1.0, None, None), GpuFrame(2.0, mismatch))
    assert codes(book, 0) == ["driver"] and codes(book, 1) == ["driver"]
    assert codes(clear(book, "all")[0], 1) == []


def test_a_gpu_that_vanishes_is_lost() -> None:
    book = run(frame(1.0, None, None), frame(2.0, None))
    assert codes(book, 1) == ["lost"] and codes(book, 0) == []


# --------------------------------------------------------------------------- admission


def proc(pid: int, gb: float, cid: str | None = None, util: float | None = None) -> GpuProcess:
    return GpuProcess(pid, gb * 1024, "python", container_id=cid, sm_util_pct=util)


def ours(p: GpuProcess) -> bool:
    return p.container_id == OURS


@pytest.mark.parametrize(
    ("rule", "procs", "expected"),
    [
        (GpuAdmission("exclusive"), (), None),
        (GpuAdmission("exclusive"), (proc(1, 30, OURS),), None),
        (
            GpuAdmission("exclusive"),
            (proc(4242, 61), proc(7, 1)),
            "GPU 0 used by pid 4242 python, 61 GB and 1 more, not ours",
        ),
        (GpuAdmission("off"), (proc(4242, 61),), None),
        (GpuAdmission("limits", 8192.0, "8GiB", 20.0), (proc(5, 2, util=5.0),), None),
        (
            GpuAdmission("limits", 8192.0, "8GiB", None),
            (proc(4242, 61),),
            "GPU 0 used by pid 4242 python, 61 GB, not ours (61 GB > 8GiB allowed)",
        ),
        (
            GpuAdmission("limits", None, "", 20.0),
            (proc(5, 2, util=50.0),),
            "GPU 0 used by pid 5 python, 2.0 GB, not ours (50 % > 20 % allowed)",
        ),
    ],
)
def test_verdict(rule: GpuAdmission, procs: tuple[GpuProcess, ...], expected: str | None) -> None:
    assert verdict(GpuSample(0, "H100", processes=procs), rule, ours) == expected


def test_slot_reading_quarantine_beats_held_and_names_the_slots_gpus() -> None:
    rule = GpuAdmission()
    busy = frame(1.0, GpuHealthReading(), GpuHealthReading(), procs=(proc(4242, 61),))
    book = assess(HealthBook(), busy).book
    held = slot_reading(("0",), busy, book, rule, ours)
    assert (held.kind, held.code) == (GateKind.HELD, FOREIGN_PROCESS)
    assert slot_reading(("GPU-1",), busy, book, rule, ours).kind is GateKind.OPEN
    assert slot_reading("none", busy, book, rule, ours).kind is GateKind.OPEN
    assert slot_reading("all", busy, book, rule, ours).kind is GateKind.HELD
    xid = frame(
        2.0,
        GpuHealthReading(xid_events=(XidEvent(48, 2.0),)),
        GpuHealthReading(),
        procs=(proc(4242, 61),),
    )
    result = assess(book, xid)
    gate = slot_reading(("0",), xid, result.book, rule, ours, result.xids)
    assert (gate.kind, gate.code, gate.xids) == (GateKind.QUARANTINED, "xid", (48,))
    assert slot_reading(("9",), xid, result.book, rule, ours).code == "lost"
