"""The metrics of `gpuci_tui.core.host.metrics.registry`, read back through prometheus_client's own text
format and parser (what Prometheus scrapes), from snapshots, events, job rows and HTTP
statuses given directly."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuci_tui.core.azure.usage import ROUTES, HttpAttempt, route_of
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuSample
from gpuci_tui.core.host.metrics.registry import Metrics, azure_outcome, follow, result_label
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.models import (
    AgentVersionsSnapshot,
    DiskSnapshot,
    GroupSummary,
    HealthSnapshot,
    HealthState,
    ImageAgentVersion,
    JobInfo,
    PoolSummary,
    RolloutSnapshot,
    SlotSnapshot,
    SlotState,
    SupervisorEvent,
    SupervisorSnapshot,
)
from gpuci_tui.core.store.history import JobRecord
from tests.core.supervisor_env import wait_until

Labels = tuple[tuple[str, str], ...]


def scrape(metrics: Metrics) -> dict[tuple[str, Labels], float]:
    """Every sample of the text exposition, keyed by (sample name, sorted labels)."""
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return scrape(metrics).get((name, tuple(sorted(labels.items()))))


def slot(number: int, state: SlotState, group: str = "", **kw: object) -> SlotSnapshot:
    return SlotSnapshot(slot=number, name=f"gpu01-{number}", state=state, group=group, **kw)  # type: ignore[arg-type]


def snapshot(slots: Iterable[SlotSnapshot], at: float = 1000.0, **kw: object) -> SupervisorSnapshot:
    return SupervisorSnapshot(
        taken_at=at, org_url="https://dev.azure.com/acme", pool="gpu", instance="i",
        desired_count=4, slots=tuple(slots), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def record(**kw: object) -> JobRecord:
    base = JobRecord(
        instance="i", slot=1, agent="gpu01-1", request_id=17, pipeline="train", run="20260101.1",
        started_at=10.0, ended_at=100.0, exit_code=0, oom=False, reason="job finished",
    )  # fmt: skip
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_slot_and_agent_gauges_follow_the_latest_snapshot() -> None:
    metrics = Metrics()
    job = JobInfo(request_id=5)
    metrics.observe_snapshot(
        snapshot(
            [
                slot(1, SlotState.IDLE, standby="ready"),
                slot(2, SlotState.BUSY, job=job, standby="booting"),
                slot(3, SlotState.PARKED),
                slot(4, SlotState.IDLE, standby="ready"),
            ],
            docker=HealthSnapshot(HealthState.OK),
            azure=HealthSnapshot(HealthState.RATE_LIMITED),
            pool_summary=PoolSummary(name="gpu", queued_jobs=7),
        )
    )
    got = scrape(metrics)
    d = (("group", "default"),)
    assert got[("gpuci_slots", (*d, ("state", "idle")))] == 2
    assert got[("gpuci_slots", (*d, ("state", "busy")))] == 1
    assert got[("gpuci_slots", (*d, ("state", "parked")))] == 1
    assert got[("gpuci_slots", (*d, ("state", "starting")))] == 0, "every state, zeros too"
    assert got[("gpuci_slots_desired", d)] == 4
    assert got[("gpuci_agents", (*d, ("state", "idle")))] == 2
    assert got[("gpuci_agents", (*d, ("state", "busy")))] == 1
    assert got[("gpuci_agents", (*d, ("state", "standby")))] == 2
    assert got[("gpuci_slots_parked", d)] == 1
    assert got[("gpuci_pool_jobs_queued", (("pool", "gpu"),))] == 7
    assert got[("gpuci_docker_up", ())] == 1
    assert got[("gpuci_azure_rate_limited", ())] == 1
    assert got[("gpuci_azure_state", (("state", "rate_limited"),))] == 1
    assert got[("gpuci_azure_state", (("state", "ok"),))] == 0
    assert got[("gpuci_paused", ())] == 0

    metrics.observe_snapshot(snapshot([slot(1, SlotState.EMPTY)], docker=HealthSnapshot()))
    assert value(metrics, "gpuci_slots", group="default", state="idle") == 0
    assert value(metrics, "gpuci_docker_up") == 0, "unknown is not up"


def test_groups_are_labelled_by_name() -> None:
    metrics = Metrics()
    groups = (GroupSummary("a100", "gpu", "x", 2), GroupSummary("cpu", "cpu", "y", 1))
    metrics.observe_snapshot(
        snapshot(
            [
                slot(1, SlotState.IDLE, "a100"),
                slot(2, SlotState.BUSY, "a100"),
                slot(1, SlotState.IDLE, "cpu"),
            ],
            groups=groups,
            pools=(PoolSummary(name="gpu"), PoolSummary(name="cpu", queued_jobs=2)),
        )  # fmt: skip
    )
    assert value(metrics, "gpuci_slots_desired", group="a100") == 2
    assert value(metrics, "gpuci_agents", group="a100", state="busy") == 1
    assert value(metrics, "gpuci_agents", group="cpu", state="idle") == 1
    assert value(metrics, "gpuci_pool_jobs_queued", pool="cpu") == 2
    assert value(metrics, "gpuci_slots", group="default", state="idle") is None


def test_nothing_before_the_first_snapshot_but_the_families_exist() -> None:
    metrics = Metrics()
    names = {
        f.name for f in text_string_to_metric_families(generate_latest(metrics.registry).decode())
    }
    assert {"gpuci_slots", "gpuci_docker_up", "gpuci_jobs", "gpuci_replenish_seconds"} <= names
    assert value(metrics, "gpuci_docker_up") is None


def test_gpu_gauges_come_from_the_latest_frame_and_skip_missing_fields() -> None:
    frame = GpuFrame(
        taken_at=1.0,
        host=GpuHostInfo(available=True, gpu_count=2),
        gpus=(
            GpuSample(0, "A100", utilization_pct=75.0, memory_used_mib=1024.0,
                      memory_total_mib=40960.0),
            GpuSample(1, "A100", utilization_pct=None, memory_used_mib=None),
        ),
    )  # fmt: skip
    metrics = Metrics(gpu_frame=lambda: frame)
    assert value(metrics, "gpuci_gpu_utilization_ratio", gpu="0") == 0.75
    assert value(metrics, "gpuci_gpu_memory_used_bytes", gpu="0") == 1024 * 2**20
    assert value(metrics, "gpuci_gpu_memory_total_bytes", gpu="0") == 40960 * 2**20
    assert value(metrics, "gpuci_gpu_utilization_ratio", gpu="1") is None, "N/A is not 0"


def test_finished_jobs_feed_the_counter_and_histograms() -> None:
    metrics = Metrics()
    metrics.job_recorded("", record(result="succeeded", duration_s=42.0, queue_wait_s=3.0,
                                    peak_gpu_memory_mib=3000.0))  # fmt: skip
    metrics.job_recorded("", record(result="failed", duration_s=4000.0))
    metrics.job_recorded("a100", record(result=None))
    metrics.job_recorded("a100", record(result="somethingNew"))
    assert value(metrics, "gpuci_jobs_total", group="default", result="succeeded") == 1
    assert value(metrics, "gpuci_jobs_total", group="default", result="failed") == 1
    assert value(metrics, "gpuci_jobs_total", group="a100", result="unknown") == 1
    assert value(metrics, "gpuci_jobs_total", group="a100", result="other") == 1
    assert value(metrics, "gpuci_job_duration_seconds_count", group="default") == 2
    assert value(metrics, "gpuci_job_duration_seconds_sum", group="default") == 4042.0
    assert value(metrics, "gpuci_job_duration_seconds_bucket", group="default", le="60.0") == 1
    assert value(metrics, "gpuci_job_queue_wait_seconds_count", group="default") == 1
    assert value(metrics, "gpuci_job_gpu_memory_peak_bytes_sum", group="default") == 3000 * 2**20
    assert value(metrics, "gpuci_job_gpu_memory_peak_bytes_count", group="a100") is None


def test_a_running_jobs_queue_wait_is_observed_once_when_it_is_first_seen() -> None:
    metrics = Metrics()
    job = JobInfo(
        17, queue_time="2026-11-26T10:00:00+00:00", assign_time="2026-11-26T10:00:42+00:00"
    )
    busy = slot(1, SlotState.BUSY, group="a100", job=job)
    metrics.observe_snapshot(snapshot([busy], at=90))
    metrics.observe_snapshot(snapshot([busy], at=95))  # the same job, read again
    assert value(metrics, "gpuci_job_queue_wait_seconds_count", group="a100") == 1
    assert value(metrics, "gpuci_job_queue_wait_seconds_sum", group="a100") == 42.0
    # Its history row (at the job's end) does not count it a second time ...
    metrics.job_recorded("a100", record(request_id=17, queue_wait_s=42.0))
    assert value(metrics, "gpuci_job_queue_wait_seconds_count", group="a100") == 1
    # ... but a job that started and ended between two reads is observed from its row.
    metrics.job_recorded("a100", record(request_id=18, queue_wait_s=5.0))
    assert value(metrics, "gpuci_job_queue_wait_seconds_count", group="a100") == 2
    # A job without the server's times is not a wait of 0.
    metrics.observe_snapshot(snapshot([slot(2, SlotState.BUSY, group="a100", job=JobInfo(19))]))
    assert value(metrics, "gpuci_job_queue_wait_seconds_count", group="a100") == 2


def test_replenish_latency_runs_from_the_exit_to_the_next_idle_snapshot() -> None:
    metrics = Metrics()
    metrics.observe_snapshot(snapshot([slot(1, SlotState.BUSY), slot(2, SlotState.IDLE)], at=90))
    metrics.observe_event(SupervisorEvent(100.0, "container_exited", "gpu01-1 exited", slot=1))
    metrics.observe_event(SupervisorEvent(101.0, "container_started", "gpu01-1 started", slot=1))
    metrics.observe_snapshot(
        snapshot([slot(1, SlotState.STARTING), slot(2, SlotState.IDLE)], at=101)
    )
    assert value(metrics, "gpuci_replenish_seconds_count", group="default") is None
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE), slot(2, SlotState.IDLE)], at=112.5))
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE), slot(2, SlotState.IDLE)], at=200))
    assert value(metrics, "gpuci_replenish_seconds_count", group="default") == 1
    assert value(metrics, "gpuci_replenish_seconds_sum", group="default") == 12.5
    assert value(metrics, "gpuci_container_starts_total", group="default") == 1

    # A slot drained or parked after its exit is not replenished on purpose: not measured.
    metrics.observe_event(SupervisorEvent(300.0, "container_exited", "gpu01-2 exited", slot=2))
    metrics.observe_event(SupervisorEvent(300.5, "start_failed", "gpu01-2: boom", slot=2))
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE), slot(2, SlotState.PARKED)], at=301))
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE), slot(2, SlotState.IDLE)], at=900))
    assert value(metrics, "gpuci_replenish_seconds_count", group="default") == 1
    assert value(metrics, "gpuci_container_start_failures_total", group="default") == 1


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, "ok"), (204, "ok"), (None, "network_error"), (429, "rate_limited"),
     (401, "auth_error"), (203, "auth_error"), (404, "client_error"), (503, "server_error")],
)  # fmt: skip
def test_azure_outcomes_are_a_small_fixed_set(status: int | None, outcome: str) -> None:
    assert azure_outcome(status) == outcome
    metrics = Metrics()
    metrics.azure_response(HttpAttempt("GET", "agents", status, 1234))
    code = "unreachable" if status is None else str(status)
    assert value(metrics, "gpuci_azure_requests_total", outcome=outcome, route="agents", code=code)
    assert value(metrics, "gpuci_azure_response_bytes_total", route="agents") == 1234


def test_requests_and_bytes_by_route_stay_bounded() -> None:
    metrics = Metrics()
    metrics.azure_response(
        HttpAttempt("GET", route_of("_apis/distributedtask/pools/42/agents"), 200, 900)
    )
    metrics.azure_response(
        HttpAttempt("GET", route_of("_apis/distributedtask/pools/42/agents"), 200, 100)
    )
    metrics.azure_response(
        HttpAttempt("PATCH", route_of("_apis/distributedtask/pools/42/agents/7"), 200, 50)
    )
    metrics.azure_response(
        HttpAttempt("GET", route_of("_apis/distributedtask/pools/42/jobrequests"), None)
    )
    got = scrape(metrics)
    assert (
        got[
            (
                "gpuci_azure_requests_total",
                (("code", "200"), ("outcome", "ok"), ("route", "agents")),
            )
        ]
        == 2
    )
    assert (
        got[
            ("gpuci_azure_requests_total", (("code", "200"), ("outcome", "ok"), ("route", "agent")))
        ]
        == 1
    )
    assert (
        got[
            (
                "gpuci_azure_requests_total",
                (("code", "unreachable"), ("outcome", "network_error"), ("route", "jobrequests")),
            )
        ]
        == 1
    )
    assert value(metrics, "gpuci_azure_response_bytes_total", route="agents") == 1000
    assert value(metrics, "gpuci_azure_response_bytes_total", route="jobrequests") == 0
    routes = {dict(k[1]).get("route") for k in got if k[0] == "gpuci_azure_response_bytes_total"}
    assert routes == set(ROUTES)  # every route from the start, and no other


def test_result_labels_stay_bounded() -> None:
    assert result_label("SucceededWithIssues") == "succeededwithissues"
    assert result_label("run 20260101.7 of train") == "other"


async def test_follow_feeds_events_and_snapshots_from_a_broadcaster() -> None:
    """`follow` over a real `Broadcaster`, as the daemon runs it."""
    state = {"slots": [slot(1, SlotState.STARTING)]}
    broadcaster = Broadcaster(clock=lambda: 5.0)
    broadcaster.bind(lambda: snapshot(state["slots"], at=5.0))

    class Source:
        subscribe = broadcaster.subscribe
        unsubscribe = broadcaster.unsubscribe

        def snapshot(self) -> SupervisorSnapshot:
            return snapshot(state["slots"])

    metrics = Metrics()
    task = asyncio.get_running_loop().create_task(follow(Source(), metrics))  # type: ignore[arg-type]
    try:
        await wait_until(lambda: metrics.latest is not None, what="the first snapshot")
        broadcaster.event("container_started", "gpu01-1 started", 1)
        state["slots"] = [slot(1, SlotState.IDLE)]
        broadcaster.changed()
        await wait_until(
            lambda: value(metrics, "gpuci_agents", group="default", state="idle") == 1,
            what="the idle agent",
        )
        assert value(metrics, "gpuci_container_starts_total", group="default") == 1
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_slot_that_goes_straight_to_busy_is_replenished_too() -> None:
    """With jobs queued, the new agent takes one before a snapshot shows it idle."""
    metrics = Metrics()
    metrics.observe_event(SupervisorEvent(10.0, "container_exited", "gpu01-1 exited", slot=1))
    metrics.observe_snapshot(snapshot([slot(1, SlotState.STARTING)], at=11))
    metrics.observe_snapshot(snapshot([slot(1, SlotState.BUSY)], at=14))
    assert value(metrics, "gpuci_replenish_seconds_sum", group="default") == 4.0


def test_every_counter_has_a_zero_sample_before_its_first_event() -> None:
    """A Grafana panel shows 0, not "No data", for a group that has not finished a job yet."""
    from gpuci_tui.core.host.metrics.registry import AZURE_OUTCOMES, JOB_RESULTS

    metrics = Metrics(groups=["default", "a100"])
    for group in ("default", "a100"):
        for result in (*JOB_RESULTS, "unknown", "other"):
            assert value(metrics, "gpuci_jobs_total", group=group, result=result) == 0
        for name in (
            "gpuci_job_duration_seconds_count",
            "gpuci_job_queue_wait_seconds_count",
            "gpuci_job_gpu_memory_peak_bytes_count",
            "gpuci_replenish_seconds_count",
            "gpuci_container_starts_total",
            "gpuci_container_start_failures_total",
        ):
            assert value(metrics, name, group=group) == 0, name
    for outcome in AZURE_OUTCOMES:
        assert value(metrics, "gpuci_azure_requests_total", outcome=outcome, route="", code="") == 0
    assert {azure_outcome(s) for s in (200, None, 429, 401, 404, 503)} == set(AZURE_OUTCOMES)
    metrics.job_recorded("a100", record(result="succeeded", duration_s=5.0))
    assert value(metrics, "gpuci_jobs_total", group="a100", result="succeeded") == 1
    assert value(metrics, "gpuci_jobs_total", group="default", result="succeeded") == 0


def test_gpu_health_and_held_slots_by_bounded_reason() -> None:
    from gpuci_tui.core.host.metrics.state import GATE_REASONS
    from gpuci_tui.core.models import GpuGateSnapshot

    metrics = Metrics()
    metrics.observe_snapshot(
        snapshot(
            [
                slot(0, SlotState.HELD, gate="held", gate_code="foreign_process"),
                slot(1, SlotState.BUSY, gate="held", gate_code="foreign_process"),
                slot(2, SlotState.QUARANTINED, gate="quarantined", gate_code="xid"),
                slot(3, SlotState.IDLE),
            ],
            gpu_gates=(
                GpuGateSnapshot(0, state="held", code="foreign_process"),
                GpuGateSnapshot(1, state="quarantined", code="xid"),
                GpuGateSnapshot(2),
            ),
        )
    )
    assert [value(metrics, "gpuci_gpu_health", gpu=g) for g in "012"] == [1.0, 2.0, 0.0]
    held = {r: value(metrics, "gpuci_slots_held", group="default", reason=r) for r in GATE_REASONS}
    assert held == {r: {"foreign_process": 2.0, "xid": 1.0}.get(r, 0.0) for r in GATE_REASONS}
    assert value(metrics, "gpuci_slots", group="default", state="held") == 1


def test_the_image_info_is_one_series_per_slot_and_follows_a_new_image() -> None:
    metrics = Metrics()
    v1, v2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    image = "reg:5000/agent:cuda12"
    metrics.observe_snapshot(
        snapshot(
            [
                slot(0, SlotState.IDLE, group="train", image=image, image_id=v1),
                slot(1, SlotState.EMPTY, group="train", image=image),
            ]
        )
    )

    def series() -> dict[Labels, float]:
        return {
            k: v for (name, k), v in scrape(metrics).items() if name == "gpuci_agent_image_info"
        }

    def labels(number: int, image_id: str) -> Labels:
        return (("group", "train"), ("image", image), ("image_id", image_id), ("slot", str(number)))

    assert series() == {labels(0, v1): 1.0, labels(1, ""): 1.0}
    # Slot 0 now runs another image: its old series is gone, not left beside the new one.
    metrics.observe_snapshot(
        snapshot(
            [
                slot(0, SlotState.IDLE, group="train", image=image, image_id=v2),
                slot(1, SlotState.IDLE, group="train", image=image, image_id=v2),
            ]
        )
    )
    assert series() == {labels(0, v2): 1.0, labels(1, v2): 1.0}


def test_docker_free_space_and_images_removed() -> None:
    metrics = Metrics()
    metrics.observe_snapshot(snapshot([]))
    assert value(metrics, "gpuci_docker_free_bytes") is None  # unknown: absent, not 0
    assert value(metrics, "gpuci_docker_images_removed_total") == 0
    metrics.observe_snapshot(snapshot([], disk=DiskSnapshot(state="ok", free_bytes=12345)))
    metrics.observe_event(SupervisorEvent(at=1.0, kind="image_removed", message="removed"))
    metrics.observe_event(SupervisorEvent(at=2.0, kind="image_kept", message="kept"))
    assert value(metrics, "gpuci_docker_free_bytes") == 12345
    assert value(metrics, "gpuci_docker_images_removed_total") == 1


def test_a_rollout_is_a_gauge_per_group_of_slots_on_the_new_spec() -> None:
    metrics = Metrics()
    metrics.observe_snapshot(snapshot([slot(0, SlotState.IDLE)]))
    assert value(metrics, "gpuci_rollout_slots_new", group="default") is None  # none going on
    rollout = RolloutSnapshot("train", "a:v1", "a:v2", "canary", 8, 3, busy_old=1)
    metrics.observe_snapshot(snapshot([slot(0, SlotState.IDLE)], rollouts=(rollout,)))
    assert value(metrics, "gpuci_rollout_slots_new", group="train") == 3
    assert value(metrics, "gpuci_rollout_state", group="train", state="canary") == 1


def test_agent_versions_are_an_info_metric_with_a_warning_count() -> None:
    metrics = Metrics()
    versions = AgentVersionsSnapshot(
        org_version="4.270.0",
        images=(ImageAgentVersion("", "gpuci-agent:1", "4.264.2"),),
        cached="4.270.0",
        warnings=("group 's image has agent 4.264.2; the organisation offers 4.270.0: …",),
        checked_at=1000.0,
    )
    metrics.observe_snapshot(snapshot([]))
    assert value(metrics, "gpuci_agent_version_warnings") is None  # not read yet: absent
    metrics.observe_snapshot(snapshot([], agent_versions=versions))
    assert value(metrics, "gpuci_agent_version_warnings") == 1
    info = {
        "group": "default",
        "image": "gpuci-agent:1",
        "image_agent": "4.264.2",
        "org_agent": "4.270.0",
        "cached_agent": "4.270.0",
    }
    assert value(metrics, "gpuci_agent_version_info", **info) == 1


def test_stale_registrations_removed_are_counted() -> None:
    metrics = Metrics()
    assert value(metrics, "gpuci_registrations_removed_total") == 0
    for at in (1.0, 2.0):
        metrics.observe_event(
            SupervisorEvent(at=at, kind="registration_removed", message="removed stale ...")
        )
    metrics.observe_event(SupervisorEvent(at=3.0, kind="image_removed", message="removed"))
    assert value(metrics, "gpuci_registrations_removed_total") == 2
