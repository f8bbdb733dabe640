"""Per-process utilisation and energy through the real pynvml and the fake library.

The fake (tests/fixtures/fake_nvml.c) stamps each ``proc`` line's utilisation
sample with a timestamp and answers NOT_FOUND when nothing is newer than the
caller's last-seen timestamp, as the driver does; its ``energy`` line feeds
``nvmlDeviceGetTotalEnergyConsumption``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuci_tui.core.gpu.nvml_sampler import is_lost
from tests.core.nvml_helpers import NvmlState

pytestmark = pytest.mark.nvml

A6000 = "gpu NVIDIA_RTX_A6000 GPU-aaaaaaaa-0000-0000-0000-000000000000 80 40 20480 49140 70 200000 300000 0"
L4 = "gpu NVIDIA_L4 GPU-bbbbbbbb-0000-0000-0000-000000000000 5 1 600 23034 34 16000 72000 0"
TWO_GPUS = f"""
{A6000}
{L4}
energy 0 5000000
energy 1 700000
proc 0 4242 18000 75 30
proc 0 4343 2000
proc 1 5151 600 5 1
"""


def test_per_process_utilisation_and_energy(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write(TWO_GPUS)
    a6000, l4 = make_sampler().sample().gpus
    busy, quiet = a6000.processes
    assert (busy.pid, busy.used_memory_mib, busy.sm_util_pct, busy.mem_util_pct) == (
        4242,
        18000.0,
        75.0,
        30.0,
    )
    # Listed as running but absent from the utilisation samples: idle, not unknown.
    assert (quiet.pid, quiet.sm_util_pct, quiet.mem_util_pct) == (4343, 0.0, 0.0)
    assert a6000.energy_mj == 5_000_000
    assert l4.energy_mj == 700_000
    assert l4.processes[0].sm_util_pct == 5.0


def test_utilisation_samples_are_consumed_once(make_sampler, nvml_state: NvmlState) -> None:
    # A fixed timestamp: the second sample passes it as last-seen, so the
    # driver has nothing newer (NOT_FOUND) and the process counts as idle.
    nvml_state.write(f"{A6000}\nproc 0 4242 100 60 10 1000\n")
    sampler = make_sampler()
    assert sampler.sample().gpus[0].processes[0].sm_util_pct == 60.0
    assert sampler.sample().gpus[0].processes[0].sm_util_pct == 0.0
    nvml_state.write(f"{A6000}\nproc 0 4242 100 90 10 2000\n")
    assert sampler.sample().gpus[0].processes[0].sm_util_pct == 90.0


def test_several_samples_in_one_interval_are_averaged(make_sampler, nvml_state) -> None:
    nvml_state.write(f"{A6000}\nproc 0 4242 100 20 10 1000\nproc 0 4242 100 80 30 1500\n")
    (proc,) = make_sampler().sample().gpus[0].processes[:1]
    assert (proc.sm_util_pct, proc.mem_util_pct) == (50.0, 20.0)


@pytest.mark.parametrize(("code", "why"), [(13, "function not found"), (3, "not supported")])
def test_driver_refusing_per_process_data_gives_none(make_sampler, nvml_state, code, why) -> None:
    nvml_state.write(
        TWO_GPUS
        + f"fail nvmlDeviceGetProcessUtilization {code}\n"
        + f"fail nvmlDeviceGetTotalEnergyConsumption {code}\n"
    )
    a6000 = make_sampler().sample().gpus[0]
    assert [p.sm_util_pct for p in a6000.processes] == [None, None], why
    assert [p.mem_util_pct for p in a6000.processes] == [None, None]
    assert a6000.energy_mj is None
    # Everything else on that GPU is still read.
    assert a6000.processes[0].used_memory_mib == 18000.0
    assert a6000.utilization_pct == 80.0


def test_board_without_energy_counter(make_sampler, nvml_state: NvmlState) -> None:
    # No "energy" line: the fake answers NOT_SUPPORTED, like a pre-Volta board.
    nvml_state.write(f"{A6000}\nproc 0 4242 100 60 10\n")
    gpu = make_sampler().sample().gpus[0]
    assert gpu.energy_mj is None
    assert gpu.processes[0].sm_util_pct == 60.0


def test_gpu_removed_between_samples(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write(TWO_GPUS)
    sampler = make_sampler()
    assert len(sampler.sample().gpus) == 2
    nvml_state.write(f"{A6000}\nenergy 0 5100000\nproc 0 4242 18000 70 30\n")
    frame = sampler.sample()
    assert frame.host.gpu_count == 1
    (gpu,) = frame.gpus
    assert gpu.energy_mj == 5_100_000
    assert gpu.processes[0].sm_util_pct == 70.0
    # And back: the returning GPU is read afresh.
    nvml_state.write(TWO_GPUS)
    assert [g.energy_mj for g in sampler.sample().gpus] == [5_000_000, 700_000]


def test_gpu_lost_mid_run_has_no_energy_or_processes(make_sampler, nvml_state) -> None:
    nvml_state.write(TWO_GPUS)
    sampler = make_sampler()
    sampler.sample()
    nvml_state.write(TWO_GPUS.replace(L4.removesuffix(" 0"), L4.removesuffix(" 0") + " 1"))
    healthy, lost = sampler.sample().gpus
    assert is_lost(lost)
    assert lost.energy_mj is None
    assert lost.processes == ()
    assert healthy.energy_mj == 5_000_000


def test_handle_error_on_vanishing_gpu(make_sampler, nvml_state: NvmlState) -> None:
    # The count still says 2 but the second handle is invalid (GPU removed
    # between the count and the handle call): that GPU is listed empty.
    nvml_state.write(f"count 2\n{A6000}\nenergy 0 42\nproc 0 4242 100\n")
    first, second = make_sampler().sample().gpus
    assert first.energy_mj == 42
    assert second.index == 1
    assert (second.energy_mj, second.processes, second.utilization_pct) == (None, (), None)


def test_driver_lacking_the_symbols(fake_nvml_old_driver_lib: Path, tmp_path: Path) -> None:
    # A library that really does not export nvmlDeviceGetProcessUtilization or
    # nvmlDeviceGetTotalEnergyConsumption: pynvml's own FunctionNotFound path.
    # Same soname as the full fake, so it needs a fresh interpreter.
    state = tmp_path / "state"
    state.write_text(TWO_GPUS)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["FAKE_NVML_STATE"] = str(state)
    code = f"""
import json
import pynvml
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
s = NvmlSampler(library_path={str(fake_nvml_old_driver_lib)!r})
frame = s.sample()
pynvml.nvmlInit()
try:
    pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(0))
    lacks = False
except pynvml.NVMLError_FunctionNotFound:
    lacks = True
pynvml.nvmlShutdown()
s.close()
print(json.dumps({{"lacks": lacks,
    "energy": [g.energy_mj for g in frame.gpus],
    "sm": [[p.sm_util_pct for p in g.processes] for g in frame.gpus],
    "mem": [[p.used_memory_mib for p in g.processes] for g in frame.gpus]}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result == {
        "lacks": True,
        "energy": [None, None],
        "sm": [[None, None], [None]],
        "mem": [[18000.0, 2000.0], [600.0]],
    }
