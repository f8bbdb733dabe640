"""``gpu clear``: one rule, one wording, whether the CLI, the console or the daemon asks."""

from __future__ import annotations

import pytest

from gpuci_tui.core.command_types import GpuClear
from gpuci_tui.core.engine.commands import apply_command
from gpuci_tui.core.engine.gpu_health import (
    NO_GPU_WATCH,
    GpuRecord,
    HealthBook,
    gpu_clear_refusal,
    nothing_to_clear,
)
from gpuci_tui.core.engine.lifecycle import EngineState
from gpuci_tui.core.engine.preview import preview
from gpuci_tui.core.host.gpus.gates import GpuGatekeeper, clear_gpu
from gpuci_tui.core.models import GpuGateSnapshot, SupervisorSnapshot

GPUS = [(0, "GPU-aa"), (1, "GPU-bb")]


@pytest.mark.parametrize(
    ("gpus", "gpu", "refusal"),
    [
        (None, "0", NO_GPU_WATCH),
        (None, "all", NO_GPU_WATCH),
        (GPUS, "0", None),
        (GPUS, "GPU-bb", None),
        (GPUS, "all", None),
        (GPUS, "7", "no GPU '7' (GPUs are 0, 1, or all)"),
        ([], "all", "no GPU 'all' (GPUs are none seen yet, or all)"),
    ],
)
def test_gpu_clear_refusal(
    gpus: list[tuple[int, str | None]] | None, gpu: str, refusal: str | None
) -> None:
    assert gpu_clear_refusal(gpus, gpu) == refusal


def _snapshot(*gates: GpuGateSnapshot) -> SupervisorSnapshot:
    return SupervisorSnapshot(
        taken_at=0.0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="i",
        desired_count=0,
        gpu_gates=gates,
    )


def test_the_preview_the_engine_and_the_daemon_refuse_in_the_same_words() -> None:
    # No GPU watch: the preview (what the CLI and the console show), the engine, the daemon.
    assert preview(_snapshot(), GpuClear("0")).message == NO_GPU_WATCH
    assert (
        apply_command(EngineState(prefix="h", desired=0), GpuClear("0"))[1].message == NO_GPU_WATCH
    )
    assert clear_gpu(None, GpuClear("0")).message == NO_GPU_WATCH
    # An unknown GPU: the preview from the gates, the daemon from its health book.
    gates = (GpuGateSnapshot(0, "GPU-aa"), GpuGateSnapshot(1, "GPU-bb"))
    keeper = GpuGatekeeper([], lambda kind, message: None)
    keeper.book = HealthBook(tuple(GpuRecord(i, u) for i, u in GPUS))
    asked = preview(_snapshot(*gates), GpuClear("7"))
    done = keeper.clear("7")
    assert not asked.ok and not done.ok
    assert asked.message == done.message == "no GPU '7' (GPUs are 0, 1, or all)"
    # Nothing quarantined: not a refusal, and the same answer from both.
    asked, done = preview(_snapshot(*gates), GpuClear("1")), keeper.clear("1")
    assert asked.ok and done.ok
    assert (
        asked.message
        == done.message
        == nothing_to_clear([1])
        == ("GPU 1: not quarantined, nothing to clear")
    )
