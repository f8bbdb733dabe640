"""Prometheus metrics of ``gpuci-tui run``, on a private registry.

Two kinds of figures, fed two ways:

* **State** (slots by state, agents busy/idle/standby, parked slots, Docker and
  Azure DevOps health, per-GPU utilisation and memory) is read at scrape time by
  `metrics_state.StateCollector` from the latest published `SupervisorSnapshot` and the latest
  GPU frame, so a gauge can never drift from what ``gpuci-tui status`` shows.
* **Happenings** (jobs by result, job duration, queue wait, per-job peak GPU
  memory, replenish latency, slot start-up, next-job gap, container starts and start
  failures, Azure DevOps requests by outcome) are counters and histograms fed by
  supervisor events (`follow`; the start-up and the gap are measured by the engine and
  carried by the event's ``seconds``), by the job recorder's finished rows
  (`Metrics.job_recorded`) and by the Azure DevOps transport (`Metrics.azure_response`:
  each attempt by outcome, route and HTTP code, and the bytes of its answer by route).

Label values come from small fixed sets (slot states, health states, results,
outcomes) or from the configuration (group names, GPU indexes): never request
ids, run numbers, agent names or container ids, so cardinality stays bounded. The one
exception, the image info, has one series per slot (its configured image and image id).
A private `CollectorRegistry` keeps library defaults (process and GC metrics of
the global registry) out, and lets tests build as many as they like.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram

from gpuci_tui.core.azure.usage import ROUTES, HttpAttempt
from gpuci_tui.core.engine.timings import GAP_NOTE, STARTUP_NOTE
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.host.metrics.state import MIB, StateCollector, group_label
from gpuci_tui.core.host.observers.history_rows import seconds_between
from gpuci_tui.core.models import JobInfo, SlotState, SupervisorEvent, SupervisorSnapshot
from gpuci_tui.core.store.history import JobRecord

JOB_RESULTS = frozenset(
    {"succeeded", "succeededwithissues", "failed", "canceled", "skipped", "abandoned"}
)
"""Azure DevOps job results kept as label values (lower-cased); anything else is ``other``."""


DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400)
"""Seconds: CI jobs run from seconds to a day (the agent's default job timeout is 60 min)."""
QUEUE_WAIT_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
"""Seconds: with idle agents a job waits about one server poll; more means no free agent."""
REPLENISH_BUCKETS = (0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600)
"""Seconds: a hot standby takes over in about a second, a fresh agent in 10–20 s."""
STARTUP_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 120, 300, 600)
"""Seconds from container start to agent online: the real agent takes ~9 s; a minute or
more means a slow image, a slow registration or an organisation that throttles."""
JOB_GAP_BUCKETS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400)
"""Seconds from a job's end to the slot's next job: with a queue, one poll (a standby) or a
start-up (none); the long buckets are a slot waiting for work (read beside the queue)."""
GPU_MEMORY_BUCKETS = tuple(gib * 1024 * MIB for gib in (0.5, 1, 2, 4, 8, 12, 16, 24, 32, 48, 80))
"""Bytes: the memory sizes of common data-centre and workstation GPUs."""


AZURE_OUTCOMES = (
    "ok", "rate_limited", "auth_error", "client_error", "server_error", "network_error"
)  # fmt: skip
"""Every value `azure_outcome` gives."""


#: The image puller's events that end a pull, and their result label.
MAX_WAITED = 4096
"""Running jobs whose queue wait was observed, remembered until their history row."""
_PULL_RESULTS = {"pull_done": "ok", "pull_failed": "failed"}


def result_label(result: str | None) -> str:
    """The ``result`` label of a finished job: a known Azure result, ``unknown`` or ``other``."""
    if not result:
        return "unknown"
    lowered = result.lower()
    return lowered if lowered in JOB_RESULTS else "other"


def azure_outcome(status: int | None) -> str:
    """The ``outcome`` label of one HTTP attempt to Azure DevOps (None: no answer at all)."""
    if status is None:
        return "network_error"
    if status == 429:
        return "rate_limited"
    if status in (401, 403, 203):  # 203: the sign-in page a rejected PAT may get
        return "auth_error"
    if 200 <= status < 300:
        return "ok"
    return "server_error" if status >= 500 else "client_error"


class Metrics:
    """Every metric of the daemon, registered in its own `registry`."""

    def __init__(
        self,
        *,
        gpu_frame: Callable[[], GpuFrame | None] = lambda: None,
        registry: CollectorRegistry | None = None,
        groups: Iterable[str] = (),
    ) -> None:
        """Create the metrics; ``gpu_frame`` gives the latest GPU sample (None: not sampled).

        ``groups`` names the configured agent groups: every counter and histogram
        gets a 0 sample for each of them (and each known result or outcome) at
        once, so a dashboard shows 0 rather than "No data" before the first event.
        """
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.latest: SupervisorSnapshot | None = None
        """The latest snapshot seen (`StateCollector` reads it from the scrape thread)."""
        self.gpu_frame = gpu_frame
        # Slot -> when it lost its agent (event time), until the snapshot shows it idle again.
        self._lost_at: dict[tuple[str, int], float] = {}
        # Jobs whose queue wait was observed when a snapshot showed them running; their
        # history row must not count it again (insertion-ordered, bounded: see _waited).
        self._waited: dict[int, None] = {}
        r = self.registry
        self.jobs = Counter(
            "gpuci_jobs", "Jobs finished on this host's agents, by Azure DevOps result.",
            ["group", "result"], registry=r,
        )  # fmt: skip
        self.job_duration = Histogram(
            "gpuci_job_duration_seconds", "How long finished jobs ran (Azure DevOps times).",
            ["group"], buckets=DURATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_wait = Histogram(
            "gpuci_job_queue_wait_seconds", "How long jobs waited from queueing to assignment "
            "to an agent (observed when a job is seen running, else when it ends).", ["group"],
            buckets=QUEUE_WAIT_BUCKETS, registry=r,
        )  # fmt: skip
        self.gpu_peak = Histogram(
            "gpuci_job_gpu_memory_peak_bytes", "Peak GPU memory of finished jobs (jobs seen "
            "using a GPU only).", ["group"], buckets=GPU_MEMORY_BUCKETS, registry=r,
        )  # fmt: skip
        self.replenish = Histogram(
            "gpuci_replenish_seconds", "From a slot's agent container exiting to the slot "
            "having an agent again (idle, or already running the next job).", ["group"], buckets=REPLENISH_BUCKETS, registry=r,
        )  # fmt: skip
        self.startup = Histogram(
            "gpuci_slot_startup_seconds", "From an agent container's start to its agent "
            "online in the pool.", ["group"], buckets=STARTUP_BUCKETS, registry=r,
        )  # fmt: skip
        self.job_gap = Histogram(
            "gpuci_slot_job_gap_seconds", "From a job's end on a slot to the slot's next job "
            "assigned (includes time with no job queued).", ["group"], buckets=JOB_GAP_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.starts = Counter(
            "gpuci_container_starts", "Agent containers started.", ["group"], registry=r
        )
        self.start_failures = Counter(
            "gpuci_container_start_failures", "Agent container starts that failed.",
            ["group"], registry=r,
        )  # fmt: skip
        self.azure_requests = Counter(
            "gpuci_azure_requests", "HTTP requests to Azure DevOps (retries included), by "
            "outcome, route (agents, jobrequests, ...) and HTTP code (or unreachable).",
            ["outcome", "route", "code"], registry=r,
        )  # fmt: skip
        self.azure_bytes = Counter(
            "gpuci_azure_response_bytes", "Bytes of Azure DevOps' answers, by route.", ["route"],
            registry=r,
        )  # fmt: skip
        self.images_removed = Counter(
            "gpuci_docker_images_removed", "Unused images removed to keep [docker] min_free "
            "free on Docker's data root.", registry=r,
        )  # fmt: skip
        self.registrations_removed = Counter(
            "gpuci_registrations_removed", "Stale registrations of this host removed from the "
            "pool (agents prune, the console's stale view, [azure] remove_offline_after).",
            registry=r,
        )  # fmt: skip
        self.pulls = Counter(
            "gpuci_image_pulls", "Image pulls ended, by result (ok, failed).", ["result"],
            registry=r,
        )  # fmt: skip
        for result in _PULL_RESULTS.values():
            self.pulls.labels(result)
        self.registry.register(StateCollector(lambda: self.latest, self.gpu_frame))
        self._zero(group_label(g) for g in groups)

    def _zero(self, groups: Iterable[str]) -> None:
        """Create every known label set, so each series exists (at 0) from the start."""
        for outcome in AZURE_OUTCOMES:
            # Empty route and code: the outcome's total exists (at 0) before its first request.
            self.azure_requests.labels(outcome, "", "")
        for route in ROUTES:
            self.azure_bytes.labels(route)
        for group in groups:
            for result in (*sorted(JOB_RESULTS), "unknown", "other"):
                self.jobs.labels(group, result)
            for family in (self.job_duration, self.queue_wait, self.gpu_peak, self.replenish):
                family.labels(group)
            self.startup.labels(group)
            self.job_gap.labels(group)
            self.starts.labels(group)
            self.start_failures.labels(group)

    # ------------------------------------------------------------------ feeding

    def observe_snapshot(self, snapshot: SupervisorSnapshot) -> None:
        """Keep ``snapshot`` for scrapes; a slot serving again ends its replenish interval."""
        self.latest = snapshot
        for slot in snapshot.slots:
            for job in (slot.job, *(agent.job for agent in slot.agents)):
                self._queue_wait_of(slot.group, job)
            key = (slot.group, slot.slot)
            if key not in self._lost_at:
                continue
            # Busy counts too: with jobs queued, a new agent takes one before any poll
            # could show it idle.
            if slot.state in (SlotState.IDLE, SlotState.BUSY):
                seconds = max(0.0, snapshot.taken_at - self._lost_at.pop(key))
                self.replenish.labels(group_label(slot.group)).observe(seconds)
            elif slot.state in (
                SlotState.DRAINED,
                SlotState.PARKED,
                SlotState.HELD,
                SlotState.QUARANTINED,
            ):
                del self._lost_at[key]  # not replenished on purpose: no latency to measure

    def _queue_wait_of(self, group: str, job: JobInfo | None) -> None:
        """Observe a running job's queue wait once, when a snapshot first shows it.

        At its end would be hours late for a long job: a queue that grows shows on the
        dashboard while it grows. A job that starts and ends between two reads is
        observed from its history row instead (`job_recorded`).
        """
        if job is None or job.request_id in self._waited:
            return
        seconds = seconds_between(job.queue_time, job.assign_time)
        if seconds is None:
            return
        self.queue_wait.labels(group_label(group)).observe(seconds)
        self._waited[job.request_id] = None
        if len(self._waited) > MAX_WAITED:  # rows that never came (a daemon restart)
            del self._waited[next(iter(self._waited))]

    def observe_event(self, event: SupervisorEvent) -> None:
        """Count container starts and failures; note when a slot lost its agent; record the
        start-ups and next-job gaps the engine measured.
        """
        group = group_label(event.group)
        if event.seconds is not None:
            if event.kind == STARTUP_NOTE:
                self.startup.labels(group).observe(event.seconds)
            elif event.kind == GAP_NOTE:
                self.job_gap.labels(group).observe(event.seconds)
        if event.kind == "container_started":
            self.starts.labels(group).inc()
        elif event.kind == "start_failed":
            self.start_failures.labels(group).inc()
        elif event.kind == "image_removed":
            self.images_removed.inc()
        elif event.kind == "registration_removed":  # one event per removal (stale_watch)
            self.registrations_removed.inc()
        elif event.kind in _PULL_RESULTS:
            self.pulls.labels(_PULL_RESULTS[event.kind]).inc()
        elif event.kind in ("container_exited", "agent_updating") and event.slot is not None:
            self._lost_at.setdefault((event.group, event.slot), event.at)
        elif event.kind == "slot_removed" and event.slot is not None:
            self._lost_at.pop((event.group, event.slot), None)

    def job_recorded(self, group: str, record: JobRecord) -> None:
        """Count one finished job of ``group`` (a `JobRecorder` ``on_record``)."""
        label = group_label(group)
        self.jobs.labels(label, result_label(record.result)).inc()
        if record.duration_s is not None:
            self.job_duration.labels(label).observe(record.duration_s)
        waited = record.request_id is not None and record.request_id in self._waited
        if waited:
            del self._waited[record.request_id]  # type: ignore[arg-type]
        elif record.queue_wait_s is not None:  # ended between two reads: never seen running
            self.queue_wait.labels(label).observe(record.queue_wait_s)
        if record.peak_gpu_memory_mib is not None:
            self.gpu_peak.labels(label).observe(record.peak_gpu_memory_mib * MIB)

    def azure_response(self, attempt: HttpAttempt) -> None:
        """Count one HTTP attempt to Azure DevOps and its answer's bytes (the client's threads)."""
        outcome = azure_outcome(attempt.status)
        self.azure_requests.labels(outcome, attempt.route, attempt.code).inc()
        if attempt.response_bytes:
            self.azure_bytes.labels(attempt.route).inc(attempt.response_bytes)


async def follow(supervised: Supervised, metrics: Metrics) -> None:
    """Feed ``metrics`` with every event and snapshot of ``supervised`` until cancelled."""
    queue = supervised.subscribe()
    try:
        metrics.observe_snapshot(supervised.snapshot())
        while True:
            item = await queue.get()
            if isinstance(item, SupervisorSnapshot):
                metrics.observe_snapshot(item)
            else:
                metrics.observe_event(item)
    finally:
        supervised.unsubscribe(queue)
