"""dockeragent/start.sh's start gate: registered, then no agent until the go file is there.

With AZP_GO_FILE set, start.sh registers (config.sh), prints the line the
supervisor reads and waits for the file before run.sh may start the agent: the
registration can take no job meanwhile. A SIGTERM while it waits leaves it
registered and offline (exit 143), like a SIGTERM while idle.
"""

from __future__ import annotations

import signal

from gpuci_tui.core.engine import agent_exit
from gpuci_tui.core.engine.agent.output import AwaitingGo, parse_line
from tests.dockeragent.start_sh_harness import Agent, wait_until


def _go(agent: Agent) -> str:
    return str(agent.token_dir / "go")


def test_the_agent_starts_only_after_the_go(agent: Agent) -> None:
    go = _go(agent)
    proc = agent.start(AZP_GO_FILE=go)
    wait_until(lambda: agent.has("configure.argv"), what="the registration")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while "waiting for the go file" not in line:
        assert line, "start.sh ended without saying it waits"
        line = proc.stdout.readline()
    assert parse_line(line) == AwaitingGo("gpu-host-1", go)
    # Registered and waiting: run.sh has not started; it does once the file is there.
    wait_until(lambda: proc.poll() is None and not agent.has("run.argv"), what="a waiting start")
    assert not agent.has("run.argv")
    (agent.token_dir / "go").write_text("go\n")
    result = agent.finish()
    assert result.code == agent_exit.JOB_DONE, result.out
    assert agent.argv("run") == ["--once"]
    assert "AZP_GO_FILE" not in agent.environ("run"), "the gate stays out of the job's env"


def test_sigterm_at_the_gate_exits_143_registered_and_without_a_job(agent: Agent) -> None:
    proc = agent.start(AZP_GO_FILE=_go(agent))
    wait_until(lambda: agent.has("configure.argv"), what="the registration")
    proc.send_signal(signal.SIGTERM)
    result = agent.finish(timeout=5)
    assert result.code == agent_exit.TERMINATED == 143, result.out
    assert not agent.has("run.argv")
    assert "stopped by SIGTERM" in result.out


def test_without_the_variable_there_is_no_gate(agent: Agent) -> None:
    """Run by hand or on Kubernetes: nobody gives a go, so nothing waits for one."""
    result = agent.run()
    assert result.code == agent_exit.JOB_DONE, result.out
    assert "waiting for the go file" not in result.out
