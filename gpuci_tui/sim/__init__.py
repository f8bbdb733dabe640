"""Simulated Azure DevOps organisation and agent emulator (demo and tests).

* `SimOrg` — the organisation's state and rules (org.py, org_agents.py);
* `SimPoolApi` — the `AgentPoolApi` protocol served in-process from a `SimOrg`;
* `SimulatedRuntime` — an in-process `ContainerRuntime` whose containers are threads;
* `SimServer` — the organisation over real HTTP on 127.0.0.1 (server.py);
* `build_emulator_image` — the busybox agent emulator image for real Docker (image.py);
* `JobFeeder` / `queue_batch` — job generators (jobs.py).

The names are imported lazily, so ``python -m gpuci_tui.sim.server`` does not
import its own module twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuci_tui.sim.api import SimPoolApi
    from gpuci_tui.sim.container import AgentTiming
    from gpuci_tui.sim.image import build_emulator_image
    from gpuci_tui.sim.jobs import JobFeeder, queue_batch
    from gpuci_tui.sim.org import SimOrg
    from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
    from gpuci_tui.sim.server import SimServer

_WHERE = {
    "AgentTiming": "container",
    "SimPoolApi": "api",
    "build_emulator_image": "image",
    "JobFeeder": "jobs",
    "queue_batch": "jobs",
    "SimOrg": "org",
    "DEFAULT_IMAGE": "runtime",
    "SimulatedRuntime": "runtime",
    "SimServer": "server",
}

__all__ = [
    "DEFAULT_IMAGE",
    "AgentTiming",
    "JobFeeder",
    "SimOrg",
    "SimPoolApi",
    "SimServer",
    "SimulatedRuntime",
    "build_emulator_image",
    "queue_batch",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'gpuci_tui.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpuci_tui.sim.{_WHERE[name]}"), name)
