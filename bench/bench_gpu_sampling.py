"""GPU sampling benchmark: CPU per GPU of one sample, health reads and the Xid watch included.

The real `NvmlSampler` (pynvml) on the gcc-built fake libnvidia-ml.so.1 with 8 GPUs whose
energy call costs what it costs on a real H100 (3.4 ms, shared/gpu-h100), in three cases:

* ``idle``: no process on any GPU, so no energy read (the rule: only GPUs running a job);
* ``busy``: one process on every GPU, so 8 energy reads per sample (what every sample cost
  before the rule);
* ``watch``: no sampling at all, the Xid event thread alone for 10 s (its own CPU).

Figures: wall and CPU (the whole process, every thread) per sample, CPU per GPU per sample,
and the share of one core at the default 1 Hz. The fake re-reads its state file on every
call, which a real driver does not: the figures are an upper bound of the Python side.

Usage: python bench/bench_gpu_sampling.py [--samples 50]
Writes bench/results/gpu_sampling.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_observe import build_fake_nvml  # noqa: E402

from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: E402

GPUS = 8
H100 = "gpu NVIDIA_H100_80GB_HBM3 GPU-{i:08d} 0 0 0 81559 38 70800 700000 0\nreserved {i} 480\n"


def state(busy: bool) -> str:
    lines = ["energy_cost_us 3400"]
    for i in range(GPUS):
        lines.append(H100.format(i=i).rstrip("\n"))
        lines.append(f"energy {i} {2_325_625 + i}")
        if busy:
            lines.append(f"proc {i} {4000 + i} 13290 98 30")
    return "\n".join(lines) + "\n"


def measure(sampler: NvmlSampler, samples: int) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(samples):
        w0, c0 = time.perf_counter(), time.process_time()
        sampler.sample()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    cpu = statistics.median(cpus)
    return {
        "wall_ms_p50": round(statistics.median(walls) * 1000, 3),
        "cpu_ms_p50": round(cpu * 1000, 3),
        "cpu_ms_per_gpu": round(cpu * 1000 / GPUS, 3),
        "core_pct_at_1hz": round(cpu * 100, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_fake_nvml(Path(tmp))
        state_file = Path(tmp) / "nvml.state"
        os.environ["FAKE_NVML_STATE"] = str(state_file)
        sampler = NvmlSampler(library_path=lib)
        results: dict[str, Any] = {}
        try:
            for case, busy in (("idle", False), ("busy", True)):
                state_file.write_text(state(busy))
                sampler.sample()  # warm: NVML init, event set registered
                results[case] = measure(sampler, args.samples)
            state_file.write_text(state(False))
            c0, w0 = time.process_time(), time.perf_counter()
            time.sleep(10.0)  # nothing samples: only the Xid watch thread runs
            results["watch"] = {
                "core_pct": round((time.process_time() - c0) / (time.perf_counter() - w0) * 100, 3)
            }
        finally:
            sampler.close()
    out = {"gpus": GPUS, "energy_call_ms": 3.4, "samples": args.samples, **results}
    (ROOT / "bench" / "results" / "gpu_sampling.json").write_text(json.dumps(out, indent=1) + "\n")
    print("| case | wall p50 ms | CPU p50 ms | CPU ms per GPU | % of a core at 1 Hz |")
    print("|---|---|---|---|---|")
    for case in ("idle", "busy"):
        r = results[case]
        print(
            f"| {case} | {r['wall_ms_p50']} | {r['cpu_ms_p50']} | {r['cpu_ms_per_gpu']} "
            f"| {r['core_pct_at_1hz']} |"
        )
    print(f"| Xid watch alone | | | | {results['watch']['core_pct']} |")


if __name__ == "__main__":
    main()
