"""DockerRuntime without an engine: the event stream (follow, reconnect, stop) and the runtime on fakes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import docker
import docker.errors
import pytest
import requests
from docker.types import HostConfig

from gpuci_tui.core.docker.errors import (
    NO_GPU_RUNTIME,
)
from gpuci_tui.core.docker.events import STREAM_ENDED, follow_events
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import ContainerStartError, RuntimeUnavailableError
from gpuci_tui.core.protocols import ContainerEvent, ContainerRuntime
from tests.core.runtime_helpers import (
    TOKEN,
    api_error,
    spec,
    wait_until,
)

# --------------------------------------------------------------------------- event following


class FakeStream:
    """Yields canned events, then breaks (raises) or blocks until closed."""

    def __init__(self, events: list[Mapping[str, Any]], then: str = "raise") -> None:
        self.events = events
        self.then = then
        self.closed = threading.Event()
        self.blocking = threading.Event()

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        yield from self.events
        if self.then == "raise":
            raise requests.exceptions.ChunkedEncodingError("Connection broken")
        if self.then == "block":
            self.blocking.set()
            self.closed.wait(30)

    def close(self) -> None:
        self.closed.set()


def raw_event(action: str, cid: str, **attributes: str) -> dict[str, Any]:
    return {
        "Type": "container",
        "Action": action,
        "Actor": {"ID": cid, "Attributes": {"name": cid, **attributes}},
        "timeNano": 1,
    }


def collect(
    events: Iterator[ContainerEvent], until: Callable[[list[ContainerEvent]], bool]
) -> list[ContainerEvent]:
    seen: list[ContainerEvent] = []
    for event in events:
        seen.append(event)
        if until(seen):
            break
    return seen


def test_follow_events_reconnects_after_the_stream_breaks() -> None:
    calls: list[float | None] = []
    last = FakeStream([raw_event("start", "c2")], then="block")
    script: list[FakeStream | BaseException] = [
        FakeStream([raw_event("start", "c1"), raw_event("die", "c1", exitCode="0")]),
        requests.exceptions.ConnectionError(FileNotFoundError(2, "No such file")),
        requests.exceptions.ConnectionError(FileNotFoundError(2, "No such file")),
        last,
    ]

    def open_stream(since: float | None) -> FakeStream:
        calls.append(since)
        step = script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    stop = threading.Event()
    events = follow_events(
        open_stream, stop, describe=lambda e: f"lost: {e}", since=123.0, min_backoff=0.01
    )
    seen = collect(events, lambda s: s[-1].container_id == "c2")
    assert [e.action for e in seen] == ["start", "die", "stream-lost", "stream-restored", "start"]
    assert seen[1].exit_code == 0
    assert seen[2].message.startswith("the Docker event stream broke")
    assert calls == [123.0, None, None, None]  # replay only on the first connection
    stop.set()
    assert list(events) == []
    assert last.closed.is_set()


def test_follow_events_stops_promptly_while_blocked() -> None:
    stream = FakeStream([], then="block")
    stop = threading.Event()
    done = threading.Event()

    def consume() -> None:
        for _ in follow_events(lambda since: stream, stop):
            pass
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    assert stream.blocking.wait(10), "the follower never blocked in the stream read"
    stop.set()
    assert done.wait(1.0), "events() did not return within 1 s of stop"
    assert stream.closed.is_set()


def test_follow_events_stops_promptly_while_connect_hangs() -> None:
    hang = threading.Event()

    def open_stream(since: float | None) -> FakeStream:
        hang.wait(30)
        raise requests.exceptions.ConnectTimeout("hung")

    stop = threading.Event()
    started = time.monotonic()
    threading.Timer(0.1, stop.set).start()
    assert list(follow_events(open_stream, stop)) == []
    assert time.monotonic() - started < 1.0
    hang.set()


def test_lost_is_reported_once_per_outage() -> None:
    attempts = 0

    def open_stream(since: float | None) -> FakeStream:
        nonlocal attempts
        attempts += 1
        raise requests.exceptions.ConnectionError(ConnectionRefusedError(111, "refused"))

    stop = threading.Event()
    seen: list[ContainerEvent] = []

    def consume() -> None:
        seen.extend(
            follow_events(
                open_stream,
                stop,
                describe=lambda e: "engine down",
                min_backoff=0.01,
                max_backoff=0.02,
            )
        )

    thread = threading.Thread(target=consume)
    thread.start()
    assert wait_until(lambda: attempts >= 5)
    stop.set()
    thread.join(2)
    assert [(e.action, e.message) for e in seen] == [("stream-lost", "engine down")]


def test_a_stream_that_just_ends_counts_as_lost() -> None:
    streams = [FakeStream([raw_event("start", "c1")], then="end"), FakeStream([], then="block")]
    stop = threading.Event()
    events = follow_events(lambda since: streams.pop(0), stop, min_backoff=0.01)
    seen = collect(events, lambda s: s[-1].action == "stream-restored")
    stop.set()
    assert [(e.action, e.message) for e in seen] == [
        ("start", ""),
        ("stream-lost", STREAM_ENDED),
        ("stream-restored", ""),
    ]


# --------------------------------------------------------------------------- DockerRuntime on fakes


class FakeApi:
    """The part of docker-py's APIClient that DockerRuntime.start uses, recording calls."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.fail = fail or {}

    def _record(self, call: str, /, *args: Any, **kwargs: Any) -> None:
        self.calls.append((call, args, kwargs))
        if call in self.fail:
            raise self.fail[call]

    def inspect_image(self, image: str) -> dict[str, Any]:
        self._record("inspect_image", image)
        return {"Config": {"Env": ["PATH=/bin", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"]}}

    def create_host_config(self, **kwargs: Any) -> HostConfig:
        return HostConfig(version="1.41", **kwargs)

    def create_container(self, **kwargs: Any) -> dict[str, Any]:
        self._record("create_container", **kwargs)
        return {"Id": "f" * 64, "Warnings": []}

    def put_archive(self, container: str, path: str, data: bytes) -> bool:
        self._record("put_archive", container, path, data)
        return True

    def start(self, container: str) -> None:
        self._record("start", container)

    def remove_container(self, container: str, force: bool = False) -> None:
        self._record("remove_container", container, force=force)


class FakeClient:
    def __init__(self, api: FakeApi | None = None, streams: list[Any] | None = None) -> None:
        self.api = api or FakeApi()
        self.streams = streams or []
        self.event_calls: list[dict[str, Any]] = []

    def events(self, **kwargs: Any) -> Any:
        self.event_calls.append(kwargs)
        step = self.streams.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


def test_docker_runtime_satisfies_the_protocol() -> None:
    assert isinstance(DockerRuntime(base_url="unix:///nonexistent.sock"), ContainerRuntime)


def test_start_sequence_never_pulls_and_keeps_the_token_in_the_archive() -> None:
    api = FakeApi()
    runtime = DockerRuntime(FakeClient(api))
    info = runtime.start(spec(gpus=("0",), command=("sleep", "5")), TOKEN)
    assert [c[0] for c in api.calls] == [
        "inspect_image",
        "create_container",
        "put_archive",
        "start",
    ]
    create = api.calls[1][2]
    assert create["name"] == "gpu-agent-1"
    assert create["command"] == ["sleep", "5"]
    assert create["host_config"]["DeviceRequests"][0]["DeviceIDs"] == ["0"]
    assert TOKEN not in repr(create)
    assert TOKEN.encode() in api.calls[2][1][2]
    assert (info.id, info.status, info.name) == ("f" * 64, "running", "gpu-agent-1")
    config = runtime.image_config("x")
    assert config is not None and config.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.4"


def test_failed_start_removes_the_created_container() -> None:
    api = FakeApi(
        fail={
            "start": api_error(500, 'could not select device driver "" with capabilities: [[gpu]]')
        }
    )
    runtime = DockerRuntime(FakeClient(api))
    with pytest.raises(ContainerStartError) as caught:
        runtime.start(spec(gpus="all"), TOKEN)
    assert str(caught.value) == NO_GPU_RUNTIME
    assert api.calls[-1] == ("remove_container", ("f" * 64,), {"force": True})


def test_failed_copy_is_scrubbed_and_cleaned_up() -> None:
    api = FakeApi(fail={"put_archive": api_error(500, f"cannot extract {TOKEN}")})
    runtime = DockerRuntime(FakeClient(api))
    with pytest.raises(ContainerStartError) as caught:
        runtime.start(spec(), TOKEN)
    assert TOKEN not in str(caught.value)
    assert "copy the token file" in str(caught.value)
    assert api.calls[-1][0] == "remove_container"


def test_start_refuses_a_spec_that_exposes_the_pat() -> None:
    api = FakeApi()
    runtime = DockerRuntime(FakeClient(api))
    with pytest.raises(ContainerStartError, match="environment variable AZP_TOKEN") as caught:
        runtime.start(spec(environment={"AZP_TOKEN": TOKEN}), TOKEN)
    assert TOKEN not in str(caught.value)
    with pytest.raises(ContainerStartError, match="the PAT is empty"):
        runtime.start(spec(), "  ")
    assert api.calls == []


def test_runtime_events_reconnect_with_a_fake_client() -> None:
    client = FakeClient(
        streams=[
            requests.exceptions.ConnectionError(ConnectionRefusedError(111, "refused")),
            FakeStream([raw_event("create", "c1")]),
            FakeStream([raw_event("destroy", "c1")], then="block"),
        ]
    )
    runtime = DockerRuntime(client, base_url="unix:///run/test.sock")
    stop = threading.Event()
    seen = collect(runtime.events({"a": "1", "b": "2"}, stop), lambda s: len(s) == 6)
    stop.set()
    assert [e.action for e in seen] == [
        "stream-lost",
        "stream-restored",
        "create",
        "stream-lost",
        "stream-restored",
        "destroy",
    ]
    assert seen[0].message.startswith("Docker engine not running: /run/test.sock exists")
    assert seen[3].message.startswith("the Docker event stream broke")
    filters = client.event_calls[0]["filters"]
    assert filters["label"] == ["a=1", "b=2"]
    assert filters["type"] == "container"
    assert "die" in filters["event"]
    assert client.event_calls[0]["decode"] is True


def test_api_calls_are_counted_even_when_they_fail() -> None:
    client = docker.DockerClient(base_url="unix:///nonexistent.sock", version="1.41")
    runtime = DockerRuntime(client)
    with pytest.raises(RuntimeUnavailableError, match="/nonexistent.sock does not exist"):
        runtime.ping()
    assert runtime.api_call_count == 1
    runtime.close()
    with pytest.raises(requests.exceptions.ConnectionError):
        client.ping()  # no longer counted after close()
    assert runtime.api_call_count == 1
