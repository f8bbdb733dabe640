"""Secret audit (issue 5 §2): after real work, the PAT is nowhere it could be read.

The real `gpuci-tui run` on the real Docker engine with the emulator agent image,
against SimServer (tests/real/rig.py). The PAT reaches the daemon only as the path in
GPUCI_PAT_FILE, the agents only as a token file copied into each container. Every
search also looks for the PAT's HTTP Basic-auth encodings, and each search is first
shown to find the PAT where it really is (the PAT file), so a blind search cannot pass.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from requests.adapters import HTTPAdapter

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE
from gpuci_tui.core.errors import AzureError
from tests.badinput.helpers import as_nobody, save_good, shared_dir
from tests.fixture_images import derived_image
from tests.real.rig import PAT, Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

NEEDLES = [
    PAT.encode(),
    base64.b64encode(f":{PAT}".encode()),  # the Authorization header's value
    base64.b64encode(PAT.encode()),
]


def leaks(data: bytes) -> list[str]:
    """Which forms of the PAT ``data`` holds."""
    return [n.decode() for n in NEEDLES if n in data]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image)


class EventLog:
    """Every Docker event of the instance's containers, recorded from before the first start."""

    def __init__(self, client: Any, instance: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._stream = client.events(
            decode=True, filters={"label": f"{LABEL_INSTANCE}={instance}", "type": "container"}
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._stream:
                self.events.append(event)
        except Exception:  # noqa: BLE001, S110 - the stream is closed at the end on purpose
            pass

    def ids(self) -> set[str]:
        return {e["id"] for e in self.events if "id" in e}

    def close(self) -> None:
        self._stream.close()
        self._thread.join(5)


def jobs_done(rig: Rig, jobs: list[int]) -> bool:
    return all(rig.org.job(j).result == "succeeded" for j in jobs)


def run_jobs(rig: Rig, n: int) -> None:
    jobs = [rig.org.queue_job(rig.pool_id, duration=0.3) for _ in range(n)]
    wait_for(lambda: jobs_done(rig, jobs), 90, f"{n} jobs")


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_pat_appears_nowhere_after_jobs_drain_and_restarts(rig: Rig) -> None:
    pat_file = Path(rig.env["GPUCI_PAT_FILE"])
    assert leaks(pat_file.read_bytes()), "the search must find the PAT where it is"
    events = EventLog(rig.client, rig.instance)
    try:
        daemon = rig.start_daemon()
        wait_for(rig.all_idle, 60, "two idle agents")
        run_jobs(rig, 4)
        out = rig.cli("drain", "--all", "--wait", "--timeout", "60", timeout=90)
        assert out.returncode == 0, out.stderr
        assert rig.cli("resume", "--all").returncode == 0
        wait_for(rig.all_idle, 60, "agents after resume")
        before = rig.container_ids()
        assert rig.cli("restart", "--all").returncode == 0
        wait_for(lambda: rig.all_idle() and not rig.container_ids() & before, 60, "restarted")
        # The daemon itself restarted: it adopts the agents and reads the PAT file again.
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(15) == 0
        daemon = rig.start_daemon()
        wait_for(rig.all_idle, 60, "agents adopted")
        run_jobs(rig, 2)
        wait_for(rig.all_idle, 60, "refilled")

        # Processes: argv of every process on the host, environ of the daemon's tree.
        tree = process_tree(daemon.pid)
        assert (
            f"GPUCI_PAT_FILE={pat_file}".encode()
            in Path(f"/proc/{daemon.pid}/environ").read_bytes()
        ), "the daemon should get the PAT file's path"
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            for name in ("cmdline", "environ"):
                try:
                    data = (proc / name).read_bytes()
                except OSError:  # gone, or a kernel thread
                    continue
                if leaks(data):
                    found.append(f"/proc/{proc.name}/{name}")
        assert found == [], f"the PAT is in {found}"
        assert tree, "the daemon's process tree"
        for proc in tree:
            with proc.oneshot():
                assert not leaks("\0".join(proc.cmdline()).encode())
                assert not leaks("\0".join(f"{k}={v}" for k, v in proc.environ().items()).encode())

        # Docker: every agent that ever existed (ids from the events), live ones inspected.
        status_json = rig.cli("status", "--json").stdout
        status_text = rig.cli("status").stdout
    finally:
        events.close()
    ids = events.ids()
    assert len(ids) >= 8, f"expected several generations of agents, saw {len(ids)}"
    assert leaks(json.dumps(events.events).encode()) == [], "the PAT is in a Docker event"
    inspected = 0
    for cid in ids:
        try:
            details = rig.client.api.inspect_container(cid)
        except Exception:  # noqa: BLE001 - auto-removed after its job: nothing left to read
            continue
        inspected += 1
        assert leaks(json.dumps(details).encode()) == [], f"the PAT is in docker inspect {cid}"
        assert leaks(rig.client.api.logs(cid)) == [], f"the PAT is in the logs of {cid}"
    assert inspected >= 2, "the live agents must have been inspected"

    # Files: the daemon logs, the config file, everything in the XDG directories.
    assert "supervising" in rig.daemon_log()
    xdg = [Path(os.environ[v]) for v in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME",
                                         "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")]  # fmt: skip
    candidates = files_under(rig.config_path.parent, *xdg)
    assert rig.config_path in candidates
    leaking = [str(p) for p in candidates if p != pat_file and leaks(p.read_bytes())]
    assert leaking == [], f"the PAT is in {leaking}"
    assert any(p.suffix == ".log" for p in candidates)

    # What scripts read.
    assert json.loads(status_json)["slots"], status_json
    assert leaks(status_json.encode()) == leaks(status_text.encode()) == []


# --------------------------------------------------------------------------- crash output


CRASH_LOG = """
import logging, sys
from gpuci_tui.cli.run_cmd import setup_logging
from gpuci_tui.core.secrets.redaction import register_secret
pat = sys.argv[1]
register_secret(pat)
setup_logging("INFO")
def connect():
    token = pat  # a local holding the PAT, as in a real frame
    raise RuntimeError(f"connection failed for Basic {token}")
try:
    connect()
except RuntimeError:
    logging.getLogger("gpuci_tui.daemon").exception("cycle failed: %s", pat)
"""

CRASH_CLI = """
import sys
import gpuci_tui.cli.run_cmd as run_cmd
from gpuci_tui.cli.main import main

def real_services(config, tokens=None):
    from gpuci_tui.core.secrets.token_store import TokenStore
    pat = TokenStore().get_token(config.azure.url)  # registers it, as the daemon does
    raise RuntimeError(f"unexpected failure talking to Azure with {pat}")

run_cmd.real_services = real_services
sys.exit(main(["--config", sys.argv[1], "run"]))
"""


def python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_logged_exception_traceback_is_redacted() -> None:
    out = python(CRASH_LOG, PAT)
    assert out.returncode == 0, out.stderr
    assert "Traceback (most recent call last)" in out.stderr
    assert "RuntimeError: connection failed for Basic ***" in out.stderr
    assert "cycle failed: ***" in out.stderr
    assert leaks(out.stderr.encode()) == []


def test_crash_of_a_command_prints_a_redacted_traceback(tmp_path: Path) -> None:
    """An unexpected exception out of ``gpuci-tui run``: exit 1, a traceback, no PAT."""
    config = tmp_path / "config.toml"
    save_good(config)
    pat_file = tmp_path / "pat"
    pat_file.write_text(PAT + "\n")
    pat_file.chmod(0o600)
    out = python(CRASH_CLI, str(config), env={**os.environ, "GPUCI_PAT_FILE": str(pat_file)})
    assert out.returncode == 1, out.stderr
    assert "Traceback (most recent call last)" in out.stderr
    assert out.stderr.endswith("RuntimeError: unexpected failure talking to Azure with ***\n")
    assert leaks(out.stderr.encode()) == []


# --------------------------------------------------------------------------- clear text


class RecordingAdapter(HTTPAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        self.urls.append(str(request.url))
        raise AssertionError(f"no request may be sent, got {request.url}")


@pytest.mark.parametrize(
    "url", ["http://example.invalid/acme", "http://dev.azure.com/acme", "http://10.0.0.8:8080/x"]
)
def test_pat_is_never_sent_over_http_to_a_remote_host(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before any socket is opened or any name looked up."""
    opened: list[object] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        opened.append(address)
        return real_connect(self, address)

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        raise OSError(errno.EACCES, "no lookups in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    adapter = RecordingAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    for kwargs in ({"session": session}, {}):  # an injected session, and requests' own
        with pytest.raises(AzureError) as caught:
            AzureDevOpsClient(url, PAT, **kwargs)  # type: ignore[arg-type]
        assert "over plain http://" in str(caught.value)
    assert adapter.urls == []
    assert opened == []


# --------------------------------------------------------------------------- control socket


NOBODY_CONNECT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": exc.errno}))
    sys.exit(0)
try:
    s.sendall(b'{"op": "status"}\\n')
except (BrokenPipeError, ConnectionResetError):
    pass  # the daemon may refuse and hang up before reading; its answer is still queued
data = b""
while not data.endswith(b"\\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(json.dumps({"reply": data.decode()}))
"""


@pytest.mark.root
def test_control_socket_is_private_and_refuses_other_users(rig: Rig) -> None:
    rig.start_daemon()
    sock = socket_path(rig.instance)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    # The socket's directory is private, so another user could not even reach the socket.
    # A hard link in a directory they can enter leaves only the socket's own checks.
    with shared_dir("gpuci-audit-") as directory:
        link = directory / "control.sock"
        os.link(sock, link)
        denied = json.loads(_nobody_connect(link, directory))
        assert denied == {"connect": errno.EACCES}, "mode 0600 must refuse another user"
        try:
            sock.chmod(0o666)  # only to prove the daemon's own SO_PEERCRED check
            answer = json.loads(_nobody_connect(link, directory))
        finally:
            sock.chmod(0o600)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    reply = json.loads(answer["reply"])
    assert reply == {"ok": False, "error": "permission denied: not the daemon's user"}
    assert "refused a control connection from uid 65534" in rig.daemon_log()
    assert rig.snap() is not None, "the daemon still answers its own user"


def _nobody_connect(path: Path, cwd: Path) -> str:
    code = NOBODY_CONNECT.replace("sys.argv[1]", repr(str(path)))
    return as_nobody(code, cwd)


def build_token_printing_image(docker_client: Any, busybox_image: str) -> str:
    """An image that shows its token while failing to start (``set -x``, then reads it)."""
    from gpuci_tui.core.docker.agentspec import TOKEN_PATH

    return derived_image(
        docker_client,
        busybox_image,
        "gpuci-fixture/prints-token:1",
        [
            f'ENTRYPOINT ["sh", "-c", "set -x; echo token: $(cat {TOKEN_PATH}); '
            f'cat {TOKEN_PATH}; exit 1"]'
        ],
        command=["true"],
    )


@pytest.fixture
def printing_rig(tmp_path: Path, docker_client: Any, busybox_image: str) -> Iterator[Rig]:
    image = build_token_printing_image(docker_client, busybox_image)
    # Many failed starts before parking: each is a chance to read a log tail on a loaded host.
    yield from make_rig(
        tmp_path, docker_client, image, count=1, agents={"standby": False}, park_after=10
    )


def test_a_token_an_image_prints_is_in_no_log_tail_that_leaves_the_daemon(
    printing_rig: Rig,
) -> None:
    """status, status --json and the fleet bridge print the parked slot's log tail: redacted."""
    rig = printing_rig
    rig.start_daemon()
    try:
        wait_for(lambda: (rig.slot(0).get("last_exit") or {}).get("log_tail"), 90, "a log tail")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {rig.slot(0)}\n{rig.daemon_log()[-2000:]}") from None
    # The image did print it: the tail shows where, with the token masked.
    tail = rig.slot(0)["last_exit"]["log_tail"]
    assert "token: ***" in tail, tail
    text = rig.cli("status")

    def json_with_tail() -> subprocess.CompletedProcess[str] | None:
        # The slot keeps failing: each new exit is recorded a moment before its log tail is
        # read, so one read of the status may catch an exit without its tail yet.
        out = rig.cli("status", "--json")
        assert out.returncode == 0, out.stderr
        slot = json.loads(out.stdout)["slots"][0]
        # Never lost: a failed container is removed only after its tail is read.
        return out if (slot.get("last_exit") or {}).get("log_tail") else None

    as_json = wait_for(json_with_tail, 60, "status --json with a log tail")
    bridge = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(rig.config_path), "bridge"],
        input='{"op": "status"}\n',
        env=rig.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    assert "***" in json.dumps(json.loads(as_json.stdout)["slots"][0]["last_exit"])
    for name, out in (("status", text), ("status --json", as_json), ("bridge", bridge)):
        assert not leaks((out.stdout + out.stderr).encode()), name
    assert not leaks(rig.daemon_log().encode())
