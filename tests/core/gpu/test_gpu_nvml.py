"""NvmlSampler through the real pynvml against the project's fake libnvidia-ml.so.1.

The fake (tests/fixtures/fake_nvml.c) is compiled once per session with gcc and
preloaded through NvmlSampler's ``library_path``; each test describes the
"hardware" in a state file the library re-reads on every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pynvml
import pytest

from gpuci_tui.core.gpu.nvml_sampler import LOST_MARK, cuda_version_tuple, is_lost
from tests.core.nvml_helpers import NvmlState

pytestmark = pytest.mark.nvml

CID = "4f1c2a9b" * 8

A6000 = "gpu NVIDIA_RTX_A6000 GPU-11111111-2222-3333-4444-555555555555"
DEFAULT_STATE = f"""
driver 580.82.07
cuda 13000
cuda_v2 13000
{A6000} 87 40 20480 49140 71 212000 300000 0
gpu NVIDIA_L4 GPU-66666666-7777-8888-9999-000000000000 0 0 0 23034 34 16000 72000 0
proc 0 4242 18000
proc 0 4343 E3
"""


@pytest.fixture(autouse=True)
def state(nvml_state: NvmlState) -> NvmlState:
    """Every test starts from DEFAULT_STATE."""
    nvml_state.write(DEFAULT_STATE)
    return nvml_state


def test_reads_driver_cuda_and_every_metric(make_sampler) -> None:
    sampler = make_sampler(clock=lambda: 1234.5)
    host = sampler.host_info()
    assert host.available
    assert host.reason == ""
    assert host.driver_version == "580.82.07"
    assert host.cuda_driver_version == (13, 0)
    assert host.gpu_count == 2

    frame = sampler.sample()
    assert frame.taken_at == 1234.5
    assert frame.host == host
    a6000, l4 = frame.gpus
    assert a6000.index == 0
    assert a6000.name == "NVIDIA RTX A6000"
    assert a6000.uuid == "GPU-11111111-2222-3333-4444-555555555555"
    assert a6000.utilization_pct == 87.0
    assert a6000.memory_used_mib == 20480.0
    assert a6000.memory_total_mib == 49140.0
    assert a6000.temperature_c == 71.0
    assert a6000.power_w == 212.0
    assert a6000.power_limit_w == 300.0
    assert [p.pid for p in a6000.processes] == [4242, 4343]
    assert a6000.processes[0].used_memory_mib == 18000.0
    # The driver could not attribute memory to this process: N/A, not 0.
    assert a6000.processes[1].used_memory_mib is None
    assert l4.index == 1
    assert l4.name == "NVIDIA L4"
    assert l4.processes == ()
    assert not is_lost(a6000)


def test_sees_live_changes_between_samples(make_sampler, state: NvmlState) -> None:
    sampler = make_sampler()
    assert sampler.sample().gpus[0].utilization_pct == 87.0
    state.write(DEFAULT_STATE.replace(f"{A6000} 87 40 20480", f"{A6000} 3 1 512"))
    gpu = sampler.sample().gpus[0]
    assert gpu.utilization_pct == 3.0
    assert gpu.memory_used_mib == 512.0


def test_unsupported_field_is_none_for_that_field_only(make_sampler, state: NvmlState) -> None:
    state.write(f"{A6000} E3 E3 100 49140 E3 E3 300000 0\n")
    gpu = make_sampler().sample().gpus[0]
    assert gpu.utilization_pct is None
    assert gpu.temperature_c is None
    assert gpu.power_w is None
    assert gpu.memory_used_mib == 100.0
    assert gpu.power_limit_w == 300.0
    assert gpu.name == "NVIDIA RTX A6000"


def test_any_other_field_error_is_none_too(make_sampler, state: NvmlState) -> None:
    # 999 = NVML_ERROR_UNKNOWN, 4 = NO_PERMISSION: neither may break the frame.
    state.write(f"{A6000} 50 1 100 49140 40 1000 E4 0\nfail nvmlDeviceGetMemoryInfo_v2 999\n")
    gpu = make_sampler().sample().gpus[0]
    assert gpu.memory_used_mib is None
    assert gpu.memory_total_mib is None
    assert gpu.utilization_pct == 50.0


@pytest.mark.parametrize(
    "missing",
    [
        [],
        ["nvmlDeviceGetComputeRunningProcesses_v3"],
        ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"],
    ],
    ids=["v3", "v2", "v1"],
)
def test_process_list_falls_back_v3_v2_v1(make_sampler, state: NvmlState, missing) -> None:
    # 13 = FUNCTION_NOT_FOUND: what pynvml raises when an older driver lacks the symbol.
    state.write(DEFAULT_STATE + "".join(f"fail {name} 13\n" for name in missing))
    procs = make_sampler().sample().gpus[0].processes
    assert [(p.pid, p.used_memory_mib) for p in procs] == [(4242, 18000.0), (4343, None)]


def test_no_process_list_at_all_gives_empty_processes(make_sampler, state: NvmlState) -> None:
    state.write(
        DEFAULT_STATE
        + "fail nvmlDeviceGetComputeRunningProcesses_v3 13\n"
        + "fail nvmlDeviceGetComputeRunningProcesses_v2 13\n"
        + "fail nvmlDeviceGetComputeRunningProcesses 13\n"
    )
    gpu = make_sampler().sample().gpus[0]
    assert gpu.processes == ()
    assert gpu.utilization_pct == 87.0


def test_not_supported_process_list_does_not_fall_back(make_sampler, state: NvmlState) -> None:
    # NOT_SUPPORTED (e.g. some vGPU setups) is an answer, not a missing function.
    state.write(DEFAULT_STATE + "fail nvmlDeviceGetComputeRunningProcesses_v3 3\n")
    assert make_sampler().sample().gpus[0].processes == ()


def test_temperature_falls_back_to_legacy_call(make_sampler, state: NvmlState) -> None:
    state.write(DEFAULT_STATE + "fail nvmlDeviceGetTemperatureV 13\n")
    assert make_sampler().sample().gpus[0].temperature_c == 71.0
    state.write(
        DEFAULT_STATE + "fail nvmlDeviceGetTemperatureV 13\nfail nvmlDeviceGetTemperature 13\n"
    )
    assert make_sampler().sample().gpus[0].temperature_c is None


def test_power_limit_fallback_to_symbol_missing_from_library(
    make_sampler, state: NvmlState
) -> None:
    # The fake library really lacks nvmlDeviceGetPowerManagementLimit, so the
    # fallback meets pynvml's own FunctionNotFound: the field is N/A, no crash.
    state.write(DEFAULT_STATE + "fail nvmlDeviceGetEnforcedPowerLimit 13\n")
    gpu = make_sampler().sample().gpus[0]
    assert gpu.power_limit_w is None
    assert gpu.power_w == 212.0


def test_cuda_version_falls_back_to_v1_then_none(make_sampler, state: NvmlState) -> None:
    # _v2 fails with LIBRARY_NOT_FOUND when libcuda is missing; v1 still answers.
    state.write(
        DEFAULT_STATE.replace("cuda_v2 13000", "cuda_v2 E12").replace("cuda 13000", "cuda 12040")
    )
    assert make_sampler().host_info().cuda_driver_version == (12, 4)
    state.write(
        DEFAULT_STATE.replace("cuda_v2 13000", "cuda_v2 E12").replace("cuda 13000", "cuda E3")
    )
    host = make_sampler().host_info()
    assert host.available
    assert host.cuda_driver_version is None


def test_a_driver_changed_under_the_sampler_is_seen_at_the_next_sample(
    make_sampler, state: NvmlState
) -> None:
    """An upgrade or a rollback under a running daemon: the CUDA check of the images follows it."""
    sampler = make_sampler()
    assert sampler.sample().host.driver_version == "580.82.07"
    older = DEFAULT_STATE.replace("580.82.07", "535.104.05").replace("13000", "12020")
    state.write(older)
    host = sampler.sample().host
    assert (host.driver_version, host.cuda_driver_version) == ("535.104.05", (12, 2))
    assert sampler.host_info() == host
    # A failed re-read keeps what was read last, rather than forgetting the driver.
    state.write(
        older + "fail nvmlSystemGetDriverVersion 999\nfail nvmlSystemGetCudaDriverVersion_v2 999\n"
        "fail nvmlSystemGetCudaDriverVersion 999\n"
    )
    host = sampler.sample().host
    assert (host.driver_version, host.cuda_driver_version) == ("535.104.05", (12, 2))
    # A new version whose CUDA cannot be read: none, rather than the old driver's.
    state.write(
        older.replace("535.104.05", "550.54.15")
        + "fail nvmlSystemGetCudaDriverVersion_v2 999\nfail nvmlSystemGetCudaDriverVersion 999\n"
    )
    host = sampler.sample().host
    assert (host.driver_version, host.cuda_driver_version) == ("550.54.15", None)


def test_nvml_is_started_again_after_the_driver_went_away(make_sampler, state: NvmlState) -> None:
    """A driver unloaded and reloaded (an upgrade without reboot) kills the NVML session: the
    sampler starts NVML again after its retry interval and reads the new driver."""
    sampler = make_sampler(retry_interval=0.0)
    assert sampler.sample().host.driver_version == "580.82.07"
    # Reloaded: the old session answers nothing any more, a new one reads the new driver.
    state.write(DEFAULT_STATE.replace("580.82.07", "580.95.05") + "reload 1\n")
    gone = sampler.sample().host
    assert not gone.available and "could not count the GPUs" in gone.reason
    host = sampler.sample().host
    assert host.available and host.driver_version == "580.95.05"
    assert len(sampler.sample().gpus) == 2


def test_lost_gpu_is_listed_and_marked(make_sampler, state: NvmlState) -> None:
    sampler = make_sampler()
    assert not is_lost(sampler.sample().gpus[1])
    lost_l4 = "gpu NVIDIA_L4 GPU-66666666-7777-8888-9999-000000000000 0 0 0 23034 34 16000 72000 1"
    state.write(
        DEFAULT_STATE.replace(
            "gpu NVIDIA_L4 GPU-66666666-7777-8888-9999-000000000000 0 0 0 23034 34 16000 72000 0",
            lost_l4,
        )
    )
    frame = sampler.sample()
    healthy, lost = frame.gpus
    assert is_lost(lost)
    # The name learned from earlier samples is kept, so the operator sees which GPU.
    assert lost.name == "NVIDIA L4" + LOST_MARK
    assert lost.uuid == "GPU-66666666-7777-8888-9999-000000000000"
    assert lost.utilization_pct is None
    assert lost.memory_total_mib is None
    assert not is_lost(healthy)
    assert healthy.utilization_pct == 87.0


def test_gpu_lost_before_first_sample_still_listed(make_sampler, state: NvmlState) -> None:
    state.write(f"{A6000} 1 1 1 49140 1 1 1 1\n")
    (gpu,) = make_sampler().sample().gpus
    assert gpu.name == "GPU 0" + LOST_MARK
    assert is_lost(gpu)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (18, "version mismatch"),
        (9, "kernel driver is not loaded"),
        (4, "No permission"),
        (999, "nvidia-smi"),
    ],
)
def test_init_failure_is_a_plain_reason_not_a_crash(make_sampler, state, code, words) -> None:
    state.write(DEFAULT_STATE + f"init {code}\n")
    sampler = make_sampler()
    frame = sampler.sample()
    assert frame.gpus == ()
    assert not frame.host.available
    assert words in frame.host.reason
    assert "Traceback" not in frame.host.reason
    assert sampler.host_info() == frame.host


def test_init_is_retried_after_the_interval(make_sampler, state: NvmlState) -> None:
    state.write(DEFAULT_STATE + "init 9\n")
    cached = make_sampler(retry_interval=3600)
    retrying = make_sampler(retry_interval=0)
    assert not cached.host_info().available
    assert not retrying.host_info().available
    state.write(DEFAULT_STATE)  # the operator loaded the driver
    assert not cached.host_info().available
    assert retrying.host_info().available
    assert len(retrying.sample().gpus) == 2


def test_zero_gpus_is_unavailable_with_driver_facts(make_sampler, state: NvmlState) -> None:
    state.write("driver 550.54.15\ncuda 12040\ncuda_v2 12040\n")
    host = make_sampler().host_info()
    assert not host.available
    assert "sees no GPU" in host.reason
    assert host.driver_version == "550.54.15"
    assert host.cuda_driver_version == (12, 4)


def test_bad_library_path_is_reported(make_sampler, tmp_path: Path) -> None:
    sampler = make_sampler(library_path=tmp_path / "nope" / "libnvidia-ml.so.1")
    frame = sampler.sample()
    assert not frame.host.available
    assert "Could not load the NVML library" in frame.host.reason
    assert str(tmp_path / "nope") in frame.host.reason


def test_close_shuts_nvml_down_and_sampling_again_reinits(make_sampler) -> None:
    sampler = make_sampler()
    assert sampler.host_info().available
    sampler.close()
    # The fake answers UNINITIALIZED once every nvmlInit was matched by a shutdown.
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
    assert len(sampler.sample().gpus) == 2
    sampler.close()
    sampler.close()  # idempotent


def test_processes_map_to_containers_and_names(make_sampler, state, tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    (proc / "4242" / "comm").write_text("python3\n")
    (proc / "4343").mkdir()
    (proc / "4343" / "cgroup").write_text("0::/user.slice/user-1000.slice/session-4.scope\n")
    (proc / "4343" / "comm").write_text("Xorg\n")
    calls: list[str] = []

    def name_of(cid: str) -> str | None:
        calls.append(cid)
        return "gpu-host-1"

    sampler = make_sampler(proc_root=proc, container_name=name_of)
    ours, foreign = sampler.sample().gpus[0].processes
    assert ours.container_id == CID
    assert ours.container_name == "gpu-host-1"
    assert ours.name == "python3"
    assert foreign.container_id is None
    assert foreign.container_name is None
    assert foreign.name == "Xorg"
    sampler.sample()
    assert calls == [CID]  # the name is cached per container id


def test_failing_name_callback_never_breaks_sampling(make_sampler, tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(f"12:memory:/docker/{CID}\n")

    def broken(cid: str) -> str | None:
        raise RuntimeError("docker is down")

    procs = make_sampler(proc_root=proc, container_name=broken).sample().gpus[0].processes
    assert procs[0].container_id == CID
    assert procs[0].container_name is None
    assert procs[0].name is None  # no comm file: the process is gone


def test_vanished_process_is_kept_without_mapping(make_sampler, tmp_path: Path) -> None:
    procs = make_sampler(proc_root=tmp_path / "empty").sample().gpus[0].processes
    assert [p.pid for p in procs] == [4242, 4343]
    assert all(p.container_id is None and p.name is None for p in procs)


def test_concurrent_sampling_is_safe(make_sampler) -> None:
    sampler = make_sampler()
    errors: list[BaseException] = []
    counts: list[int] = []

    def work() -> None:
        try:
            for _ in range(25):
                counts.append(len(sampler.sample().gpus))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert counts == [2] * 100


def test_cuda_version_decoding() -> None:
    assert cuda_version_tuple(12040) == (12, 4)
    assert cuda_version_tuple(13000) == (13, 0)
    assert cuda_version_tuple(11080) == (11, 8)


def _fresh_python(code: str, env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_no_library_means_no_gpu_and_init_is_lazy(tmp_path: Path) -> None:
    # A fresh interpreter: in this one the fake library is already loaded.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    code = """
import json, pynvml
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
s = NvmlSampler()
lazy = pynvml.nvmlLib is None
frame = s.sample()
s.close()
print(json.dumps({"lazy": lazy, "available": frame.host.available,
                  "reason": frame.host.reason, "gpus": len(frame.gpus)}))
"""
    result = _fresh_python(code, env)
    assert result["lazy"] is True
    assert result["available"] is False
    assert result["gpus"] == 0
    assert "libnvidia-ml.so.1) not found" in result["reason"]
    assert "Install the NVIDIA driver" in result["reason"]


def test_library_found_through_linker_path(fake_nvml_lib: Path, state: NvmlState) -> None:
    # Without library_path, pynvml's own soname lookup (LD_LIBRARY_PATH) is used.
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml_lib.parent))
    code = """
import json
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
s = NvmlSampler()
frame = s.sample()
s.close()
print(json.dumps({"available": frame.host.available, "names": [g.name for g in frame.gpus]}))
"""
    result = _fresh_python(code, env)
    assert result == {"available": True, "names": ["NVIDIA RTX A6000", "NVIDIA L4"]}
