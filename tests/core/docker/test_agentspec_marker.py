"""Every agent container carries the marker of its instance and host (see `engine.stale`)."""

from __future__ import annotations

import socket

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, instance_id
from gpuci_tui.core.docker.agentspec import build_spec
from gpuci_tui.core.engine.lifecycle import Lane


def test_both_lanes_carry_the_instance_and_the_host() -> None:
    config = Config(
        azure=AzureConfig(url="https://dev.azure.com/acme", pool="gpu"),
        agents=AgentsConfig(count=2, image="acme/agent:1", name_prefix="box"),
    )
    for lane in Lane:
        env = build_spec(config, 1, lane).environment
        assert env["GPUCI_INSTANCE"] == instance_id(config)
        assert env["GPUCI_HOST"] == socket.gethostname()
