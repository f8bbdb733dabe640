"""dockeragent/start.sh, run on the host with stub config.sh/run.sh/Agent.Listener.

The stubs mirror the real agent's layout: config.sh and run.sh are thin wrappers
that start ``bin/Agent.Listener`` as a child (and, like the real run.sh, do not
forward signals), so start.sh's signal forwarding meets the same process tree
as in a container. The stub listener records its argv, its real environment
(/proc/self/environ, which its jobs would inherit) and its uid.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuci_tui.core import agent_exit

START_SH = Path(__file__).resolve().parents[2] / "dockeragent" / "start.sh"
BAKED_VERSION = "4.275.0"

WRAPPER = """#!/bin/bash
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
printf '%s\\n' "$@" > "$STUB_RECORD_DIR/{name}.argv"
"$DIR"/bin/Agent.Listener {mode} "$@"
"""

LISTENER = r"""#!/bin/bash
rec=$STUB_RECORD_DIR
mode=$1; shift
printf '%s\n' "$@" > "$rec/$mode.argv"
tr '\0' '\n' < /proc/$$/environ > "$rec/$mode.env"
id -u > "$rec/$mode.uid"
id -G > "$rec/$mode.groups"
pwd > "$rec/$mode.cwd"
if [ -e .agent ]; then echo present; else echo absent; fi > "$rec/$mode.dotagent"
if [ -e "$STUB_TOKEN_PATH" ]; then echo present; else echo absent; fi > "$rec/$mode.token_file"
var="STUB_${mode^^}"
behaviour=${!var:-exit:0}
sleeper=""
on_term() {
    echo TERM >> "$rec/$mode.signals"
    if [ "$behaviour" = busy ]; then
        sleep 0.3  # cancelling the job and reporting it to the server
        echo canceled > "$rec/job.result"
    fi
    [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null && wait "$sleeper"
    exit 0
}
trap on_term TERM
case $behaviour in
    exit:*) exit "${behaviour#exit:}" ;;
    hold)
        touch "$rec/$mode.ready"
        while [ ! -e "$rec/$mode.release" ]; do sleep 0.02; done
        exit 0 ;;
    idle|busy)
        [ "$behaviour" = busy ] && echo running > "$rec/job.result"
        touch "$rec/$mode.ready"
        while :; do sleep 30 & sleeper=$!; wait $sleeper; done ;;
esac
"""


def wait_until(pred: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class Result:
    code: int
    out: str


class Agent:
    """A temporary agent directory with stubs, a token and a record directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "agent"
        self.rec = root / "rec"
        self.token_dir = root / "run-azp"
        self.token_file = self.token_dir / "token"
        self.token = secrets.token_hex(26)
        (self.dir / "bin").mkdir(parents=True)
        self.rec.mkdir()
        for name, mode in (("config.sh", "configure"), ("run.sh", "run")):
            path = self.dir / name
            path.write_text(WRAPPER.replace("{name}", name).replace("{mode}", mode))
        (self.dir / "bin" / "Agent.Listener").write_text(LISTENER)
        (self.dir / ".image-agent-version").write_text(BAKED_VERSION + "\n")
        for path in (self.dir / "config.sh", self.dir / "run.sh", self.dir / "bin/Agent.Listener"):
            path.chmod(0o755)
        # Like the supervisor's put_archive: a root-only directory and file.
        self.token_dir.mkdir(mode=0o700)
        self.deliver_token()
        # Readable by an unprivileged run-as user (the privilege-drop test).
        for path in (root, self.dir, self.dir / "bin"):
            path.chmod(0o755)
        self.rec.chmod(0o777)
        self.dir.chmod(0o777)
        self.proc: subprocess.Popen[str] | None = None

    def deliver_token(self) -> None:
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)

    def env(self, **overrides: str | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AZP_URL": "http://127.0.0.1:9/org/",
            "AZP_POOL": "gpu",
            "AZP_AGENT_NAME": "gpu-host-1",
            "AZP_TOKEN_FILE": str(self.token_file),
            "AZP_AGENT_DIR": str(self.dir),
            "AZP_AGENT_SOURCE": str(self.dir),
            "AZP_DOCKER_SOCKET": str(self.root / "no-docker.sock"),
            "AZP_TEST_SKIP_PRIVDROP": "1",
            "AZP_SKIP_VERSION_CHECK": "1",
            "STUB_RECORD_DIR": str(self.rec),
            "STUB_TOKEN_PATH": str(self.token_file),
            "NVIDIA_VISIBLE_DEVICES": "GPU-1234",
        }
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def start(self, **overrides: str | None) -> subprocess.Popen[str]:
        self.proc = subprocess.Popen(
            [str(START_SH)],
            env=self.env(**overrides),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        return self.proc

    def finish(self, timeout: float = 20.0) -> Result:
        assert self.proc is not None
        out, _ = self.proc.communicate(timeout=timeout)
        return Result(self.proc.returncode, out)

    def run(self, **overrides: str | None) -> Result:
        self.start(**overrides)
        return self.finish()

    def read(self, name: str) -> str:
        return (self.rec / name).read_text()

    def argv(self, mode: str) -> list[str]:
        return self.read(f"{mode}.argv").splitlines()

    def environ(self, mode: str) -> dict[str, str]:
        return dict(
            line.split("=", 1) for line in self.read(f"{mode}.env").splitlines() if "=" in line
        )

    def has(self, name: str) -> bool:
        return (self.rec / name).exists()

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own session, started above
            self.proc.wait(timeout=10)


@pytest.fixture
def agent() -> Iterator[Agent]:
    # Not pytest's tmp_path: its parents are 0700, closed to the run-as user.
    root = Path(tempfile.mkdtemp(prefix="gpuci-start-sh-"))
    a = Agent(root)
    try:
        yield a
    finally:
        a.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def cmdlines_containing(needle: str) -> list[str]:
    hits = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            hits.append(f"{entry.name}: {cmdline}")
    return hits


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
    proc.send_signal(signal.SIGINT)
    result = agent.finish(timeout=5)
    assert result.code == agent_exit.INTERRUPTED == 130, result.out
    assert agent.read("run.signals").split() == ["TERM"]


# --------------------------------------------------------------------------- users


def test_stays_root_only_when_asked(agent: Agent) -> None:
    assert agent.run().code == 0
    assert "AGENT_ALLOW_RUNASROOT" not in agent.environ("run")
    agent.deliver_token()
    assert agent.run(AZP_RUN_AS_ROOT="1", AZP_TEST_SKIP_PRIVDROP=None).code == 0
    assert agent.environ("configure")["AGENT_ALLOW_RUNASROOT"] == "1"
    assert agent.read("run.uid").strip() == "0"


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
