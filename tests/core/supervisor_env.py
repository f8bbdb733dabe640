"""The in-process supervisor against the simulated organisation: shared test scaffolding."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime

# The host tests wait inside their event loop; they import it from here by this name.
from tests.waiting import wait_until_async as wait_until  # noqa: F401

PAT = "sim-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456789"
BROKEN = "gpuci-sim/broken:1"


class StaticTokens:
    def get_token(self, org_url: str) -> str:
        return PAT


@dataclass
class Env:
    org: SimOrg
    pool_id: int
    runtime: SimulatedRuntime
    api: SimPoolApi
    config: Config

    def supervisor(self, **overrides: object) -> Supervisor:
        config = self.config
        if overrides:
            config = replace(config, agents=replace(config.agents, **overrides))  # type: ignore[arg-type]
        return Supervisor(config, api=self.api, runtime=self.runtime, tokens=StaticTokens())

    def running(self) -> list[str]:
        return [c.name for c in self.runtime.list_containers({}) if c.status == "running"]


def make_env() -> Env:
    """An organisation with a pool, the in-process runtime and a two-slot config (no standby)."""
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    pool_id = org.add_pool("gpu")
    runtime = SimulatedRuntime(org, broken_images=(BROKEN,), destroy_delay=0.05)
    config = Config(
        azure=AzureConfig(url="http://127.0.0.1:9", pool="gpu"),
        agents=AgentsConfig(
            count=2, image=DEFAULT_IMAGE, name_prefix="t", gpus="none", standby=False
        ),
        supervisor=SupervisorConfig(
            poll_interval=0.1, backoff_base=0.05, backoff_max=0.2, park_after=3, stop_timeout=5
        ),
    )
    return Env(org, pool_id, runtime, SimPoolApi(org, PAT), config)
