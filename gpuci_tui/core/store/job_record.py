"""One finished job as the history keeps it (`JobRecord`), its queries, and its row form.

The data of `history`: `JobHistory` writes and reads these; ``gpuci-tui history``,
the console and the recorder build and show them. `to_sql`/`from_row` convert a
record to the columns of `schema` and back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.config.file import is_ascii_number
from gpuci_tui.core.gpu.job_facts import summary, throttle_from_json, throttle_to_json
from gpuci_tui.core.secrets.redaction import redact
from gpuci_tui.core.store import schema

if TYPE_CHECKING:
    from gpuci_tui.core.gpu.accounting import JobGpuStats

FAILED_RESULTS = ("failed", "canceled", "abandoned")
"""Azure DevOps job results that count as failed (besides an OOM kill or a non-zero exit)."""


@dataclass(frozen=True)
class JobRecord:
    """One finished job. None means "not known" (e.g. no GPU process was seen)."""

    instance: str
    slot: int
    agent: str
    request_id: int | None
    pipeline: str | None
    run: str | None
    started_at: float | None
    """Unix time the agent container started."""
    ended_at: float
    exit_code: int | None
    oom: bool
    reason: str
    result: str | None = None
    """Azure DevOps job result: succeeded, succeededWithIssues, failed, canceled, …"""
    queue_wait_s: float | None = None
    """Seconds from queueing to assignment to an agent."""
    duration_s: float | None = None
    """Seconds the job ran; when not given, the container's life (``ended_at - started_at``)."""
    gpus: tuple[int, ...] = ()
    """Indexes of the GPUs the job's processes used."""
    gpu_samples: int = 0
    peak_gpu_memory_mib: float | None = None
    mean_util_pct: float | None = None
    peak_util_pct: float | None = None
    energy_j: float | None = None
    energy_note: str = ""
    """Why ``energy_j`` is None (e.g. the GPU was shared); empty when measured."""
    xid: tuple[int, ...] = ()
    """Critical Xids the job's GPU raised while it ran (its failure may be the GPU's)."""
    image: str | None = None
    """The image reference the job's container was created from (None: not recorded)."""
    image_id: str | None = None
    """The id of the image the job ran on (``sha256:…``; None: not known)."""
    repo_digest: str | None = None
    """That image's registry digest (``REPO@sha256:…``; None: none or not known)."""
    throttle_s: tuple[tuple[str, float], ...] | None = None
    """Seconds per clocks-event (throttle) reason during the job (`gpu.job_facts`)."""
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    """ECC errors the job's GPUs counted while it ran."""
    peak_temp_c: float | None = None
    startup_s: float | None = None
    """Seconds its agent took to start: container start to online (None: not measured)."""
    reconciled: bool = False
    """Recorded from the organisation's finished requests, without a live observation of
    the job (the daemon was not running when it ended): no container facts, no GPU figures."""
    assigned_at: float | None = None
    finished_at: float | None = None
    """The request's assignment and finish as the organisation timed them (Unix; None: its
    view was not read)."""
    id: int | None = None
    """The row id, set on records read back from the history."""

    @property
    def failed(self) -> bool:
        """OOM-killed, a failed/canceled/abandoned result, or no result and a non-zero exit."""
        if self.oom or (self.result or "").lower() in FAILED_RESULTS:
            return True
        return self.result is None and self.exit_code not in (None, 0)

    def with_gpu(self, stats: JobGpuStats) -> JobRecord:
        """This record with the GPU fields taken from `JobAccountant.finish`'s statistics."""
        return dataclasses.replace(
            self,
            gpus=stats.gpu_indexes,
            gpu_samples=stats.samples,
            peak_gpu_memory_mib=stats.peak_memory_mib,
            mean_util_pct=stats.mean_util_pct,
            peak_util_pct=stats.peak_util_pct,
            energy_j=stats.energy_j,
            energy_note=stats.energy_note,
            throttle_s=stats.facts.throttle_s,
            ecc_corrected=stats.facts.ecc_corrected,
            ecc_uncorrected=stats.facts.ecc_uncorrected,
            peak_temp_c=stats.facts.peak_temp_c,
        )

    @property
    def gpu_facts(self) -> str:
        """The job's GPU facts in one compact line ("412 kJ · thermal 12 s · Xid 79 · 83 °C")."""
        ecc = (self.ecc_corrected, self.ecc_uncorrected)
        return summary(self.energy_j, self.throttle_s, ecc, self.xid, self.peak_temp_c)


@dataclass(frozen=True)
class JobQuery:
    """Filters for `JobHistory.query` / `read_history`; results are newest first."""

    instance: str | None = None
    pipeline: str | None = None
    """Exact pipeline (definition) name."""
    since: float | None = None
    """Only jobs that ended at or after this Unix time."""
    slot: int | None = None
    failed_only: bool = False
    """See `JobRecord.failed`."""
    succeeded_only: bool = False
    """Only jobs that did not fail (the opposite of ``failed_only``)."""
    pipeline_contains: str | None = None
    """Pipeline names containing this text, in any case (the console's filter box)."""
    limit: int | None = 50
    """At most this many rows; None for all."""


def to_sql(name: str, value: Any) -> Any:
    """One field of a `JobRecord` as its column holds it."""
    if name in ("gpus", "xid"):
        return ",".join(str(i) for i in value) if value else None
    if name in ("oom", "reconciled"):
        return int(bool(value))
    if name == "throttle_s":
        return throttle_to_json(value)
    if isinstance(value, str):
        return redact(value)  # names and results come from the server and images: never a PAT
    return value


def from_row(row: Sequence[Any]) -> JobRecord:
    """A row of `schema.COLUMNS` as a `JobRecord`."""
    values = dict(zip(schema.COLUMNS, row, strict=True))
    gpus = values.pop("gpus") or ""
    values["gpus"] = tuple(int(i) for i in str(gpus).split(",") if is_ascii_number(i.strip()))
    xid = values.pop("xid") or ""
    values["xid"] = tuple(int(i) for i in str(xid).split(",") if is_ascii_number(i.strip()))
    values["oom"] = bool(values["oom"])
    values["reconciled"] = bool(values["reconciled"])
    values["reason"] = values["reason"] or ""
    values["gpu_samples"] = int(values["gpu_samples"] or 0)
    values["energy_note"] = values["energy_note"] or ""
    values["throttle_s"] = throttle_from_json(values["throttle_s"])
    return JobRecord(**values)
