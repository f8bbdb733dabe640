"""An agent container registered with a service principal's short-lived access token
(what the supervisor hands it), not with any long-lived secret."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

from .conftest import TOKEN_PATH, wait_until
from .test_emulator import online, proc_text, start_agent

pytestmark = pytest.mark.docker

CLIENT = "11111111-2222-4333-8444-555555555555"


@pytest.fixture
def server(org: SimOrg) -> Iterator[SimServer]:
    org.heartbeat_timeout = 3.0
    with SimServer(org) as s:
        yield s


def access_token(org: SimOrg) -> str:
    status, body = org.entra.token_request(
        {
            "grant_type": "client_credentials",
            "client_id": CLIENT,
            "client_secret": "Q~emulator-secret-0123456789abcdefgh",
            "scope": "499b84ac-1321-427f-aa17-267ca6975798/.default",
        },
        "aud",
    )
    assert status == 200, body
    return str(body["access_token"])


def test_the_emulator_registers_with_an_access_token_and_deletes_it(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    org.entra.add_app("gpuci-lab", client_id=CLIENT, secret="Q~emulator-secret-0123456789abcdefgh")
    token = access_token(org)
    c = start_agent(docker_client, emulator_image, server, run_label, "sp-1", token=token)
    wait_until(lambda: online(org, "sp-1"), 10, "the emulator to register")
    assert c.exec_run(["test", "-e", TOKEN_PATH]).exit_code == 1, "token file not deleted"
    assert token not in proc_text(c)


def test_a_principal_without_the_pool_role_cannot_register(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    org.entra.add_app(
        "gpuci-lab",
        client_id=CLIENT,
        secret="Q~emulator-secret-0123456789abcdefgh",
        pool_admin=False,
    )
    c = start_agent(
        docker_client, emulator_image, server, run_label, "sp-2", token=access_token(org)
    )
    assert c.wait(timeout=20)["StatusCode"] != 0
    logs = c.logs().decode()
    assert "HTTP 403" in logs and "needs Manage permissions" in logs, logs
    assert org.find_agent("sp-2") is None


def test_the_python_agent_program_says_403_too(org: SimOrg) -> None:
    from gpuci_tui.sim.runtime import SimulatedRuntime

    from .test_runtime import LABELS, Recorder, spec

    org.entra.add_app(
        "gpuci-lab",
        client_id=CLIENT,
        secret="Q~emulator-secret-0123456789abcdefgh",
        pool_admin=False,
    )
    runtime = SimulatedRuntime(org, destroy_delay=0.02)
    rec = Recorder(runtime)
    try:
        info = runtime.start(spec(auto_remove=False), access_token(org))
        rec.wait_for("die")
        wait_until(lambda: runtime.list_containers(LABELS) != [], what="listed")
        tail = " ".join(runtime.logs_tail(info.id))
        assert "HTTP 403" in tail and "needs Manage permissions" in tail, tail
    finally:
        rec.close()
