"""start.sh leaves gpuci-tui's marker to the agent, which reports its environment as capabilities."""

from __future__ import annotations

from tests.dockeragent.start_sh_harness import Agent


def test_the_marker_reaches_config_and_run_and_is_not_ignored(agent: Agent) -> None:
    result = agent.run(GPUCI_INSTANCE="a1b2c3d4e5f6", GPUCI_HOST="gpu-host-1")
    assert result.code == 0, result.out
    # config.sh sends the system capabilities at registration; run.sh's listener too.
    for mode in ("configure", "run"):
        env = agent.environ(mode)
        assert (env["GPUCI_INSTANCE"], env["GPUCI_HOST"]) == ("a1b2c3d4e5f6", "gpu-host-1")
        ignored = set(env["VSO_AGENT_IGNORE"].split(","))
        assert not ignored & {"GPUCI_INSTANCE", "GPUCI_HOST"}, mode
