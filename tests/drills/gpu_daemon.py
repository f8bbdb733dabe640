"""``gpuci-tui run`` for the GPU drills: the real daemon, fake NVML, two seams set for this host.

Run as ``python -m tests.drills.gpu_daemon --config PATH run``. Everything is the
real daemon (supervisor, GPU watch, gatekeeper, control socket, history) with
the gcc-built fake libnvidia-ml.so.1 (``LD_LIBRARY_PATH``, ``FAKE_NVML_STATE``),
except:

* agent containers get no GPU device request: this Docker engine has no NVIDIA
  runtime, and the busybox agent emulator uses no GPU anyway;
* Xid events are read from the file named by ``$DRILL_GPU_HEALTH`` (lines
  ``xid GPU-INDEX XID``, consumed once, like an event) and added to the next
  frame's `GpuHealthReading`: NVML event sets are the sampler's side of issue 14,
  built on another branch. The health rules under test are the engine's.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

from gpuci_tui.core import runtime_mapping
from gpuci_tui.core.gpu import NvmlSampler
from gpuci_tui.core.protocols import GpuFrame, GpuHealthReading, XidEvent

_sample = NvmlSampler.sample


def _no_device_requests(gpus: str | tuple[str, ...]) -> list[object]:
    return []


def _events() -> dict[int, list[int]]:
    path = os.environ.get("DRILL_GPU_HEALTH")
    if not path:
        return {}
    try:
        text = Path(path).read_text()
        Path(path).unlink()
    except FileNotFoundError:
        return {}
    out: dict[int, list[int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "xid":
            out.setdefault(int(parts[1]), []).append(int(parts[2]))
    return out


def _sample_with_events(self: NvmlSampler) -> GpuFrame:
    frame = _sample(self)
    events = _events()
    if not events:
        return frame
    gpus = []
    for gpu in frame.gpus:
        xids = events.get(gpu.index)
        if xids:
            health = gpu.health or GpuHealthReading()
            added = tuple(XidEvent(x, time.time()) for x in xids)
            gpu = dataclasses.replace(
                gpu, health=dataclasses.replace(health, xid_events=health.xid_events + added)
            )
        gpus.append(gpu)
    return dataclasses.replace(frame, gpus=tuple(gpus))


if __name__ == "__main__":
    runtime_mapping.device_requests = _no_device_requests  # type: ignore[assignment]
    NvmlSampler.sample = _sample_with_events  # type: ignore[method-assign]
    from gpuci_tui.cli.main import main

    sys.exit(main(sys.argv[1:]))
