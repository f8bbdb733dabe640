"""The daemon's GPU gatekeeper: one NVML frame → health, admission, each slot's gate.

`GpuWatch` hands every frame here (one NVML pass per sample, whatever the
number of groups). The gatekeeper keeps the host's `HealthBook` (faults latch
here, across frames), tells each group's supervisor what its slots' GPUs say
(`GateFeed.observe_gpus`: the engine decides what to do with it), reports
faults raised and ended to the event log, and carries out ``gpu clear``.

Which processes are ours: those of any agent container of this daemon, of any
group, idle or busy (`accounting.owner_of`, which also maps a process the
sampler could not place by its cgroup).

Latched faults are kept in a small JSON file (``store``), so a quarantined GPU
stays quarantined across a restart of the daemon until an operator clears it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from gpuci_tui.core.command_types import CommandResult, GpuClear
from gpuci_tui.core.docker.cgroups import PROC_ROOT
from gpuci_tui.core.engine.gpu_admission import FOREIGN_PROCESS, GpuAdmission, verdict
from gpuci_tui.core.engine.gpu_health import (
    NO_GPU_WATCH,
    HealthBook,
    HealthChange,
    assess,
    book_data,
    book_from_data,
    clear,
    gpu_clear_refusal,
    names_gpu,
    nothing_to_clear,
)
from gpuci_tui.core.files import atomic_write
from gpuci_tui.core.gpu.accounting import JobKey, owner_of
from gpuci_tui.core.gpu_readings import GpuFrame, GpuProcess
from gpuci_tui.core.models import GpuGateSnapshot

log = logging.getLogger("gpuci_tui.gpu")

Ours = Callable[[GpuProcess], bool]


class GateFeed(Protocol):
    """A group's supervisor, as the gatekeeper sees it."""

    @property
    def gpu_admission(self) -> GpuAdmission:
        """The group's admission rule."""
        ...

    def slot_gpu_ids(self) -> set[str]:
        """Every GPU id (index or UUID) its slots use; ``all`` for every GPU."""
        ...

    def observe_gpus(
        self,
        frame: GpuFrame,
        book: HealthBook,
        xids: tuple[tuple[int, int], ...],
        ours: Ours,
        cleared: frozenset[str] = frozenset(),
    ) -> None:
        """Fold one frame into its slots' gates (delivered to its loop).

        ``cleared``: ids (index, UUID, or ``all``) of the GPUs an operator has just
        cleared: their slots are released at once, with no hold-down.
        """
        ...


class GpuGatekeeper:
    """Holds the host's GPU health and feeds each group's engine."""

    def __init__(
        self,
        feeds: Callable[[], Iterable[GateFeed]],
        report: Callable[[str, str], None],
        *,
        proc_root: Path = PROC_ROOT,
        store: Path | None = None,
    ) -> None:
        """Feed what ``feeds()`` gives; ``report(kind, message)`` writes the event log.

        ``feeds`` is asked at each frame, so the gatekeeper exists before the
        supervisors it feeds: they are given it when they are constructed.
        ``store``: where latched faults are kept across restarts (None: not kept).
        """
        self.feeds = feeds
        self.report = report
        self.proc_root = proc_root
        self.store = store
        self.book = self._load()
        self.gates: tuple[GpuGateSnapshot, ...] = ()
        self._latest: tuple[GpuFrame, Ours] | None = None

    def observe(self, frame: GpuFrame, owners: Mapping[str, JobKey]) -> None:
        """One frame: assess health, then feed every group."""
        result = assess(self.book, frame)
        self.book = result.book
        if any(change.fault.latched for change in result.changes):
            self._save()
        for change in result.changes:
            where = "the driver" if change.index is None else f"GPU {change.index}"
            if change.raised:
                self.report("gpu_fault", f"{where}: {change.fault.reason}")
            else:
                self.report("gpu_fault_ended", f"{where}: ended: {change.fault.reason}")

        def ours(process: GpuProcess) -> bool:
            return owner_of(process, owners, self.proc_root) is not None

        self._latest = (frame, ours)
        self._feed(frame, result.xids, ours)

    def clear(self, gpu: str) -> CommandResult:
        """``gpu clear GPU``: forget its latched faults; its slots are released at once."""
        gpu = gpu.strip()
        problem = gpu_clear_refusal([(g.index, g.uuid) for g in self.book.gpus], gpu)
        if problem is not None:
            return CommandResult(False, problem)
        book, cleared, _found = clear(self.book, gpu)
        self.book = book
        self._save()
        if not cleared:
            named = (g.index for g in self.book.gpus if names_gpu(gpu, g.index, g.uuid))
            return CommandResult(True, nothing_to_clear(named))
        words = "; ".join(c.fault.reason for c in cleared)
        self.report("gpu_cleared", f"cleared by the operator: {words}")
        if self._latest is not None:
            # Release now, not at the next sample: the faults are the only thing that changed;
            # and not after a flapping GPU's hold-down either: the operator checked the GPU.
            frame, ours = self._latest
            self._feed(frame, (), ours, _cleared_ids(cleared, book))
        return CommandResult(True, f"cleared: {words}")

    def _load(self) -> HealthBook:
        if self.store is None:
            return HealthBook()
        try:
            book = book_from_data(json.loads(self.store.read_text()))
        except (OSError, ValueError):
            return HealthBook()
        for record in book.gpus:
            for fault in record.faults:
                self.report("gpu_fault", f"GPU {record.index}: still quarantined: {fault.reason}")
        return book

    def _save(self) -> None:
        if self.store is None:
            return
        try:
            self.store.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.store, json.dumps(book_data(self.book)))
        except OSError as exc:  # the quarantine still holds in memory
            log.warning("could not keep the GPU faults in %s: %s", self.store, exc)

    def _feed(
        self,
        frame: GpuFrame,
        xids: tuple[tuple[int, int], ...],
        ours: Ours,
        cleared: frozenset[str] = frozenset(),
    ) -> None:
        feeds = list(self.feeds())
        for feed in feeds:
            try:
                feed.observe_gpus(frame, self.book, xids, ours, cleared)
            except Exception:  # noqa: BLE001 - one group's bug must not blind the others
                log.exception("could not feed the GPU gates")
        self.gates = gpu_gates(frame, self.book, feeds, ours)


def _cleared_ids(cleared: Sequence[HealthChange], book: HealthBook) -> frozenset[str]:
    """The ids (index and UUID) of the GPUs whose faults were cleared; ``all`` for the driver's."""
    ids: set[str] = set()
    for change in cleared:
        if change.index is None:
            ids.add("all")
            continue
        ids.add(str(change.index))
        ids.update(r.uuid for r in book.gpus if r.index == change.index and r.uuid)
    return frozenset(ids)


def gpu_gates(
    frame: GpuFrame, book: HealthBook, feeds: Sequence[GateFeed], ours: Ours
) -> tuple[GpuGateSnapshot, ...]:
    """Every GPU's state for the console: quarantined, held under a group's rule using it, or ok."""
    out: list[GpuGateSnapshot] = []
    for gpu in frame.gpus:
        faults = book.faults_of(gpu.index)
        if faults:
            first = faults[0]
            out.append(
                GpuGateSnapshot(gpu.index, gpu.uuid, "quarantined", first.reason, first.code.value)
            )
            continue
        ids = {str(gpu.index), gpu.uuid or ""}
        why = None
        for feed in feeds:
            used = feed.slot_gpu_ids()
            if "all" in used or ids & used:
                why = why or verdict(gpu, feed.gpu_admission, ours)
        if why is not None:
            out.append(GpuGateSnapshot(gpu.index, gpu.uuid, "held", why, FOREIGN_PROCESS))
        else:
            out.append(GpuGateSnapshot(gpu.index, gpu.uuid))
    return tuple(out)


def clear_gpu(gatekeeper: GpuGatekeeper | None, command: GpuClear) -> CommandResult:
    """``gpu clear``: the GPU watch holds the faults, not the engine."""
    if gatekeeper is None:
        return CommandResult(False, NO_GPU_WATCH)
    return gatekeeper.clear(command.gpu)
