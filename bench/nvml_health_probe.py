"""One NVML frame with its health readings, and what each health call costs, on a GPU host.

Usage: python bench/nvml_health_probe.py   (no GPU: prints why NVML is unavailable)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pynvml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: E402


def main() -> None:
    """Print one frame with health readings, then each health call's cost."""
    sampler = NvmlSampler()
    sampler.sample()
    time.sleep(1.0)  # let the Xid watch run and per-process utilisation get a window
    frame = sampler.sample()
    print(json.dumps(asdict(frame), indent=1, default=str))
    if frame.host.available:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        unc = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        calls: dict[str, Callable[[], object]] = {
            "memory_v2": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle, pynvml.nvmlMemory_v2),
            "ecc_volatile": lambda: pynvml.nvmlDeviceGetTotalEccErrors(handle, unc, 0),
            "remapped_rows": lambda: pynvml.nvmlDeviceGetRemappedRows(handle),
            "clocks_event_reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
            "energy": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        }
        for name, fn in calls.items():
            start = time.perf_counter()
            for _ in range(20):
                try:
                    fn()
                except pynvml.NVMLError as exc:
                    print(f"{name}: {exc}")
                    break
            print(f"{name}: {(time.perf_counter() - start) / 20 * 1000:.3f} ms a call")
    sampler.close()


if __name__ == "__main__":
    main()
