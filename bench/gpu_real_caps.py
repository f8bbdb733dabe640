"""On a host with a real GPU: what gpuci-tui's agents would advertise, the topology the slot
shapes read, and what each call costs (issue 22). Prints JSON; CI never runs it (no GPU).

    python bench/gpu_real_caps.py > caps.json

Reads through the project's own code: `nvml_facts.read_nvml_facts` (once per GPU, as the
daemon does at the first start), `capabilities.slot_capabilities` for a one-GPU slot,
`nvml_topology.read_nvml_topology` (NVLink, PCIe ancestors, MIG devices) and the slot
planner for ``gpus_per_slot`` 1 and, where the host has them, 2 and ``mig``.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuci_tui.core.config.slot_shapes import ShapeError, gpu_slots, mig_slots  # noqa: E402
from gpuci_tui.core.gpu.capabilities import select_gpus, slot_capabilities  # noqa: E402
from gpuci_tui.core.gpu.nvml_facts import read_nvml_facts  # noqa: E402
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: E402
from gpuci_tui.core.gpu.nvml_topology import read_nvml_topology  # noqa: E402


def timed(fn, runs: int = 10):  # type: ignore[no-untyped-def]
    """The last result and the median cost in ms over ``runs`` calls."""
    costs, result = [], None
    for _ in range(runs):
        began = time.perf_counter()
        result = fn()
        costs.append((time.perf_counter() - began) * 1000)
    return result, round(statistics.median(costs), 3)


def main() -> int:
    sampler = NvmlSampler()
    host = sampler.host_info()
    out: dict[str, object] = {"host": {"available": host.available, "driver": host.driver_version,
                                       "cuda": host.cuda_driver_version, "gpus": host.gpu_count,
                                       "reason": host.reason}}  # fmt: skip
    if not host.available:
        print(json.dumps(out, indent=2, default=str))
        return 1
    facts, cost = timed(lambda: read_nvml_facts(sampler))
    out["facts_ms"] = cost
    out["facts"] = facts
    out["slot0_capabilities"] = dict(
        slot_capabilities(facts, select_gpus(facts, ["0"]), socket.gethostname())
    )
    topology, cost = timed(lambda: read_nvml_topology(sampler))
    out["topology_ms"] = cost
    out["topology"] = topology
    plans: dict[str, object] = {}
    for per_slot in (1, 2):
        try:
            plans[f"gpus_per_slot={per_slot}"] = gpu_slots(
                topology, max(host.gpu_count // per_slot, 1), per_slot
            )
        except ShapeError as exc:
            plans[f"gpus_per_slot={per_slot}"] = f"refused: {exc}"
    try:
        plans["mig"] = mig_slots(topology, 1)
    except ShapeError as exc:
        plans["mig"] = f"refused: {exc}"
    out["plans"] = plans
    frame, cost = timed(sampler.sample, runs=5)
    out["sample_ms"] = cost
    sampler.close()
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
