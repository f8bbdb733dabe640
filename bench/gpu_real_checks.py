"""On a real GPU host: sampling cost, admission against a real CUDA process, the CUDA check.

Needs NVML (nvidia-ml-py) and, for the foreign process, PyTorch with CUDA. Prints
one line per finding; run it where a GPU is lent (CI has none: the fake NVML is
the test of record).

Usage: python bench/gpu_real_checks.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuci_tui.core.engine.gpu_admission import GpuAdmission, verdict  # noqa: E402
from gpuci_tui.core.gpu.cuda_fit import DriverCuda, need_of, refusal  # noqa: E402
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: E402
from gpuci_tui.core.gpu_readings import GpuFrame  # noqa: E402

#: A CUDA process that is not one of ours: 8 GiB held and a busy SM for 25 s.
FOREIGN = (
    "import torch,time\n"
    "x=torch.empty(8*2**30,dtype=torch.uint8,device='cuda')\n"
    "y=torch.randn(8192,8192,device='cuda')\n"
    "print('ready',flush=True)\n"
    "t=time.time()\n"
    "while time.time()-t<25: y=y@y; y=y/y.norm()\n"
    "torch.cuda.synchronize()\n"
)


def sample_cost(sampler: NvmlSampler, n: int, pause: float) -> tuple[float, float, GpuFrame]:
    """Median and worst wall time of ``n`` samples (ms), and the last frame."""
    times = []
    frame = sampler.sample()
    for _ in range(n):
        start = time.perf_counter()
        frame = sampler.sample()
        times.append(time.perf_counter() - start)
        time.sleep(pause)
    times.sort()
    return 1000 * times[n // 2], 1000 * times[-1], frame


def main() -> None:
    """Print the findings."""
    sampler = NvmlSampler()
    host = sampler.host_info()
    print("host", host)
    if not host.available:
        return
    sampler.sample()
    time.sleep(1.0)
    p50, worst, _ = sample_cost(sampler, 20, 0.0)
    print(f"idle sample: p50 {p50:.2f} ms, max {worst:.2f} ms")
    foreign = subprocess.Popen([sys.executable, "-c", FOREIGN], stdout=subprocess.PIPE, text=True)
    assert foreign.stdout is not None
    foreign.stdout.readline()
    started = time.perf_counter()
    while not sampler.sample().gpus[0].processes and time.perf_counter() - started < 15:
        time.sleep(0.1)
    print(f"foreign process seen after {time.perf_counter() - started:.3f} s")
    time.sleep(2.0)
    p50, worst, frame = sample_cost(sampler, 10, 0.2)
    gpu = frame.gpus[0]
    print(f"busy sample: p50 {p50:.2f} ms, max {worst:.2f} ms; util {gpu.utilization_pct} %")
    for process in gpu.processes:
        print("process", process)
    rules = {
        "exclusive": GpuAdmission("exclusive"),
        "limits 4GiB": GpuAdmission("limits", 4096, "4GiB"),
        "limits 16GiB": GpuAdmission("limits", 16384, "16GiB"),
        "off": GpuAdmission("off"),
    }
    for name, rule in rules.items():
        print(f"admission {name}: {verdict(gpu, rule, lambda p: False)}")
    foreign.wait(60)
    driver = DriverCuda(host.driver_version, host.cuda_driver_version)
    print("driver", driver)
    for env in (
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.4"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=13.0"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=13.2"],
        ["CUDA_VERSION=13.9.0"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=13.9", "NVIDIA_DISABLE_REQUIRE=1"],
    ):
        need = need_of(env, {})
        print(f"cuda check {env}: {refusal('reg/agent:amd64-ubuntu24.04-cuda13.9', need, driver)}")


if __name__ == "__main__":
    main()
