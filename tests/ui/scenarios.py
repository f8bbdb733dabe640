"""Fixed scenes for the console tests: a busy supervisor snapshot, GPU frames, a config.

Every value hangs off one frozen clock (`NOW`), so text and SVG snapshots are stable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.models import (
    DisabledAgents,
    ExitInfo,
    HealthSnapshot,
    HealthState,
    JobInfo,
    PoolSummary,
    SlotSnapshot,
    SlotState,
    SupervisorEvent,
    SupervisorSnapshot,
)

NOW = 1_763_800_000.0
"""The frozen wall clock of every console test (2025-11-22 08:26:40 UTC)."""


def frozen_clock() -> float:
    """The clock the tests inject: always `NOW`."""
    return NOW


# --------------------------------------------------------------------------- snapshots


def busy_slot(
    slot: int, pipeline: str, run: str, *, minutes: float, gpus: tuple[str, ...]
) -> SlotSnapshot:
    """A slot running a job for ``minutes``."""
    return SlotSnapshot(
        slot=slot,
        name=f"gpuhost-{slot}",
        state=SlotState.BUSY,
        container_id=f"{slot:02d}c0ffee{slot:02d}" + "ab" * 26,
        started_at=NOW - minutes * 60 - 20,
        agent_id=100 + slot,
        agent_status="online",
        agent_enabled=True,
        job=JobInfo(
            request_id=5000 + slot, pipeline=pipeline, run=run, assign_time="2025-11-22T08:00:00Z"
        ),
        gpus=gpus,
        last_exit=ExitInfo(
            code=0, at=NOW - minutes * 60 - 25, reason="job finished", took_job=True
        ),
        message=f"running '{pipeline}' {run}",
        jobs_done=7,
    )


def idle_slot(slot: int, *, minutes: float = 3, gpus: tuple[str, ...] = ()) -> SlotSnapshot:
    """An online agent waiting for a job."""
    return SlotSnapshot(
        slot=slot,
        name=f"gpuhost-{slot}",
        state=SlotState.IDLE,
        container_id=f"{slot:02d}beef{slot:02d}" + "cd" * 27,
        started_at=NOW - minutes * 60,
        agent_id=100 + slot,
        agent_status="online",
        agent_enabled=True,
        gpus=gpus or (str(slot - 1),),
        message="waiting for a job",
    )


def loaded_snapshot(**changes: Any) -> SupervisorSnapshot:
    """Six slots in the states an operator meets on a busy day."""
    slots = (
        replace(busy_slot(1, "train - main", "20261122.3", minutes=42, gpus=("0",)),
                standby="ready"),
        replace(idle_slot(2, gpus=("1",)), standby="ready"),
        replace(busy_slot(3, "eval nightly", "20261121.9", minutes=5, gpus=("2",)),
                standby="booting"),
    )  # fmt: skip
    slots = (
        *slots,
        replace(
            busy_slot(4, "bench - pr 4411", "20261122.1", minutes=17, gpus=("3",)),
            state=SlotState.DRAINING,
            agent_enabled=False,
            message="draining: waiting for 'bench - pr 4411' to finish",
        ),
        SlotSnapshot(
            slot=5,
            name="gpuhost-5",
            state=SlotState.BACKOFF,
            gpus=("all",),
            last_exit=ExitInfo(
                code=137, oom=True, at=NOW - 30, reason="killed: out of memory", took_job=True
            ),
            failures=2,
            backoff_until=NOW + 12,
            message="starting again in 12 s (2 failures)",
        ),
        SlotSnapshot(
            slot=6,
            name="gpuhost-6",
            state=SlotState.PARKED,
            last_exit=ExitInfo(
                code=10,
                at=NOW - 600,
                reason="configuration failed: pool not found",
                log_tail=("registering as gpuhost-6", "error: pool 'gpu' not found"),
            ),
            failures=5,
            message="parked after 5 failures; press u to retry",
        ),
    )
    base = SupervisorSnapshot(
        taken_at=NOW,
        org_url="https://dev.azure.com/contoso",
        pool="gpu-a100",
        instance="contoso/gpu-a100/gpuhost",
        desired_count=6,
        mode="in-process",
        slots=slots,
        pool_summary=PoolSummary(
            pool_id=12,
            name="gpu-a100",
            online=5,
            offline=2,
            disabled=5,
            queued_jobs=3,
            running_jobs=3,
            standby=2,
            disabled_why=DisabledAgents(busy=2, leaving=1, standby=2),
            read_at=NOW - 3,
            jobs_read_at=NOW - 25,
        ),
        azure=HealthSnapshot(state=HealthState.OK, checked_at=NOW - 12),
        docker=HealthSnapshot(state=HealthState.OK, checked_at=NOW - 2),
        azure_requests=1234,
        started_at=NOW - 3600,
        standby=True,
    )
    return replace(base, **changes)


def events() -> list[SupervisorEvent]:
    """A few events as the supervisor would report them."""
    return [
        SupervisorEvent(
            at=NOW - 600, kind="slot_parked", message="parked after 5 failures", slot=6
        ),
        SupervisorEvent(
            at=NOW - 300, kind="job_assigned", message="'eval nightly' 20261121.9", slot=3
        ),
        SupervisorEvent(
            at=NOW - 30,
            kind="container_exited",
            message="exit 137 (OOM) after 'train - pr'",
            slot=5,
        ),
        SupervisorEvent(
            at=NOW - 5, kind="command", message="drain gpuhost-4 [asked from the console]", slot=4
        ),
    ]


HOST = GpuHostInfo(
    available=True, driver_version="580.82.07", cuda_driver_version=(13, 0), gpu_count=4
)


def gpu_frame(tick: int = 0) -> GpuFrame:
    """Four GPUs: three loaded by agents, one with a foreign process; ``tick`` varies load."""
    wave = (0, 8, 15, 8, 0, -8, -15, -8)[tick % 8]
    return GpuFrame(
        taken_at=NOW,
        host=HOST,
        gpus=(
            GpuSample(
                0,
                "NVIDIA A100-SXM4-80GB",
                "GPU-0",
                88.0 + wave / 2,
                61_440,
                81_920,
                71,
                312.0,
                400.0,
                (GpuProcess(4242, 58_000, "python", "01c0ffee01" + "ab" * 26, "gpuhost-1"),),
            ),
            GpuSample(1, "NVIDIA A100-SXM4-80GB", "GPU-1", 0.0, 512, 81_920, 34, 61.0, 400.0),
            GpuSample(
                2,
                "NVIDIA A100-SXM4-80GB",
                "GPU-2",
                52.0 + wave,
                20_480,
                81_920,
                58,
                220.0,
                400.0,
                (GpuProcess(5150, 19_800, "torchrun", "03c0ffee03" + "ab" * 26, "gpuhost-3"),),
            ),
            GpuSample(
                3,
                "NVIDIA A100-SXM4-80GB",
                "GPU-3",
                None,
                None,
                None,
                None,
                None,
                None,
                (GpuProcess(777, 2_048, "jupyter"),),
            ),
        ),
    )


NO_GPU = GpuHostInfo(
    available=False, reason="NVML library not found: no NVIDIA driver on this host"
)


def sample_config(path: Path | None = None, **agents: Any) -> Config:
    """A plausible configuration for the dashboard tests."""
    return Config(
        azure=AzureConfig(url="https://dev.azure.com/contoso", pool="gpu-a100"),
        agents=AgentsConfig(
            count=6, image="gpuci/agent:amd64-ubuntu24.04-cuda13.0", name_prefix="gpuhost", **agents
        ),
        path=path,
    )


def measured_snapshot() -> SupervisorSnapshot:
    """`loaded_snapshot` from a daemon that samples GPUs: busy rows carry their job's use now.

    Slot 4's job has no GPU process (yet): its figure is "not known".
    """
    base = loaded_snapshot(gpu_accounting=True)
    figures = {1: (58_000 * 2**20, 92.0), 3: (19_800 * 2**20, 60.0)}
    slots = tuple(
        replace(s, gpu_memory_bytes=figures[s.slot][0], gpu_util_percent=figures[s.slot][1])
        if s.slot in figures
        else s
        for s in base.slots
    )
    return replace(base, slots=slots)
