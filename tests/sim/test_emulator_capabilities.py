"""A real agent container reports its slot's GPU facts as capabilities (Docker, emulator).

The supervisor's own path: `build_spec` puts the slot's capabilities into the
container's environment, `DockerRuntime` starts it on the real engine, and the
busybox emulator registers with its environment as capabilities, as the
Azure Pipelines agent does. Names with dots and dashes (``gpu.product``,
``cuda.driver-version.full``) are no shell identifiers: this proves they reach
the registration. The bash path of the real image (start.sh → config.sh → the
agent) is checked in tests/dockeragent/test_start_sh_capabilities.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker.agentspec import build_spec
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts, slot_capabilities
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

from .conftest import PAT, wait_until

pytestmark = pytest.mark.docker

H100 = GpuFacts(0, "GPU-93cb0da6", "NVIDIA H100 80GB HBM3", 81559, (9, 0), True)
HOST = HostGpuFacts("580.159.04", (13, 0), (H100,))


def test_the_agent_registers_with_its_slot_gpu_facts(
    docker_client: Any, emulator_image: str, org: SimOrg, run_label: str
) -> None:
    org.heartbeat_timeout = 3.0
    caps = slot_capabilities(HOST, HOST.gpus, "gpubox3")
    assert {"gpu.product", "cuda.driver-version.full", "mig.capable"} <= set(caps)
    runtime = DockerRuntime(docker_client)
    try:
        with SimServer(org) as server:
            config = Config(
                azure=AzureConfig(url=server.org_url, pool="gpu"),
                agents=AgentsConfig(
                    count=1,
                    image=emulator_image,
                    name_prefix=f"caps{run_label}",
                    gpus="none",
                    network="host",
                ),
            )
            spec = build_spec(config, 0, extra_labels={"gpuci.test": run_label}, capabilities=caps)
            runtime.start(spec, PAT)
            wait_until(lambda: org.find_agent(spec.name) is not None, 20, "the registration")
            agent = org.find_agent(spec.name)
            assert agent is not None
            assert {k: agent.capabilities.get(k) for k in caps} == caps
            assert agent.capabilities["gpu.product"] == "NVIDIA-H100-80GB-HBM3"
            assert PAT not in agent.capabilities.values()
            # A pipeline demanding this GPU is matched to it.
            rid = org.queue_job(
                42, duration=0.1, demands=("gpu.product -equals NVIDIA-H100-80GB-HBM3",)
            )
            assert [a.name for a in org.matched_agents(org.job(rid))] == [spec.name]
    finally:
        runtime.close()
