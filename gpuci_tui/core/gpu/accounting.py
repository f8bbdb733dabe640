"""Per-job GPU accounting: fold GPU frames into statistics for the jobs that own the processes.

The chain is NVML host PID → ``/proc/<pid>/cgroup`` → Docker container id
(`cgroups`, already done by `NvmlSampler`; repeated here for a process the
sampler could not map) → the job the caller says runs in that container.
The caller (the supervisor) builds that ``owners`` map from its own state at
each sample; nothing here talks to Docker or Azure DevOps.

`JobAccountant` never samples: it only folds the frames it is given, at most
one per ``min_interval`` (the ``[gpu] sample_interval``), so the cost is one
NVML sweep per interval for the whole host whatever the number of jobs.

Rules, chosen so that a number shown is never someone else's:

- Processes of containers not in ``owners`` and host processes are never
  counted against a job; `foreign_processes` lists them for the console.
- Utilisation is the job's processes' SM % summed per GPU (capped at 100),
  averaged over the job's GPUs in that sample. When the driver has no
  per-process figure, the GPU's own utilisation is used only if the job is
  alone on that GPU in that sample; otherwise the sample has no value.
- Peak memory is the largest sum of the job's processes' GPU memory (all
  GPUs) in one sample.
- Energy is the GPU energy counter's increase between the first and the last
  sample in which the job held each GPU, summed over its GPUs, and only when
  no other process (another job's included) was on any of them in that
  window; otherwise it is None and `JobGpuStats.energy_note` says why.
- Throttle seconds, ECC errors and peak temperature: `job_facts`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuci_tui.core.docker.cgroups import PROC_ROOT, container_id_of_pid
from gpuci_tui.core.gpu.job_facts import FactsWindow, JobFacts, combine
from gpuci_tui.core.gpu_readings import GpuFrame, GpuProcess, GpuSample, JobGpuNow
from gpuci_tui.core.models import SupervisorSnapshot

ENERGY_SHARED = "GPU shared with another process during the job"
ENERGY_NOT_REPORTED = "the driver does not report the GPU energy counter"
ENERGY_COUNTER_RESET = "the GPU energy counter was reset during the job (driver reloaded)"
ENERGY_ONE_SAMPLE = "seen in one sample only"
ENERGY_NOT_SEEN = "no GPU process of the job was seen"

_MIN_INTERVAL_SLACK = 0.9
"""A frame is folded when at least 90 % of ``min_interval`` passed since the last one,
so a loop that samples every ``min_interval`` with some jitter never loses every other frame."""


@dataclass(frozen=True)
class JobKey:
    """Identifies one job: a single-job agent container of one slot of one supervisor."""

    instance: str
    """The supervisor's instance id (organisation + pool + name prefix)."""
    slot: int
    agent: str
    """Agent and container name, ``{name_prefix}-{slot}``."""
    request_id: int | None = None
    """Azure DevOps job request id, when known."""


@dataclass(frozen=True)
class JobGpuStats:
    """What one job did with the GPUs, so far (`JobAccountant.live`) or in all (`finish`).

    None means "not known": no sample had the value, not zero.
    """

    key: JobKey
    gpu_indexes: tuple[int, ...] = ()
    """NVML indexes of the GPUs the job's processes were seen on, ascending."""
    gpu_uuids: tuple[str, ...] = ()
    samples: int = 0
    """Folded frames in which at least one of the job's processes was on a GPU."""
    first_seen: float | None = None
    """Unix time of the first such frame."""
    last_seen: float | None = None
    peak_memory_mib: float | None = None
    mean_util_pct: float | None = None
    """Mean over the samples that had a utilisation value (samples are ~evenly spaced)."""
    peak_util_pct: float | None = None
    energy_j: float | None = None
    energy_note: str = ""
    """Empty when ``energy_j`` was measured, else why it is None (an ``ENERGY_*`` text)."""
    shared: bool = False
    """Another process used one of the job's GPUs while the job held it."""
    facts: JobFacts = JobFacts()
    """Throttle seconds, ECC errors and peak temperature during the job."""


@dataclass
class _GpuWindow:
    """One job on one GPU: from its first to its last sample there."""

    index: int
    uuid: str | None
    first_at: float
    last_at: float
    first_energy: int | None
    last_energy: int | None
    energy_missing: bool = False
    other_since: float | None = None
    """Time of the first frame, from ``first_at`` on, with another process on this GPU."""
    facts: FactsWindow = field(default_factory=FactsWindow)


@dataclass
class _Job:
    key: JobKey
    gpus: dict[str, _GpuWindow] = field(default_factory=dict)
    samples: int = 0
    first_seen: float | None = None
    last_seen: float | None = None
    peak_memory: float | None = None
    util_sum: float = 0.0
    util_count: int = 0
    util_peak: float | None = None


class JobAccountant:
    """Folds `GpuFrame`s into per-job `JobGpuStats`; thread-safe."""

    def __init__(self, *, min_interval: float = 1.0, proc_root: Path = PROC_ROOT) -> None:
        """Create an accountant with no jobs.

        Args:
            min_interval: Frames closer than this (seconds, less 10 % jitter
                slack) to the previously folded one are skipped, so feeding
                the console's faster frames cannot inflate the cost or skew
                the means. ``[gpu] sample_interval`` in the configuration.
            proc_root: Where procfs is mounted (PID → container for processes
                the sampler left unmapped).
        """
        self._min_interval = min_interval
        self._proc_root = proc_root
        self._jobs: dict[JobKey, _Job] = {}
        self._last_folded: float | None = None
        self._now: dict[JobKey, JobGpuNow] = {}
        self._lock = threading.Lock()

    def observe(self, frame: GpuFrame, owners: Mapping[str, JobKey]) -> bool:
        """Fold one frame.

        Args:
            frame: A sample of all GPUs.
            owners: Container id (64 hex) → the job running in that container,
                for every container the caller supervises at this instant.

        Returns:
            Whether the frame was folded (False: too soon after the previous
            one, or no GPU visible).
        """
        with self._lock:
            last = self._last_folded
            due = last is None or frame.taken_at < last
            if not due and last is not None:
                due = frame.taken_at - last >= self._min_interval * _MIN_INTERVAL_SLACK
            if not frame.host.available:
                # No GPU visible now: a figure from an older frame would be a stale lie.
                self._now = {}
                return False
            if not due:
                return False
            self._last_folded = frame.taken_at
            self._fold(frame, owners)
            return True

    def live(self, key: JobKey) -> JobGpuStats | None:
        """The job's statistics so far, or None when none of its processes was seen yet."""
        with self._lock:
            job = self._jobs.get(key)
            return _stats(job) if job is not None else None

    def finish(self, key: JobKey) -> JobGpuStats:
        """The job's final statistics; the job is forgotten.

        A job never seen on a GPU gets empty statistics (``samples == 0``) with
        `ENERGY_NOT_SEEN` as the energy note.
        """
        with self._lock:
            job = self._jobs.pop(key, None)
        if job is None:
            return JobGpuStats(key=key, energy_note=ENERGY_NOT_SEEN)
        return _stats(job)

    def current(self, key: JobKey) -> JobGpuNow | None:
        """The job's use in the latest folded frame; None when it was not seen on a GPU then."""
        with self._lock:
            return self._now.get(key)

    def clear_current(self) -> None:
        """Forget the latest frame's figures (sampling failed: they would go stale)."""
        with self._lock:
            self._now = {}

    def discard(self, key: JobKey) -> None:
        """Forget a job without computing its statistics (e.g. its slot was removed)."""
        with self._lock:
            self._jobs.pop(key, None)

    def jobs(self) -> tuple[JobKey, ...]:
        """The jobs being accounted (seen on a GPU and not finished)."""
        with self._lock:
            return tuple(self._jobs)

    # ------------------------------------------------------------------ folding

    def _fold(self, frame: GpuFrame, owners: Mapping[str, JobKey]) -> None:
        now = frame.taken_at
        memory: dict[JobKey, float] = {}
        utils: dict[JobKey, list[float]] = {}
        seen: set[JobKey] = set()
        for gpu in frame.gpus:
            by_job = _split(gpu.processes, owners, self._proc_root)
            gkey = gpu.uuid or f"#{gpu.index}"
            for key, procs in by_job.items():
                if key is None:
                    continue
                job = self._jobs.setdefault(key, _Job(key))
                seen.add(key)
                _extend_window(job, gkey, gpu, now)
                used = [p.used_memory_mib for p in procs if p.used_memory_mib is not None]
                if used:
                    memory[key] = memory.get(key, 0.0) + sum(used)
                util = _gpu_util(gpu, procs, alone=len(by_job) == 1)
                if util is not None:
                    utils.setdefault(key, []).append(util)
            # Sharing: any process on this GPU that is not the job's, while
            # the job's window on it is open (it may have left meanwhile).
            for job in self._jobs.values():
                window = job.gpus.get(gkey)
                if window is None:
                    continue
                # At most two intervals per frame: a stalled sampler is not minutes of throttle.
                window.facts.fold(gpu, now, max(2 * self._min_interval, 1.0))
                if window.other_since is None and any(k != job.key for k in by_job):
                    window.other_since = now
        now_figures: dict[JobKey, JobGpuNow] = {}
        for key in seen:
            util_now = sum(utils[key]) / len(utils[key]) if key in utils else None
            now_figures[key] = JobGpuNow(memory.get(key), util_now, now)
            job = self._jobs[key]
            job.samples += 1
            job.first_seen = now if job.first_seen is None else job.first_seen
            job.last_seen = now
            if key in memory:
                job.peak_memory = max(job.peak_memory or 0.0, memory[key])
            if util_now is not None:
                job.util_sum += util_now
                job.util_count += 1
                job.util_peak = util_now if job.util_peak is None else max(job.util_peak, util_now)
        self._now = now_figures


def _split(
    procs: tuple[GpuProcess, ...], owners: Mapping[str, JobKey], proc_root: Path
) -> dict[JobKey | None, list[GpuProcess]]:
    """The processes of one GPU grouped by owning job (None: not ours)."""
    out: dict[JobKey | None, list[GpuProcess]] = {}
    for proc in procs:
        out.setdefault(owner_of(proc, owners, proc_root), []).append(proc)
    return out


def owner_of(
    proc: GpuProcess, owners: Mapping[str, JobKey], proc_root: Path = PROC_ROOT
) -> JobKey | None:
    """The job a GPU process belongs to, or None (host process, foreign container, gone).

    Uses the container id the sampler found, else reads ``/proc/<pid>/cgroup``
    itself (a sampler that does not map PIDs, or a process that was not yet
    readable when the sampler looked).
    """
    cid = proc.container_id or container_id_of_pid(proc.pid, proc_root)
    return owners.get(cid) if cid else None


def _extend_window(job: _Job, gkey: str, gpu: GpuSample, now: float) -> None:
    window = job.gpus.get(gkey)
    if window is None:
        job.gpus[gkey] = _GpuWindow(
            index=gpu.index,
            uuid=gpu.uuid,
            first_at=now,
            last_at=now,
            first_energy=gpu.energy_mj,
            last_energy=gpu.energy_mj,
            energy_missing=gpu.energy_mj is None,
        )
        return
    window.index = gpu.index
    window.last_at = now
    if gpu.energy_mj is None:
        window.energy_missing = True
    else:
        window.last_energy = gpu.energy_mj


def _gpu_util(gpu: GpuSample, procs: list[GpuProcess], *, alone: bool) -> float | None:
    """The job's utilisation of one GPU in one sample (see the module rules)."""
    values = [p.sm_util_pct for p in procs]
    if values and all(v is not None for v in values):
        return min(100.0, sum(v for v in values if v is not None))
    if alone and gpu.utilization_pct is not None:
        return gpu.utilization_pct
    return None


def _stats(job: _Job) -> JobGpuStats:
    windows = sorted(job.gpus.values(), key=lambda w: w.index)
    shared = any(w.other_since is not None and w.other_since <= w.last_at for w in windows)
    energy, note = _energy(job, windows, shared)
    return JobGpuStats(
        key=job.key,
        gpu_indexes=tuple(w.index for w in windows),
        gpu_uuids=tuple(w.uuid for w in windows if w.uuid),
        samples=job.samples,
        first_seen=job.first_seen,
        last_seen=job.last_seen,
        peak_memory_mib=job.peak_memory,
        mean_util_pct=job.util_sum / job.util_count if job.util_count else None,
        peak_util_pct=job.util_peak,
        energy_j=energy,
        energy_note=note,
        shared=shared,
        facts=combine(w.facts for w in windows),
    )


def _energy(job: _Job, windows: list[_GpuWindow], shared: bool) -> tuple[float | None, str]:
    if not windows:
        return None, ENERGY_NOT_SEEN
    if shared:
        return None, ENERGY_SHARED
    if any(w.energy_missing for w in windows):
        return None, ENERGY_NOT_REPORTED
    if job.samples < 2:
        return None, ENERGY_ONE_SAMPLE
    total = 0
    for w in windows:
        assert w.first_energy is not None and w.last_energy is not None  # noqa: S101
        if w.last_energy < w.first_energy:
            return None, ENERGY_COUNTER_RESET
        total += w.last_energy - w.first_energy
    return total / 1000.0, ""


def foreign_processes(
    frame: GpuFrame, owners: Mapping[str, JobKey], *, proc_root: Path = PROC_ROOT
) -> dict[int, tuple[GpuProcess, ...]]:
    """The processes on each GPU that belong to none of our jobs.

    Host processes (``container_id`` None) and other containers' processes;
    the console shows them as foreign, and the accountant never counts them.

    Returns:
        GPU index → its foreign processes, only for GPUs that have some.
    """
    out: dict[int, tuple[GpuProcess, ...]] = {}
    for gpu in frame.gpus:
        others = tuple(p for p in gpu.processes if owner_of(p, owners, proc_root) is None)
        if others:
            out[gpu.index] = others
    return out


def key_of(instance: str, slot: int, agent: str) -> JobKey:
    """The accounting key of the job of ``agent``'s current container.

    An agent runs at most one job, so a container *is* a job; keyed by its
    lane's agent name, the job is found again when its container exits.
    """
    return JobKey(instance, slot, agent)


def container_owners(snapshot: SupervisorSnapshot) -> dict[str, JobKey]:
    """Container id → job key for every agent container (both lanes) of a snapshot.

    The one map from a snapshot to the owners of GPU processes: the GPU watch
    (accounting and gates) and the console's GPU panel both read it.
    """
    owners: dict[str, JobKey] = {}
    for slot in snapshot.slots:
        for agent in slot.agents:
            if agent.container_id:
                owners[agent.container_id] = key_of(snapshot.instance, slot.slot, agent.name)
        if slot.container_id and slot.container_id not in owners:
            owners[slot.container_id] = key_of(snapshot.instance, slot.slot, slot.name)
    return owners
