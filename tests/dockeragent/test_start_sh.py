"""dockeragent/start.sh: the happy path, failures and signals (harness in start_sh_harness)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from gpuci_tui.core.engine import agent_exit
from tests.dockeragent.start_sh_harness import (
    START_SH,
    Agent,
    cmdlines_containing,
    wait_until,
)

# --------------------------------------------------------------------------- the happy path


def test_registers_then_runs_exactly_one_job(agent: Agent) -> None:
    result = agent.run()
    assert result.code == agent_exit.JOB_DONE, result.out
    assert agent.argv("configure") == [
        "--unattended",
        "--url",
        "http://127.0.0.1:9/org",
        "--auth",
        "pat",
        "--pool",
        "gpu",
        "--agent",
        "gpu-host-1",
        "--work",
        "_work",
        "--replace",
        "--acceptTeeEula",
    ]
    assert agent.argv("run") == ["--once"]
    assert "job done" in result.out


def test_token_reaches_config_only_through_its_environment(agent: Agent) -> None:
    result = agent.run()
    assert result.code == 0, result.out
    assert agent.environ("configure")["VSTS_AGENT_INPUT_TOKEN"] == agent.token
    # Never in an argv, never in the job's environment, never in the logs.
    for name in ("configure.argv", "config.sh.argv", "run.argv", "run.sh.argv", "run.env"):
        assert agent.token not in agent.read(name), name
    assert agent.token not in result.out
    run_env = agent.environ("run")
    assert not [k for k in run_env if k.startswith("AZP_") or k == "VSTS_AGENT_INPUT_TOKEN"]
    ignored = run_env["VSO_AGENT_IGNORE"].split(",")
    assert {"AZP_TOKEN_FILE", "AZP_TOKEN", "VSTS_AGENT_INPUT_TOKEN", "AZP_URL"} <= set(ignored)
    # The supervisor's other settings do reach the job.
    assert run_env["NVIDIA_VISIBLE_DEVICES"] == "GPU-1234"


def test_token_file_is_gone_before_config_starts(agent: Agent) -> None:
    assert agent.run().code == 0
    assert agent.read("configure.token_file").strip() == "absent"
    assert agent.read("run.token_file").strip() == "absent"
    assert not agent.token_file.exists()
    assert agent.token_dir.exists()


def test_token_is_on_no_command_line_at_any_time(agent: Agent) -> None:
    agent.start(STUB_CONFIGURE="hold", STUB_RUN="hold")
    wait_until(lambda: agent.has("configure.ready"), what="config.sh to start")
    assert cmdlines_containing(agent.token) == []
    (agent.rec / "configure.release").touch()
    wait_until(lambda: agent.has("run.ready"), what="run.sh to start")
    assert cmdlines_containing(agent.token) == []
    (agent.rec / "run.release").touch()
    assert agent.finish().code == 0


def test_supervisor_defaults_apply(agent: Agent) -> None:
    result = agent.run(AZP_POOL=None, AZP_AGENT_NAME=None, HOSTNAME="c0ffee12")
    assert result.code == 0, result.out
    argv = agent.argv("configure")
    assert argv[argv.index("--pool") + 1] == "Default"
    assert argv[argv.index("--agent") + 1]  # the container's host name


# --------------------------------------------------------------------------- failures


def test_config_failure_exits_10_and_never_runs_a_job(agent: Agent) -> None:
    result = agent.run(STUB_CONFIGURE="exit:1")
    assert result.code == agent_exit.CONFIG_FAILED == 10
    assert "registration failed" in result.out
    assert "PAT" in result.out
    assert not agent.has("run.argv")
    assert agent.token not in result.out


@pytest.mark.parametrize("content", [None, "", "  \n\n"], ids=["missing", "empty", "blank"])
def test_missing_or_empty_token_exits_11(agent: Agent, content: str | None) -> None:
    if content is None:
        agent.token_file.unlink()
    else:
        agent.token_file.write_text(content)
    result = agent.run()
    assert result.code == agent_exit.TOKEN_MISSING == 11, result.out
    assert "token file" in result.out
    assert not agent.has("configure.argv")


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"AZP_URL": None}, "AZP_URL is not set"),
        (
            {"AZP_AGENT_DIR": "/nonexistent/agent", "AZP_AGENT_SOURCE": "/nonexistent/agent"},
            "No Azure Pipelines agent in /nonexistent",
        ),
        (
            {"AZP_TEST_SKIP_PRIVDROP": None, "AZP_AGENT_USER": "no-such-user-x"},
            "User 'no-such-user-x' does not exist",
        ),
    ],
    ids=["no-url", "no-agent", "no-user"],
)
def test_bad_setup_exits_13(agent: Agent, overrides, words: str) -> None:
    result = agent.run(**overrides)
    assert result.code == agent_exit.BAD_SETUP == 13, result.out
    assert words in result.out
    assert not agent.has("configure.argv")


@pytest.mark.parametrize(
    ("listener_code", "expected"),
    [
        (0, 0),
        (1, agent_exit.AGENT_ERROR),
        (2, agent_exit.RETRYABLE),
        (3, agent_exit.AGENT_UPDATING),
        (4, agent_exit.AGENT_UPDATING),
        (137, 137),
    ],
)
def test_run_exit_codes_are_mapped(agent: Agent, listener_code: int, expected: int) -> None:
    result = agent.run(STUB_RUN=f"exit:{listener_code}")
    assert result.code == expected, result.out


def test_exit_codes_agree_with_agent_exit_module() -> None:
    text = START_SH.read_text()
    found = dict(re.findall(r"EXIT_([A-Z_]+)=(\d+)", text))
    assert {name: int(code) for name, code in found.items()} == {
        "AGENT_ERROR": agent_exit.AGENT_ERROR,
        "RETRYABLE": agent_exit.RETRYABLE,
        "CONFIG_FAILED": agent_exit.CONFIG_FAILED,
        "TOKEN_MISSING": agent_exit.TOKEN_MISSING,
        "AGENT_UPDATING": agent_exit.AGENT_UPDATING,
        "BAD_SETUP": agent_exit.BAD_SETUP,
    }
    assert "exit 143" in text and agent_exit.TERMINATED == 143
    assert "exit 130" in text and agent_exit.INTERRUPTED == 130


# --------------------------------------------------------------------------- signals


def test_sigterm_while_idle_exits_143_and_keeps_the_registration(agent: Agent) -> None:
    proc = agent.start(STUB_RUN="idle")
    wait_until(lambda: agent.has("run.ready"), what="the listener to wait for a job")
    proc.send_signal(signal.SIGTERM)
    result = agent.finish(timeout=5)
    assert result.code == agent_exit.TERMINATED == 143, result.out
    assert agent.read("run.signals").split() == ["TERM"]
    # Offline, not deregistered: no "config.sh remove" (C2: keep the registration).
    assert not any("remove" in agent.read(f) for f in ("config.sh.argv", "configure.argv"))
    # The listener did not outlive start.sh (zombies awaiting reaping do not count).
    left = subprocess.run(["pgrep", "-a", "-s", str(proc.pid)], capture_output=True, text=True)
    assert [line for line in left.stdout.splitlines() if "<defunct>" not in line] == []


def test_sigterm_while_busy_cancels_the_job_and_waits_for_it(agent: Agent) -> None:
    proc = agent.start(STUB_RUN="busy")
    wait_until(lambda: agent.has("run.ready"), what="the job to start")
    assert agent.read("job.result").strip() == "running"
    proc.send_signal(signal.SIGTERM)
    result = agent.finish(timeout=10)
    assert result.code == 143, result.out
    # start.sh exited only after the agent had reported the job as cancelled.
    assert agent.read("job.result").strip() == "canceled"
    assert "a running job is cancelled" in result.out


def test_sigterm_during_registration_stops_before_any_job(agent: Agent) -> None:
    proc = agent.start(STUB_CONFIGURE="idle")
    wait_until(lambda: agent.has("configure.ready"), what="config.sh to start")
    proc.send_signal(signal.SIGTERM)
    result = agent.finish(timeout=5)
    assert result.code == 143, result.out
    assert agent.read("configure.signals").split() == ["TERM"]
    assert not agent.has("run.argv")


def test_sigint_while_idle_exits_130(agent: Agent) -> None:
    proc = agent.start(STUB_RUN="idle")
    wait_until(lambda: agent.has("run.ready"), what="the listener to wait for a job")
    masks = signal_masks(proc.pid)
    assert int(masks["SigCgt"], 16) & 1 << (signal.SIGINT - 1), f"start.sh traps no SIGINT: {masks}"
    proc.send_signal(signal.SIGINT)
    # Well below the stub listener's 30-s sleep, which a signal not passed on would wait out.
    try:
        result = agent.finish(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"start.sh did not end on SIGINT (its signals before it: {masks})")
    assert result.code == agent_exit.INTERRUPTED == 130, result.out
    assert agent.read("run.signals").split() == ["TERM"]


def signal_masks(pid: int) -> dict[str, str]:
    """The process's ignored and caught signals (hex masks, from /proc)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if line.startswith(("SigIgn", "SigCgt")))


# --------------------------------------------------------------------------- service principal


def test_a_service_principal_registers_with_its_secret_only_in_the_environment(
    agent: Agent,
) -> None:
    tenant, client = "72f988bf-86f1-41af-91ab-2d7cd011db47", "11111111-2222-4333-8444-555555555555"
    result = agent.run(AZP_AUTH="service-principal", AZP_CLIENT_ID=client, AZP_TENANT_ID=tenant)
    assert result.code == agent_exit.JOB_DONE, result.out
    argv = agent.argv("configure")
    assert argv[argv.index("--auth") + 1] == "SP"
    assert argv[argv.index("--clientid") + 1] == client
    assert argv[argv.index("--tenantid") + 1] == tenant
    env = agent.environ("configure")
    assert env["VSTS_AGENT_INPUT_CLIENTSECRET"] == agent.token
    assert "VSTS_AGENT_INPUT_TOKEN" not in env
    assert agent.token not in " ".join(argv) and agent.token not in result.out
    run_env = agent.environ("run")
    assert "VSTS_AGENT_INPUT_CLIENTSECRET" not in run_env
    assert not [k for k in run_env if k.startswith("AZP_")]


def test_a_service_principal_without_its_ids_is_a_bad_setup(agent: Agent) -> None:
    result = agent.run(AZP_AUTH="service-principal")
    assert result.code == agent_exit.BAD_SETUP
    assert "needs AZP_CLIENT_ID and AZP_TENANT_ID" in result.out


def test_workload_identity_exchanges_the_federated_token_and_registers_with_it(
    agent: Agent, tmp_path: Path
) -> None:
    from gpuci_tui.sim.entra import SimEntra
    from gpuci_tui.sim.login import SimLogin

    entra = SimEntra()
    app = entra.add_app("gpuci-wi", client_id="11111111-2222-4333-8444-555555555555")
    federated = tmp_path / "azure-identity-token"
    federated.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXNpbQ")
    app.federated.add(federated.read_text())
    with SimLogin(entra) as login:
        wi = {
            "AZP_AUTH": "workload-identity",
            "AZP_TOKEN_FILE": str(tmp_path / "none"),
            "AZURE_CLIENT_ID": app.client_id,
            "AZURE_TENANT_ID": "72f988bf-86f1-41af-91ab-2d7cd011db47",
            "AZURE_FEDERATED_TOKEN_FILE": str(federated),
            "AZURE_AUTHORITY_HOST": login.url + "/",
            "CURL_CA_BUNDLE": str(login.ca_file),
        }
        result = agent.run(**wi)
        assert result.code == agent_exit.JOB_DONE, result.out
        token = agent.environ("configure")["VSTS_AGENT_INPUT_TOKEN"]
        assert entra.principal(token) is not None, "an access token of the identity"
        argv = agent.argv("configure")
        assert argv[argv.index("--auth") + 1] == "pat"
        assert federated.read_text() not in result.out and token not in result.out
        assert entra.sign_ins == [(app.client_id, "federated")]

        app.federated.clear()  # the federated credential removed in Entra
        result = agent.run(**wi)
        assert result.code == agent_exit.CONFIG_FAILED, result.out
        assert "refused the workload identity's sign-in: AADSTS700027" in result.out
