"""The bad-input corpus's "other" cases: each function does one wrong thing through a
public entry point and returns the message the operator reads (see test_corpus_other.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from keyring.backends import fail
from requests.adapters import HTTPAdapter

from gpuci_tui.cli import exitcodes
from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import (
    AzureError,
    AzureNotFoundError,
    ContainerStartError,
    GpuciError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.protocols import ContainerSpec
from gpuci_tui.core.secrets.token_store import TokenStore, diagnose_keyring
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.badinput.helpers import (
    GOOD_URL,
    PAT,
    as_nobody,
    good_doc,
    save_good,
    shared_dir,
    write_toml,
)
from tests.keyring_fakes import LockedKeyring, MemoryKeyring


class RecordingAdapter(HTTPAdapter):
    """Stands in for the network: records each request and answers it with ``failure``.

    Host names given to it are never resolved, so no lookup leaves the machine.
    """

    def __init__(self, failure: Exception | None = None) -> None:
        super().__init__()
        self.failure = failure
        self.urls: list[str] = []
        self.authorised: list[bool] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        self.urls.append(str(request.url))
        self.authorised.append("Authorization" in request.headers)
        raise self.failure or AssertionError(f"no request may be sent, got {request.url}")


def recording_session(adapter: RecordingAdapter) -> requests.Session:
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class Env:
    """What a case may use: its directory, a SimServer organisation (started on demand)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._server: SimServer | None = None
        self.org = SimOrg("acme")
        self.org.add_pat(PAT)
        self.org.add_pool("gpu")
        self.org.add_pool("gpu-a100")

    @property
    def server(self) -> SimServer:
        if self._server is None:
            self._server = SimServer(self.org).start()
        return self._server

    def client(self) -> AzureDevOpsClient:
        return AzureDevOpsClient(self.server.org_url, PAT, max_retries=0)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()


def message_of(action: Callable[[], object], error: type[BaseException] = GpuciError) -> str:
    """The message the operator reads when ``action`` fails (it must fail with ``error``)."""
    with pytest.raises(error) as caught:
        action()
    return str(caught.value)


# --------------------------------------------------------------------------- URL forms


def typo_host(env: Env) -> str:
    """https://dev.azure.co/acme is a valid URL; only the lookup can tell it is wrong.

    The adapter answers as the resolver would (no such host) without any lookup.
    """
    assert load_url("https://dev.azure.co/acme") == "https://dev.azure.co/acme"
    adapter = RecordingAdapter(
        requests.exceptions.ConnectionError(socket.gaierror(-2, "Name or service not known"))
    )
    client = AzureDevOpsClient(
        "https://dev.azure.co/acme", PAT, session=recording_session(adapter), max_retries=2
    )
    check = client.validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "unreachable")
    assert adapter.urls == ["https://dev.azure.co/acme/_apis/connectionData"], "no retry on DNS"
    return check.message


def load_url(url: str) -> str:
    from gpuci_tui.core.config.loader import validate_org_url

    return validate_org_url(url)


def http_remote_client(env: Env) -> str:
    adapter = RecordingAdapter()
    message = message_of(
        lambda: AzureDevOpsClient(
            "http://example.invalid/acme", PAT, session=recording_session(adapter)
        ),
        AzureError,
    )
    assert adapter.urls == [], "the PAT must not be sent anywhere"
    return message


def trailing_path_client(env: Env) -> str:
    return message_of(
        lambda: AzureDevOpsClient("https://dev.azure.com/acme/project/_build", PAT), AzureError
    )


# --------------------------------------------------------------------------- PATs


def pat_with_space_in_env(env: Env) -> str:
    store = TokenStore(MemoryKeyring(), environ={"GPUCI_PAT": "abcd efgh ijkl mnop"})
    return message_of(lambda: store.get_token(GOOD_URL))


def pat_with_newline_typed(env: Env) -> str:
    store = TokenStore(MemoryKeyring(), environ={})
    return message_of(lambda: store.set_token(GOOD_URL, "abcdefgh\nijklmnop"))


def pat_empty_typed(env: Env) -> str:
    backend = MemoryKeyring()
    message = message_of(lambda: TokenStore(backend, environ={}).set_token(GOOD_URL, " \n\t"))
    assert backend.items == {}, "nothing stored"
    return message


def pat_file(env: Env, content: bytes | None) -> TokenStore:
    path = env.tmp / "pat"
    if content is not None:
        path.write_bytes(content)
        path.chmod(0o600)
    return TokenStore(MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(path)})


def pat_file_empty(env: Env) -> str:
    return message_of(lambda: pat_file(env, b"\n").get_token(GOOD_URL))


def pat_file_missing(env: Env) -> str:
    return message_of(lambda: pat_file(env, None).get_token(GOOD_URL))


def pat_file_two_lines(env: Env) -> str:
    return message_of(lambda: pat_file(env, f"{PAT}\n{PAT}\n".encode()).get_token(GOOD_URL))


def pat_file_unreadable(env: Env) -> str:
    """A root-owned 0600 file read by another user, as a systemd unit with User= would."""
    with shared_dir("gpuci-badpat-") as directory:
        path = directory / "pat"
        path.write_text(PAT + "\n")
        path.chmod(0o600)
        code = (
            "from gpuci_tui.core.secrets.token_store import TokenStore\n"
            "try:\n"
            f"    TokenStore(environ={{'GPUCI_PAT_FILE': {str(path)!r}}}).get_token("
            f"{GOOD_URL!r})\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n"
        )
        out = as_nobody(code, directory)
    assert PAT not in out
    return out.replace(str(directory), "{dir}")


# --------------------------------------------------------------------------- pools


def pool_missing(env: Env) -> str:
    with env.client() as client:
        message = message_of(lambda: client.resolve_pool("gpu-h100"), AzureNotFoundError)
        check = client.validate_pat("gpu-h100")
    assert (check.reason, check.message) == ("pool_not_found", message)
    return message


def pool_ambiguous(env: Env) -> str:
    env.org.add_pool("GPU")  # a second pool differing only in case is fine: exact match wins
    with env.client() as client:
        assert client.resolve_pool("gpu").name == "gpu"
        env.org.add_pool("gpu")
        check = client.validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "pool_ambiguous")
    return check.message


def pool_empty_name(env: Env) -> str:
    with env.client() as client:
        return message_of(lambda: client.resolve_pool("  "), AzureNotFoundError)


# --------------------------------------------------------------------------- Docker


def docker_socket_missing(env: Env) -> str:
    return message_of(
        lambda: DockerRuntime(base_url="unix:///nonexistent.sock").ping(), RuntimeUnavailableError
    )


def docker_socket_denied(env: Env) -> str:
    """A 0600 socket that only root may use, reached by a user outside the docker group."""
    with shared_dir("gpuci-badsock-") as directory:
        path = directory / "docker.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            listener.listen()
            path.chmod(0o600)
            code = (
                "from gpuci_tui.core.docker.runtime import DockerRuntime\n"
                "try:\n"
                f"    DockerRuntime(base_url='unix://{path}').ping()\n"
                "except Exception as exc:\n"
                "    print(type(exc).__name__, exc)\n"
            )
            out = as_nobody(code, directory)
        finally:
            listener.close()
    return out.replace(str(directory), "{dir}")


def image_missing(env: Env) -> str:
    image = f"gpuci-fixture/absent-{uuid.uuid4().hex[:8]}:1"
    runtime = DockerRuntime()
    try:
        spec = ContainerSpec(
            name=f"gpuci-badinput-{uuid.uuid4().hex[:8]}",
            image=image,
            labels={"gpuci.test": "badinput"},
            environment={},
            network="host",
        )
        message = message_of(lambda: runtime.start(spec, PAT), ContainerStartError)
    finally:
        runtime.close()
    return message.replace(image, "{image}")


# --------------------------------------------------------------------------- NVML


def nvml_missing(env: Env) -> str:
    """A fresh interpreter without the test's fake libnvidia-ml (this one may have it loaded)."""
    code = (
        "import json\n"
        "from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler\n"
        "s = NvmlSampler()\n"
        "host = s.host_info()\n"
        "s.close()\n"
        "print(json.dumps([host.available, host.reason]))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    available, reason = json.loads(out.stdout)
    assert available is False
    return str(reason)


# --------------------------------------------------------------------------- keyring


def keyring_locked(env: Env) -> str:
    status = diagnose_keyring(LockedKeyring())
    assert (status.usable, status.kind) == (False, "locked")
    assert status.message == "The keyring is locked: Failed to unlock the collection!"
    return message_of(lambda: TokenStore(LockedKeyring(), environ={}).get_token(GOOD_URL))


def keyring_absent(env: Env) -> str:
    backend = fail.Keyring()  # type: ignore[no-untyped-call]
    status = diagnose_keyring(backend)
    assert (status.usable, status.kind) == (False, "absent")
    return message_of(lambda: TokenStore(backend, environ={}).set_token(GOOD_URL, PAT))


# --------------------------------------------------------------------------- command line


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def cli_scale_two(env: Env) -> str:
    out = cli("scale", "two")
    assert (out.returncode, out.stdout) == (exitcodes.USAGE, "")
    assert out.stderr.startswith("usage: gpuci-tui scale [-h] [--group GROUP] [-v] count\n")
    assert "Traceback" not in out.stderr
    return out.stderr.splitlines()[-1]


def cli_check_config_process(env: Env) -> str:
    """The real process: exit 4, one line per problem, never a traceback."""
    bad = env.tmp / "bad.toml"
    doc = good_doc()
    doc["agents"]["count"] = "two"
    doc["agents"]["gpus"] = "every"
    write_toml(bad, doc)
    data = bad.read_bytes()
    out = cli("--config", str(bad), "check-config")
    assert (out.returncode, out.stdout) == (exitcodes.CONFIG, "")
    assert "Traceback" not in out.stderr
    assert bad.read_bytes() == data
    return out.stderr.replace(str(bad), "{bad}")


def cli_empty_config_path(env: Env) -> str:
    out = cli("--config", "", "status")
    assert (out.returncode, out.stdout) == (exitcodes.CONFIG, "")
    return out.stderr


def cli_run_with_a_missing_pat_file(env: Env) -> str:
    """``gpuci-tui run`` refuses to start (exit 5) and says which file is missing."""
    config = env.tmp / "run.toml"
    save_good(config)
    data = config.read_bytes()
    out = cli(
        "--config",
        str(config),
        "run",
        env={**os.environ, "GPUCI_PAT_FILE": str(env.tmp / "absent-pat")},
    )
    assert (out.returncode, out.stdout) == (exitcodes.CREDENTIALS, "")
    assert config.read_bytes() == data
    return out.stderr
