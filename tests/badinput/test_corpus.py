"""The bad-input corpus (issue 5 §3): every wrong value an operator can give, with its exact message.

Two tables, both through public entry points only:

* `CONFIG_CASES`: a wrong value in config.toml. Each one is asserted three ways with the
  same words: `load_config` on the file, ``gpuci-tui --config FILE check-config`` (exit 4,
  the message on stderr, nothing else), and `save_config` of the same values built in
  memory over an existing good file, which must refuse. The bad file and the good
  configuration directory are compared byte for byte afterwards: nothing is rewritten,
  no ``.bak`` or temporary file is left.
* `OTHER_CASES`: everything else the operator touches: the organisation URL as the
  Azure client sees it, PATs, pools, the Docker engine, NVML, the keyring, the command
  line. Each case returns the message the operator would read; the good configuration
  must again be untouched.

No network beyond loopback: organisation answers come from SimServer on 127.0.0.1, and
remote host names only ever reach a requests adapter that records and never resolves.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keyring.errors
import pytest
import requests
from keyring.backend import KeyringBackend
from keyring.backends import fail
from requests.adapters import HTTPAdapter

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.azure import AzureDevOpsClient
from gpuci_tui.core.config import (
    AgentsConfig,
    AzureConfig,
    Config,
    ConfigError,
    VolumeConfig,
    load_config,
    save_config,
    validate_config,
)
from gpuci_tui.core.config_validate import PAT_ADVICE
from gpuci_tui.core.protocols import (
    AzureError,
    AzureNotFoundError,
    ContainerSpec,
    ContainerStartError,
    GpuciError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.runtime import DockerRuntime
from gpuci_tui.core.secrets import TokenStore, diagnose_keyring
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.badinput.helpers import (
    GOOD_URL,
    Snapshot,
    as_nobody,
    good_doc,
    save_good,
    shared_dir,
    write_toml,
)

PAT = "corpusPAT" + uuid.uuid4().hex + uuid.uuid4().hex[:11]
AGAIN = "copy it again from Azure DevOps (User settings > Personal access tokens)."
AGENTS_KEYS = (
    "count, image, name_prefix, network, gpus, volumes, oom_score_adj, mem_limit, docker_socket"
)


# =========================================================================== config.toml


@dataclass(frozen=True)
class ConfigCase:
    """A good document with one thing wrong, and the one problem that must be reported."""

    id: str
    patch: Callable[[dict[str, Any], Path], None]
    """Makes the good document bad; gets a directory for host paths."""
    key: str
    problem: str
    """``{tmp}`` stands for that directory."""
    in_memory: bool = True
    """Whether the same values can be built as a `Config` (not so for unknown keys)."""
    gpu_count: int | None = None
    """The host's GPU count to validate against (only the library API takes it)."""


def setv(section: str, key: str, value: Any) -> Callable[[dict[str, Any], Path], None]:
    def patch(doc: dict[str, Any], tmp: Path) -> None:
        doc.setdefault(section, {})[key] = value

    return patch


def volumes(*items: dict[str, str]) -> Callable[[dict[str, Any], Path], None]:
    """``[[agents.volumes]]`` entries; ``{tmp}`` in a value is the case's directory."""

    def patch(doc: dict[str, Any], tmp: Path) -> None:
        (tmp / "data").mkdir(exist_ok=True)
        (tmp / "afile").write_text("not a directory\n")
        doc["agents"]["volumes"] = [
            {k: v.replace("{tmp}", str(tmp)) for k, v in item.items()} for item in items
        ]

    return patch


def combine(*patches: Callable[[dict[str, Any], Path], None]) -> Callable[..., None]:
    def patch(doc: dict[str, Any], tmp: Path) -> None:
        for p in patches:
            p(doc, tmp)

    return patch


DATA = {"host": "{tmp}/data", "container": "/datasets/a"}
COUNT_RULE = "must be a whole number from 1 to 64, got "

CONFIG_CASES = [
    ConfigCase(
        "url-no-scheme",
        setv("azure", "url", "dev.azure.com/acme"),
        "azure.url",
        'must be a URL starting with https://, e.g. "https://dev.azure.com/acme"; '
        'got "dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-http-remote-host",
        setv("azure", "url", "http://dev.azure.com/acme"),
        "azure.url",
        "must use https:// (http:// is only allowed for a server on this machine: 127.0.0.1, "
        '::1 or localhost); use "https://dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-trailing-project-path",
        setv("azure", "url", "https://dev.azure.com/acme/project"),
        "azure.url",
        'must be the organisation URL, not a project or page; use "https://dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-without-organisation",
        setv("azure", "url", "https://dev.azure.com/"),
        "azure.url",
        'is missing the organisation; use "https://dev.azure.com/ORG"',
    ),
    ConfigCase("count-0", setv("agents", "count", 0), "agents.count", COUNT_RULE + "0"),
    ConfigCase("count-minus-1", setv("agents", "count", -1), "agents.count", COUNT_RULE + "-1"),
    ConfigCase("count-10000", setv("agents", "count", 10000), "agents.count", COUNT_RULE + "10000"),
    ConfigCase(
        "count-two-as-text", setv("agents", "count", "two"), "agents.count", COUNT_RULE + '"two"'
    ),
    ConfigCase(
        "gpus-bad-policy",
        setv("agents", "gpus", "per_agent"),
        "agents.gpus",
        'must be one of "all", "none", "per-agent", got "per_agent"; did you mean "per-agent"?',
    ),
    ConfigCase(
        "gpu-index-beyond-host-gpus",
        combine(setv("agents", "gpus", "per-agent"), setv("agents", "count", 4)),
        "agents.count",
        'is 4 with gpus = "per-agent", but this host has 2 GPUs; lower count to 2 or use '
        'gpus = "all" or "none"',
        gpu_count=2,
    ),
    ConfigCase(
        "gpu-per-agent-on-a-host-without-gpus",
        setv("agents", "gpus", "per-agent"),
        "agents.count",
        'is 2 with gpus = "per-agent", but this host has 0 GPUs; use gpus = "all" or "none"',
        gpu_count=0,
    ),
    ConfigCase(
        "volume-host-path-missing",
        volumes({"host": "{tmp}/absent", "container": "/datasets/a"}),
        "agents.volumes[0].host",
        "{tmp}/absent does not exist on this host; give an existing directory",
    ),
    ConfigCase(
        "volume-host-path-is-a-file",
        volumes({"host": "{tmp}/afile", "container": "/datasets/a"}),
        "agents.volumes[0].host",
        "{tmp}/afile is not a directory; give an existing directory",
    ),
    ConfigCase(
        "volume-relative-container-path",
        volumes({"host": "{tmp}/data", "container": "datasets/a"}),
        "agents.volumes[0].container",
        'must be an absolute path (starting with /), got "datasets/a"',
    ),
    ConfigCase(
        "volume-duplicate-container-path",
        volumes(DATA, {"host": "{tmp}/data", "container": "/datasets/a/"}),
        "agents.volumes[1].container",
        "/datasets/a is already used by another volume",
    ),
    ConfigCase(
        "volume-system-container-path",
        volumes({"host": "{tmp}/data", "container": "/usr/lib"}),
        "agents.volumes[0].container",
        "/usr/lib is a system path in the container; use e.g. /datasets/NAME",
    ),
    ConfigCase(
        "volume-invalid-env-name",
        volumes({**DATA, "env": "1DATA-DIR"}),
        "agents.volumes[0].env",
        "must be a variable name (letters, digits and '_', not starting with a digit), "
        'got "1DATA-DIR"',
    ),
    ConfigCase(
        "volume-reserved-env-name",
        volumes({**DATA, "env": "AZP_TOKEN"}),
        "agents.volumes[0].env",
        '"AZP_TOKEN" is reserved (AZP_* variables belong to the agent); pick another, '
        'e.g. "DATA_DIR"',
    ),
    ConfigCase(
        "unknown-key-with-suggestion",
        setv("agents", "cuont", 3),
        "agents.cuont",
        f'unknown key; did you mean "count"? allowed: {AGENTS_KEYS}',
        in_memory=False,
    ),
    ConfigCase(
        "unknown-section-with-suggestion",
        setv("agent", "count", 3),
        "agent",
        'unknown section; did you mean "agents"? allowed: [azure], [agents], [supervisor], [keys]',
        in_memory=False,
    ),
    ConfigCase(
        "pat-in-config-file",
        setv("azure", "pat", PAT),
        "azure.pat",
        "a PAT or password must not be in the config file: delete this line; " + PAT_ADVICE,
        in_memory=False,
    ),
    ConfigCase(
        "image-uppercase",
        setv("agents", "image", "Registry/GPU-Agent:cuda12"),
        "agents.image",
        'is not an image reference like "REPO/IMAGE:TAG"; repository names must be lowercase, '
        'got "Registry/GPU-Agent:cuda12"',
    ),
]


def as_config(doc: dict[str, Any]) -> Config:
    """The document as an in-memory `Config`, wrong values and all (dataclasses do not check)."""
    agents = dict(doc["agents"])
    agents["volumes"] = tuple(VolumeConfig(**v) for v in agents.get("volumes", ()))
    return Config(azure=AzureConfig(**doc["azure"]), agents=AgentsConfig(**agents))


@pytest.fixture
def good_dir(tmp_path: Path) -> Iterator[Path]:
    """A configuration directory holding a good config.toml; must be untouched at the end."""
    directory = tmp_path / "cfg"
    save_good(directory / "config.toml")
    before = Snapshot(directory)
    yield directory / "config.toml"
    before.assert_unchanged()


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[c.id for c in CONFIG_CASES])
def test_bad_config_value(
    case: ConfigCase, tmp_path: Path, good_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = good_doc()
    case.patch(doc, tmp_path)
    problem = case.problem.replace("{tmp}", str(tmp_path))
    bad = tmp_path / "bad.toml"
    bad_bytes = write_toml(bad, doc)

    # 1. The library, as the console and the daemon read the file.
    with pytest.raises(ConfigError) as caught:
        load_config(bad, gpu_count=case.gpu_count)
    assert str(caught.value) == f"{bad}: {case.key}: {problem}"
    assert PAT not in str(caught.value), "a PAT-like value must never be echoed"
    assert [e.key for e in caught.value.errors] == [case.key]

    # 2. The command line: exit 4 and the same words, nothing on stdout, no traceback.
    if case.gpu_count is None:
        code = main(["--config", str(bad), "check-config"])
        out, err = capsys.readouterr()
        assert (code, out) == (exitcodes.CONFIG, "")
        assert err == f"gpuci-tui: {caught.value}\n"
    assert bad.read_bytes() == bad_bytes, "a failed check must not rewrite the file"

    # 3. Saving the same values over the good file is refused and changes nothing.
    if case.in_memory:
        config = as_config(doc)
        if case.gpu_count is None:
            with pytest.raises(ConfigError) as refused:
                save_config(config, good_dir)
            assert str(refused.value) == f"{case.key}: {problem}"
        else:
            assert [str(e) for e in validate_config(config, gpu_count=case.gpu_count)] == [
                f"{case.key}: {problem}"
            ]


def test_corrupt_toml_is_named_with_line_and_column(
    tmp_path: Path, good_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    text = '[azure\nurl = "https://dev.azure.com/acme"\n'
    write_toml(bad, text)
    expected = (
        f"{bad}: line 1, column 7: not valid TOML (Expected ']' at the end of a table "
        'declaration); fix that line, or move the file away and run "gpuci-tui setup" to '
        "write a new one"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert str(caught.value) == expected
    assert main(["--config", str(bad), "check-config"]) == exitcodes.CONFIG
    assert capsys.readouterr().err == f"gpuci-tui: {expected}\n"
    # Saving over a file the operator broke by hand is refused: their edits would be lost.
    with pytest.raises(ConfigError) as refused:
        save_config(load_config(good_dir), bad)
    assert str(refused.value) == (
        f"{bad}: exists but is not valid TOML, so it was not replaced (your edits would be "
        "lost); fix it or move it away, then save again"
    )
    assert bad.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "cfg"]


def test_unwritable_config_directory_keeps_the_old_file() -> None:
    """As a user who may read but not write the directory (root would write anyway)."""
    with shared_dir("gpuci-badcfg-") as directory:
        path = directory / "config.toml"
        save_good(path)
        path.chmod(0o644)
        before = Snapshot(directory)
        code = (
            "import dataclasses, sys\n"
            "from gpuci_tui.core.config import load_config, save_config\n"
            f"path = __import__('pathlib').Path({str(path)!r})\n"
            "config = load_config(path)\n"
            "changed = dataclasses.replace(config, agents=dataclasses.replace(config.agents, "
            "count=3))\n"
            "try:\n"
            "    save_config(changed, path)\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n"
        )
        out = as_nobody(code, directory)
        before.assert_unchanged()
    assert out == (
        f"ConfigError {path}: cannot write in the directory {directory} (Permission denied, "
        "EACCES); check its permissions and the free space, or choose another file with --config"
    )


# =========================================================================== everything else


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


class MemoryKeyring(KeyringBackend):
    """An in-memory keyring (a usable backend: the PAT rules are what is checked)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.items.pop((service, username), None)


class LockedKeyring(MemoryKeyring):
    """A Secret Service whose collection stays locked (what gnome-keyring raises then)."""

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("Failed to unlock the collection!")

    set_password = get_password  # type: ignore[assignment]


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
    from gpuci_tui.core.config import validate_org_url

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
            "from gpuci_tui.core.secrets import TokenStore\n"
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
                "from gpuci_tui.core.runtime import DockerRuntime\n"
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
        "from gpuci_tui.core.gpu import NvmlSampler\n"
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
    assert out.stderr.startswith("usage: gpuci-tui scale [-h] count\n")
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


@dataclass(frozen=True)
class Case:
    id: str
    run: Callable[[Env], str]
    expected: str


NOT_FOUND_FILE = (
    "GPUCI_PAT_FILE names {tmp}/pat, which does not exist; create it (the PAT on one line, "
    "chmod 600) or unset GPUCI_PAT_FILE."
)
DOCS_POOLS = "Pools you can see: gpu, gpu-a100."

OTHER_CASES = [
    Case(
        "url-typo-host-does-not-resolve",
        typo_host,
        "Cannot reach dev.azure.co: the host name does not resolve (DNS). Check the "
        "organisation URL, this host's network and its proxy settings.",
    ),
    Case(
        "url-http-remote-refused-by-client",
        http_remote_client,
        "Refusing to send the PAT to example.invalid over plain http://: anyone on the network "
        "could read it. Use the https:// address of the organisation (http:// is only allowed "
        "for 127.0.0.1, ::1 and localhost).",
    ),
    Case(
        "url-trailing-path-refused-by-client",
        trailing_path_client,
        "https://dev.azure.com/acme/project/_build is a project or page address, not the "
        "organisation's: use https://dev.azure.com/acme.",
    ),
    Case(
        "pat-with-spaces",
        pat_with_space_in_env,
        f"The PAT in GPUCI_PAT has spaces or line breaks inside; {AGAIN}",
    ),
    Case(
        "pat-with-newline",
        pat_with_newline_typed,
        f"The PAT given has spaces or line breaks inside; {AGAIN}",
    ),
    Case("pat-empty", pat_empty_typed, f"The PAT given is empty; {AGAIN}"),
    Case("pat-file-empty", pat_file_empty, f"The PAT in GPUCI_PAT_FILE is empty; {AGAIN}"),
    Case(
        "pat-file-two-lines",
        pat_file_two_lines,
        f"The PAT in GPUCI_PAT_FILE has spaces or line breaks inside; {AGAIN}",
    ),
    Case("pat-file-missing", pat_file_missing, NOT_FOUND_FILE),
    Case(
        "pat-file-unreadable",
        pat_file_unreadable,
        "TokenFileError GPUCI_PAT_FILE names {dir}/pat, which cannot be read (Permission "
        "denied); make it readable by this user (owned by you, chmod 600).",
    ),
    Case(
        "pool-nonexistent",
        pool_missing,
        f"No agent pool named 'gpu-h100' in acme. Did you mean 'gpu-a100'? {DOCS_POOLS}",
    ),
    Case(
        "pool-several-match",
        pool_ambiguous,
        "2 agent pools in acme are named 'gpu' (ids 42, 45). Rename all but one in "
        "Organization settings → Agent pools.",
    ),
    Case(
        "pool-empty-name",
        pool_empty_name,
        "The agent pool name is empty. Set it in the configuration.",
    ),
    Case(
        "docker-socket-missing",
        docker_socket_missing,
        "Docker engine not reachable: /nonexistent.sock does not exist. Is Docker installed "
        "and running? (systemctl start docker)",
    ),
    Case(
        "docker-socket-permission-denied",
        docker_socket_denied,
        "RuntimeUnavailableError Permission denied on {dir}/docker.sock: add your user to the "
        "'docker' group (sudo usermod -aG docker $USER, then log in again) or run as root",
    ),
    Case(
        "image-missing-locally",
        image_missing,
        "Image {image} is not present locally. Pull or build it first: docker pull {image} "
        "(gpuci-tui never pulls on its own)",
    ),
    Case(
        "nvml-missing",
        nvml_missing,
        "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver is installed on this "
        "host. Install the NVIDIA driver to monitor and use GPUs.",
    ),
    Case(
        "keyring-locked",
        keyring_locked,
        "Cannot read the PAT from the keyring: it is locked (Failed to unlock the collection!). "
        "Unlock it, or use the encrypted file store or GPUCI_PAT_FILE.",
    ),
    Case(
        "keyring-absent",
        keyring_absent,
        "No keyring is available in this session. Over SSH there is usually no Secret Service "
        'on D-Bus. Either run gpuci-tui under "dbus-run-session" with "gnome-keyring-daemon '
        '--unlock" (see README, "Keyring"), or use the encrypted file store (gpuci-tui asks '
        "for its passphrase), or, for a systemd service, put the PAT in a file only you can "
        "read and set GPUCI_PAT_FILE to it.",
    ),
    Case(
        "cli-scale-two",
        cli_scale_two,
        "gpuci-tui scale: error: argument count: invalid int value: 'two'",
    ),
    Case(
        "cli-check-config-process",
        cli_check_config_process,
        'gpuci-tui: {bad}: agents.count: must be a whole number from 1 to 64, got "two"\n'
        '{bad}: agents.gpus: must be one of "all", "none", "per-agent", got "every"\n',
    ),
    Case(
        "cli-empty-config-path",
        cli_empty_config_path,
        'gpuci-tui: --config was given an empty path; give a file, e.g. "--config ~/gpu.toml"\n',
    ),
    Case(
        "cli-run-with-missing-pat-file",
        cli_run_with_a_missing_pat_file,
        "gpuci-tui: GPUCI_PAT_FILE names {tmp}/absent-pat, which does not exist; create it "
        "(the PAT on one line, chmod 600) or unset GPUCI_PAT_FILE.\n",
    ),
]


@pytest.mark.parametrize("case", OTHER_CASES, ids=[c.id for c in OTHER_CASES])
def test_operator_message(case: Case, tmp_path: Path, good_dir: Path) -> None:
    env = Env(tmp_path)
    try:
        message = case.run(env)
    finally:
        env.close()
    assert message == case.expected.replace("{tmp}", str(tmp_path))
    assert PAT not in message


def test_pat_file_with_a_trailing_newline_is_fine(tmp_path: Path) -> None:
    """The usual shape of a PAT file (echo "$PAT" > file) is not bad input."""
    store = pat_file(Env(tmp_path), f"  {PAT}\r\n".encode())
    assert store.get_token(GOOD_URL) == PAT


def test_the_corpus_is_big_enough() -> None:
    cases = (
        len(CONFIG_CASES) + len(OTHER_CASES) + 2  # corrupt TOML, unwritable directory
    )
    assert cases >= 30
    assert len({c.id for c in CONFIG_CASES} | {c.id for c in OTHER_CASES}) == cases - 2


def test_good_config_round_trips(tmp_path: Path) -> None:
    """The baseline every case starts from is itself valid (else every case would pass)."""
    path = tmp_path / "config.toml"
    save_good(path)
    write_toml(tmp_path / "doc.toml", good_doc())
    assert load_config(path) == dataclasses.replace(load_config(tmp_path / "doc.toml"), path=path)
