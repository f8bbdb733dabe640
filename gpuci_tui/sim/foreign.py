"""Agents of other hosts in the pool: what a large organisation's shared pool holds.

A pool shared by a fleet holds thousands of agents that are not this host's: other
hosts' gpuci-tui lanes (their own instance and host markers), online and offline,
some disabled (their standbys). Each reports its environment as system
capabilities (azure-devops-api.md §2.4), about 1.3 KB of JSON per agent with
capabilities and 0.4 KB without. `add_foreign_agents` registers such agents, kept
alive by their hosts (`SimOrg.add_elsewhere`): they take no job here, and they are
what a read of the whole pool pays for (``gpuci-tui demo --foreign-agents N``,
``python -m gpuci_tui.sim.server --foreign-agents N``, bench/bench_org_bill.py).
"""

from __future__ import annotations

import hashlib
import random

from gpuci_tui.sim.names import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.sim.org import SimOrg

AGENTS_PER_HOST = 8
"""Lanes per other host (4 slots, each with a standby)."""
ONLINE_SHARE = 0.7
"""Of the other hosts' agents, how many are online (the rest are between registrations)."""
DISABLED_SHARE = 0.25
"""Of the online ones, how many are disabled (their hosts' hot standbys)."""
_PRODUCTS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA A10")


def add_foreign_agents(org: SimOrg, pool_id: int, count: int, *, seed: int = 7) -> list[int]:
    """Register ``count`` agents of other hosts in ``pool_id`` (the same ones for a seed).

    Returns:
        Their agent ids.
    """
    rng = random.Random(seed)
    ids = []
    for index in range(count):
        host_no, lane = divmod(index, AGENTS_PER_HOST)
        host = f"gpu-fleet-{host_no:05d}"
        online = rng.random() < ONLINE_SHARE
        enabled = not online or rng.random() >= DISABLED_SHARE
        name = f"{host}-{lane // 2}" + ("-b" if lane % 2 else "")
        caps = _capabilities(host, name, host_no, lane, org.agent_version)
        since = org.clock() - rng.uniform(60.0, 7 * 86400.0)
        ids.append(
            org.add_elsewhere(pool_id, name, caps, online=online, enabled=enabled, since=since)
        )
    return ids


def _capabilities(host: str, name: str, host_no: int, lane: int, version: str) -> dict[str, str]:
    """What an agent container of another host reports: the agent's facts and its env."""
    instance = hashlib.sha256(f"fleet\n{host}".encode()).hexdigest()[:12]
    container = hashlib.sha256(f"{host}/{name}".encode()).hexdigest()[:12]
    product = _PRODUCTS[host_no % len(_PRODUCTS)]
    return {
        "Agent.Name": name,
        "Agent.OS": "Linux",
        "Agent.OSArchitecture": "X64",
        "Agent.OSVersion": "24.04",
        "Agent.Version": version,
        "Agent.ComputerName": container,
        "Agent.HomeDirectory": "/azp",
        "HOSTNAME": container,
        "HOME": "/root",
        "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:"
        "/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "AZP_URL": "https://dev.azure.com/contoso",
        "AZP_POOL": "gpu",
        "AZP_AGENT_NAME": name,
        "AZP_WORK": "_work",
        "GPUCI_SLOT": str(lane // 2),
        MARKER_INSTANCE: instance,
        MARKER_HOST: host,
        "NVIDIA_VISIBLE_DEVICES": f"GPU-{container[:8]}-0000-4000-8000-{container}",
        "CUDA_VERSION": "12.6.3",
        "gpu.count": "1",
        "gpu.product": product,
        "gpu.memory_mib": "81559",
        "gpu.driver": "560.35.03",
        "gpu.cuda": "12.6",
    }
