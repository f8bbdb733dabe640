"""``gpuci-tui run`` for the GPU drills: the real daemon, fake NVML, one seam set for this host.

Run as ``python -m tests.drills.gpu_daemon --config PATH run``. Everything is the
real daemon (supervisor, GPU watch with its NVML event set, gatekeeper, control
socket, history) with the gcc-built fake libnvidia-ml.so.1 (``LD_LIBRARY_PATH``,
``FAKE_NVML_STATE``), except that agent containers get no GPU device request:
this Docker engine has no NVIDIA runtime, and the busybox agent emulator uses no
GPU anyway.
"""

from __future__ import annotations

import sys

from gpuci_tui.core.docker import mapping as runtime_mapping


def _no_device_requests(gpus: str | tuple[str, ...]) -> list[object]:
    return []


if __name__ == "__main__":
    runtime_mapping.device_requests = _no_device_requests  # type: ignore[assignment]
    from gpuci_tui.cli.main import main

    sys.exit(main(sys.argv[1:]))
