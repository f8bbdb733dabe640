"""dockeragent/start.sh: users and privileges, legacy variables, the agent version check."""

from __future__ import annotations

import base64
import json
import os
import pwd
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.dockeragent.start_sh_harness import (
    BAKED_VERSION,
    Agent,
    cmdlines_containing,
)

# --------------------------------------------------------------------------- users


def test_stays_root_only_when_asked(agent: Agent) -> None:
    assert agent.run().code == 0
    assert "AGENT_ALLOW_RUNASROOT" not in agent.environ("run")
    agent.deliver_token()
    assert agent.run(AZP_RUN_AS_ROOT="1", AZP_TEST_SKIP_PRIVDROP=None).code == 0
    assert agent.environ("configure")["AGENT_ALLOW_RUNASROOT"] == "1"
    assert agent.read("run.uid").strip() == "0"


@pytest.mark.root
def test_drops_privileges_to_the_agent_user(agent: Agent) -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "start.sh's privilege drop can only be tested as root (it runs as root in the image)"
        )
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is required; it ships in every Ubuntu image")
    result = agent.run(AZP_TEST_SKIP_PRIVDROP=None, AZP_AGENT_USER="nobody")
    assert result.code == 0, result.out
    nobody = subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True).stdout.strip()
    assert agent.read("configure.uid").strip() == nobody
    assert agent.read("run.uid").strip() == nobody
    run_env = agent.environ("run")
    assert run_env["USER"] == "nobody"
    assert "AGENT_ALLOW_RUNASROOT" not in run_env
    assert (agent.dir / "_work").stat().st_uid == int(nobody)


def test_agent_dir_on_a_host_mount_gets_a_copy_once_per_version(agent: Agent) -> None:
    target = agent.root / "host-mount" / "gpu-host-1"
    result = agent.run(AZP_AGENT_DIR=str(target))
    assert result.code == 0, result.out
    assert "installing agent 4.275.0" in result.out
    assert agent.read("configure.cwd").strip() == str(target)
    assert (target / "bin" / "Agent.Listener").exists()
    # The next container finds the agent in place and the old registration files gone.
    (target / ".agent").write_text("{}")
    (target / ".credentials").write_text("{}")
    agent.deliver_token()
    again = agent.run(AZP_AGENT_DIR=str(target))
    assert again.code == 0, again.out
    assert "installing agent" not in again.out
    assert agent.read("configure.dotagent").strip() == "absent"
    assert not (target / ".credentials").exists()
    # A new image version is installed over the old copy.
    (agent.dir / ".image-agent-version").write_text("4.280.0\n")
    agent.deliver_token()
    third = agent.run(AZP_AGENT_DIR=str(target))
    assert "installing agent 4.280.0" in third.out
    assert (target / ".image-agent-version").read_text().strip() == "4.280.0"


@pytest.mark.root
def test_docker_socket_group_is_given_to_the_agent_user(agent: Agent) -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "start.sh's privilege drop can only be tested as root (it runs as root in the image)"
        )
    groups_before = Path("/etc/group").read_text()
    sock_path = agent.root / "docker.sock"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        os.chown(sock_path, 0, 4242)
        target = agent.root / "host-mount" / "gpu-host-1"
        result = agent.run(
            AZP_TEST_SKIP_PRIVDROP=None,
            AZP_AGENT_USER="nobody",
            AZP_DOCKER_SOCKET=str(sock_path),
            AZP_AGENT_DIR=str(target),
        )
    finally:
        sock.close()
    assert result.code == 0, result.out
    assert "root-equivalent access to the host" in result.out
    assert "4242" in agent.read("run.groups").split()
    assert agent.read("run.uid").strip() == str(pwd.getpwnam("nobody").pw_uid)
    # The copied agent belongs to the run-as user, so config.sh can write its files.
    assert (target / "config.sh").stat().st_uid == pwd.getpwnam("nobody").pw_uid
    # /etc/group was not touched: the gid is added to the process only.
    assert Path("/etc/group").read_text() == groups_before


def test_legacy_token_variable_works_with_a_warning(agent: Agent) -> None:
    agent.token_file.unlink()
    result = agent.run(AZP_TOKEN=agent.token)
    assert result.code == 0, result.out
    assert "docker inspect" in result.out
    assert agent.environ("configure")["VSTS_AGENT_INPUT_TOKEN"] == agent.token
    assert "AZP_TOKEN" not in agent.environ("run")
    assert agent.token not in agent.read("run.env")


# --------------------------------------------------------------------------- version check


class PackagesServer:
    """A loopback stand-in for ``{org}/_apis/distributedtask/packages/agent``."""

    def __init__(self, version: str | None, status: int = 200, token: str = "") -> None:
        self.version = version
        self.status = status
        self.token = token
        self.requests: list[tuple[str, str | None]] = []
        self.argv_hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's API
                outer.requests.append((self.path, self.headers.get("Authorization")))
                # While curl waits for us, no process may show the PAT in its argv.
                outer.argv_hits.extend(cmdlines_containing(outer.token))
                body = b"{}"
                if outer.version:
                    major, minor, patch = (int(x) for x in outer.version.split("."))
                    body = json.dumps(
                        {
                            "count": 1,
                            "value": [
                                {
                                    "type": "agent",
                                    "platform": "linux-x64",
                                    "version": {"major": major, "minor": minor, "patch": patch},
                                }
                            ],
                        }
                    ).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/myorg"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def packages_server(agent: Agent) -> Iterator[Callable[..., PackagesServer]]:
    servers: list[PackagesServer] = []

    def make(version: str | None, status: int = 200) -> PackagesServer:
        server = PackagesServer(version, status, agent.token)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def test_newer_server_agent_is_flagged(agent: Agent, packages_server) -> None:
    if shutil.which("curl") is None or shutil.which("jq") is None:
        pytest.fail("curl and jq are required (both are installed in the agent image)")
    server = packages_server("4.280.1")
    result = agent.run(AZP_URL=server.url, AZP_SKIP_VERSION_CHECK=None)
    assert result.code == 0, result.out
    assert f"this image has agent {BAKED_VERSION} but the organisation offers 4.280.1" in result.out
    ((path, auth),) = server.requests
    assert path.startswith("/myorg/_apis/distributedtask/packages/agent?platform=linux-")
    assert auth == "Basic " + base64.b64encode(f":{agent.token}".encode()).decode()
    assert server.argv_hits == []
    assert agent.token not in result.out


def test_matching_agent_version_is_quiet(agent: Agent, packages_server) -> None:
    server = packages_server(BAKED_VERSION)
    result = agent.run(AZP_URL=server.url, AZP_SKIP_VERSION_CHECK=None)
    assert result.code == 0, result.out
    assert "matches the organisation's current version" in result.out
    assert "WARNING" not in result.out


@pytest.mark.parametrize("status", [401, 500])
def test_failed_version_check_never_blocks_the_job(agent: Agent, packages_server, status) -> None:
    server = packages_server(None, status=status)
    result = agent.run(AZP_URL=server.url, AZP_SKIP_VERSION_CHECK=None)
    assert result.code == 0, result.out
    assert "could not check the server's agent version" in result.out
    assert agent.argv("run") == ["--once"]
