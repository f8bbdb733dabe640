"""DockerRuntime without an engine: endpoints, error mapping, spec translation, Docker JSON."""

from __future__ import annotations

import io
import tarfile

import pytest
import requests
import urllib3.exceptions
from docker.types import HostConfig

from gpuci_tui.core.docker.errors import (
    NO_GPU_RUNTIME,
    Endpoint,
    engine_unavailable,
    is_engine_failure,
    resolve_endpoint,
    start_failure,
)
from gpuci_tui.core.docker.events import parse_event
from gpuci_tui.core.docker.mapping import (
    device_requests,
    exit_code_from_status,
    host_config_kwargs,
    info_from_inspect,
    info_from_summary,
    mounts,
    parse_docker_time,
    token_archive,
)
from gpuci_tui.core.errors import ContainerNameConflictError
from gpuci_tui.core.protocols import ContainerEvent, VolumeMount
from tests.core.runtime_helpers import (
    SOCKET,
    TOKEN,
    api_error,
    docker_py_failure,
    spec,
)

# --------------------------------------------------------------------------- endpoints


def test_endpoint_defaults_to_docker_host_then_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert resolve_endpoint(None) == Endpoint("unix:///var/run/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    assert resolve_endpoint(None) == Endpoint("tcp://10.0.0.5:2376", from_env=True)
    assert resolve_endpoint("unix:///x.sock").socket_path == "/x.sock"
    assert Endpoint("tcp://h:1").socket_path is None


# --------------------------------------------------------------------------- engine errors


def test_missing_socket_message() -> None:
    exc = docker_py_failure(FileNotFoundError(2, "No such file or directory"))
    assert str(engine_unavailable(exc, SOCKET)) == (
        "Docker engine not reachable: /var/run/docker.sock does not exist. "
        "Is Docker installed and running? (systemctl start docker)"
    )


def test_permission_denied_message() -> None:
    exc = docker_py_failure(PermissionError(13, "Permission denied"))
    assert is_engine_failure(exc)
    assert str(engine_unavailable(exc, SOCKET)) == (
        "Permission denied on /var/run/docker.sock: add your user to the 'docker' group "
        "(sudo usermod -aG docker $USER, then log in again) or run as root"
    )


def test_refused_socket_means_engine_down() -> None:
    exc = docker_py_failure(ConnectionRefusedError(111, "Connection refused"))
    message = str(engine_unavailable(exc, SOCKET))
    assert message.startswith("Docker engine not running: /var/run/docker.sock exists")
    assert "systemctl start docker" in message


def test_unreachable_docker_host_names_the_variable() -> None:
    endpoint = Endpoint("tcp://127.0.0.1:9", from_env=True)
    refused = urllib3.exceptions.NewConnectionError(
        None,  # type: ignore[arg-type]
        "Failed to establish a new connection: [Errno 111] Connection refused",
    )
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    exc = requests.exceptions.ConnectionError(
        urllib3.exceptions.MaxRetryError(None, "/version", refused)  # type: ignore[arg-type]
    )
    message = str(engine_unavailable(exc, endpoint))
    assert message == (
        "Docker engine at tcp://127.0.0.1:9 (DOCKER_HOST) cannot be reached: connection "
        "refused. Check that the engine runs there and that the address is right, or unset "
        "DOCKER_HOST to use the local socket."
    )


def test_timeout_and_dns_and_tls() -> None:
    endpoint = Endpoint("tcp://gpu-host:2376")
    timeout = requests.exceptions.ReadTimeout("Read timed out. (read timeout=30)")
    assert "did not answer within 30 s" in str(engine_unavailable(timeout, endpoint, 30))
    dns = requests.exceptions.ConnectionError(socket_gaierror())
    assert "host name could not be resolved" in str(engine_unavailable(dns, endpoint))
    unreachable = urllib3.exceptions.NewConnectionError(
        None,  # type: ignore[arg-type]
        "Failed to establish a new connection: [Errno 101] Network is unreachable",
    )
    unreachable.__cause__ = OSError(101, "Network is unreachable")
    message = str(engine_unavailable(requests.exceptions.ConnectionError(unreachable), endpoint))
    assert message.startswith(
        "Docker engine at tcp://gpu-host:2376 cannot be reached: Network is unreachable."
    )
    tls = requests.exceptions.SSLError("certificate verify failed")
    assert "DOCKER_CERT_PATH" in str(engine_unavailable(tls, endpoint))


def socket_gaierror() -> BaseException:
    import socket

    return socket.gaierror(-2, "Name or service not known")


def test_api_errors_are_not_engine_failures() -> None:
    assert not is_engine_failure(api_error(500, "boom"))
    assert not is_engine_failure(ValueError("bad"))
    assert is_engine_failure(requests.exceptions.ConnectionError("x"))


# --------------------------------------------------------------------------- start errors


def test_start_failure_mapping() -> None:
    conflict = start_failure(
        api_error(409, 'Conflict. The container name "/gpu-agent-1" is already in use'),
        name="gpu-agent-1",
        image="img",
        stage="create",
    )
    assert isinstance(conflict, ContainerNameConflictError)
    assert "docker rm -f gpu-agent-1" in str(conflict)

    gpu = start_failure(
        api_error(500, 'could not select device driver "" with capabilities: [[gpu]]'),
        name="a",
        image="img",
        stage="start",
    )
    assert str(gpu) == NO_GPU_RUNTIME
    assert 'set agents.gpus = "none"' in NO_GPU_RUNTIME

    missing = start_failure(
        api_error(404, "No such image: img:1"), name="a", image="img:1", stage="create"
    )
    assert str(missing) == (
        "Image img:1 is not present locally. Pull or build it first: gpuci-tui image pull "
        'or docker pull img:1 (with [agents] pull = "never" gpuci-tui does not pull it)'
    )

    bind = start_failure(
        api_error(400, 'invalid mount config for type "bind": bind source path does not exist: /d'),
        name="a",
        image="img",
        stage="create",
    )
    assert "host path /d of a volume does not exist" in str(bind)

    cuda = start_failure(
        api_error(
            500,
            "OCI runtime create failed: nvidia-container-cli: requirement error: "
            "unsatisfied condition: cuda>=12.8, please update your driver",
        ),
        name="a",
        image="nvidia/cuda:12.8.1-base",
        stage="start",
    )
    assert "needs a newer NVIDIA driver (cuda>=12.8)" in str(cuda)

    other = start_failure(api_error(500, "something odd"), name="a", image="i", stage="copy")
    assert str(other) == "Docker could not copy the token file into container a: something odd"


def test_the_one_redactor_masks_a_secret_passed_explicitly() -> None:
    from gpuci_tui.core.secrets.redaction import redact

    assert redact(f"x {TOKEN} y", TOKEN) == "x *** y"
    assert redact("abc", "") == "abc"


# --------------------------------------------------------------------------- spec translation


def test_gpu_device_requests() -> None:
    assert device_requests("none") == []
    assert device_requests(()) == []
    (everything,) = device_requests("all")
    assert everything["Count"] == -1
    assert everything["Capabilities"] == [["gpu"]]
    assert everything["DeviceIDs"] == []
    (some,) = device_requests(("0", "GPU-fef8089b"))
    assert some["DeviceIDs"] == ["0", "GPU-fef8089b"]
    assert some["Count"] == 0  # Docker refuses Count together with DeviceIDs
    (listed,) = device_requests("1, 3")
    assert listed["DeviceIDs"] == ["1", "3"]


def test_host_config_has_what_an_agent_needs() -> None:
    s = spec(
        gpus="all",
        mem_limit="8m",
        volumes=(VolumeMount("/srv/data", "/data", "DATA"),),
        extra_mounts=(("/var/run/docker.sock", "/var/run/docker.sock", "rw"),),
    )
    config = HostConfig(version="1.41", **host_config_kwargs(s))
    assert "AutoRemove" not in config  # the engine removes dead agents, after their tails
    assert config["OomScoreAdj"] == 1000
    assert config["NetworkMode"] == "host"
    assert config["Memory"] == 8 * 1024 * 1024
    assert config["MemorySwap"] == config["Memory"]
    assert config["DeviceRequests"][0]["Count"] == -1
    assert "Init" not in config  # the image's entrypoint handles signals
    data, sock = config["Mounts"]
    assert (data["Source"], data["Target"], data["ReadOnly"]) == ("/srv/data", "/data", True)
    assert (sock["Type"], sock["ReadOnly"]) == ("bind", False)


def test_no_gpus_no_memory_limit() -> None:
    kwargs = host_config_kwargs(spec())
    assert "device_requests" not in kwargs
    assert "mem_limit" not in kwargs
    assert "mounts" not in kwargs


def test_bad_mount_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="use 'ro'"):
        mounts(spec(extra_mounts=(("/a", "/b", "z"),)))
    (m,) = mounts(spec(extra_mounts=(("/a", "/b", ""),)))
    assert m["ReadOnly"] is True


def test_token_archive_modes_and_content() -> None:
    data = token_archive("/run/azp/token", TOKEN, now=1_700_000_000)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        directory, token_file = tar.getmembers()
        assert (directory.name, directory.isdir(), directory.mode) == ("run/azp", True, 0o700)
        assert (token_file.name, token_file.isfile(), token_file.mode) == (
            "run/azp/token",
            True,
            0o600,
        )
        assert (directory.uid, token_file.uid, token_file.gid) == (0, 0, 0)
        extracted = tar.extractfile(token_file)
        assert extracted is not None
        assert extracted.read() == TOKEN.encode()


@pytest.mark.parametrize("path", ["run/azp/token", "/token", "/run/../etc/token", "/run/"])
def test_token_archive_refuses_odd_paths(path: str) -> None:
    with pytest.raises(ValueError, match="absolute file path"):
        token_archive(path, TOKEN)


# --------------------------------------------------------------------------- Docker JSON


def test_parse_docker_time() -> None:
    assert parse_docker_time("0001-01-01T00:00:00Z") is None
    assert parse_docker_time("") is None
    assert parse_docker_time("2026-11-22T09:35:41.123456789Z") == pytest.approx(
        1795340141.123456, abs=1e-6
    )
    assert parse_docker_time("2026-11-22T10:35:41+01:00") == pytest.approx(1795340141.0)


def test_summary_and_inspect_mapping() -> None:
    assert exit_code_from_status("Exited (137) 2 seconds ago") == 137
    assert exit_code_from_status("Up 3 seconds") is None
    summary = info_from_summary(
        {
            "Id": "abc",
            "Names": ["/gpu-agent-2"],
            "Image": "img:1",
            "Labels": {"k": "v"},
            "State": "exited",
            "Status": "Exited (3) 1 second ago",
        }
    )
    assert (summary.name, summary.status, summary.exit_code, summary.labels) == (
        "gpu-agent-2",
        "exited",
        3,
        {"k": "v"},
    )
    info = info_from_inspect(
        {
            "Id": "abc",
            "Name": "/gpu-agent-2",
            "Config": {"Labels": None, "Image": "img:1"},
            "State": {
                "Status": "exited",
                "ExitCode": 137,
                "OOMKilled": True,
                "StartedAt": "2026-11-22T09:35:41.5Z",
            },
        }
    )
    assert (info.exit_code, info.oom_killed, info.labels, info.image) == (137, True, {}, "img:1")
    assert info.started_at == pytest.approx(1795340141.5)


def test_parse_event() -> None:
    event = parse_event(
        {
            "Type": "container",
            "Action": "die",
            "Actor": {
                "ID": "c1",
                "Attributes": {
                    "exitCode": "3",
                    "image": "img",
                    "name": "gpu-agent-1",
                    "io.gpuci-tui.slot": "1",
                },
            },
            "time": 1700000000,
            "timeNano": 1700000000123456789,
        }
    )
    assert event == ContainerEvent(
        action="die",
        container_id="c1",
        name="gpu-agent-1",
        labels={"io.gpuci-tui.slot": "1"},
        exit_code=3,
        time=pytest.approx(1700000000.123457),  # type: ignore[arg-type]
    )
    health = parse_event({"Action": "health_status: healthy", "Actor": {"ID": "c1"}})
    assert health is not None
    assert (health.action, health.message) == ("health_status", "healthy")
    assert parse_event({"Type": "network", "Action": "connect"}) is None
