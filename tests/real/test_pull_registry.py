"""Pulls from a real registry on loopback (issue 20 item 2): progress, a moved tag, auth, not found.

Every image is built here from the busybox fixture and pushed to a
``docker-registry`` the test started on 127.0.0.1 (tests/real/registry.py);
credentials live in a temporary ``DOCKER_CONFIG``, so the machine's own Docker
configuration is never read or changed. The registry stopped mid-pull is a drill
(tests/drills/test_pull_drill.py): it needs an engine of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.pull_progress import PullProgress
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import ImagePullError
from gpuci_tui.core.host.images.puller import ImagePuller
from tests.real.registry import (
    LoopbackRegistry,
    docker_config,
    loopback_registry,
    publish,
    remove_repo,
    unique_repo,
)

pytestmark = [pytest.mark.docker, pytest.mark.registry]

MB = 1_000_000
USER, PASSWORD = "ci", "s3cret-pull"


@pytest.fixture(autouse=True)
def own_docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Docker config of the test's own: the machine's is never used."""
    folder = tmp_path / "docker-config"
    folder.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    return folder


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRegistry]:
    with loopback_registry(tmp_path_factory.mktemp("registry")) as started:
        yield started


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRegistry]:
    """A registry that asks for basic auth (htpasswd)."""
    root = tmp_path_factory.mktemp("locked")
    with loopback_registry(root, {USER: PASSWORD}) as started:
        yield started


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def __call__(self, kind: str, message: str) -> None:
        self.items.append((kind, message))


def local_digests(runtime: DockerRuntime, ref: str) -> tuple[str, ...] | None:
    return runtime.registry.local_digests(ref)


def test_a_pull_reports_growing_bytes_and_the_final_digest(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, registry: LoopbackRegistry
) -> None:
    ref = f"{registry.host}/{unique_repo()}:v1"
    digest = publish(docker_client, busybox_image, ref, 12 * MB)
    assert local_digests(runtime, ref) is None
    seen: list[PullProgress] = []
    events = Events()
    try:
        final = ImagePuller(runtime.registry, report=events).pull(ref, on_progress=seen.append)
        assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)
        assert len({p.bytes_done for p in seen}) >= 2, "the bytes grew during the pull"
        assert final.bytes_done == final.bytes_total >= 12 * MB
        assert final.digest == digest and final.finished
        assert (final.layers_done, final.layers_total) == (2, 2)  # busybox's layer was here
        assert f"{ref.rpartition(':')[0]}@{digest}" in (local_digests(runtime, ref) or ())
        assert [k for k, _ in events.items] == ["pull_started", "pull_done"]
        assert digest in events.items[1][1]
    finally:
        remove_repo(docker_client, ref)


def test_a_new_digest_behind_the_same_tag(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, registry: LoopbackRegistry
) -> None:
    ref = f"{registry.host}/{unique_repo()}:stable"
    repo = ref.rpartition(":")[0]
    first = publish(docker_client, busybox_image, ref, 1 * MB)
    now = [1000.0]
    puller = ImagePuller(runtime.registry, clock=lambda: now[0])
    try:
        assert puller.ensure(ref, "missing", 300.0) is None
        assert local_digests(runtime, ref) == (f"{repo}@{first}",)
        second = publish(docker_client, busybox_image, ref, 1 * MB)  # the tag moves
        assert second != first
        now[0] += 10
        assert puller.ensure(ref, "missing", 300.0) is None
        assert local_digests(runtime, ref) == (f"{repo}@{first}",), '"missing" keeps what is here'
        # "always" asked the registry at the pull above: within the interval it asks nothing.
        assert puller.ensure(ref, "always", 300.0) is None
        assert local_digests(runtime, ref) == (f"{repo}@{first}",)
        now[0] += 300
        assert puller.ensure(ref, "always", 300.0) is None
        assert local_digests(runtime, ref) == (f"{repo}@{second}",), '"always" picks it up'
        assert puller.pulls == {"ok": 2}
    finally:
        remove_repo(docker_client, ref)


def test_docker_s_own_credentials_are_used_and_wrong_ones_named(
    runtime: DockerRuntime,
    docker_client: Any,
    busybox_image: str,
    locked: LoopbackRegistry,
    own_docker_config: Path,
) -> None:
    ref = f"{locked.host}/{unique_repo()}:v1"
    publish(docker_client, busybox_image, ref, 1 * MB, auth=locked.auth())
    hint = f"check `docker login {locked.host}`"
    # No credentials at all, then wrong ones: the message names auth and docker login.
    for password in (None, "wrong"):
        if password is not None:
            docker_config(own_docker_config, locked.host, USER, password)
        with pytest.raises(ImagePullError) as caught:
            ImagePuller(runtime.registry).pull(ref)
        assert caught.value.kind == "auth"
        assert str(caught.value).startswith(f"pull of {ref} failed: unauthorized ({hint}")
        assert local_digests(runtime, ref) is None
    # The right ones in DOCKER_CONFIG (as `docker login` writes them): the pull works,
    # read again at the call (a login while the daemon runs counts).
    docker_config(own_docker_config, locked.host, USER, PASSWORD)
    try:
        ImagePuller(runtime.registry).pull(ref)
        assert local_digests(runtime, ref)
    finally:
        remove_repo(docker_client, ref)


def test_not_found_says_so_and_the_lane_waits(
    runtime: DockerRuntime, registry: LoopbackRegistry
) -> None:
    ref = f"{registry.host}/{unique_repo()}:v9"
    events = Events()
    puller = ImagePuller(runtime.registry, report=events)
    answer = puller.ensure(ref, "missing", 300.0)
    assert answer is not None
    assert answer.startswith(
        f"pull of {ref} failed: not found in {registry.host} (check the repository and tag); "
        "Docker said: "
    )
    assert "manifest unknown" in answer
    assert events.items[-1] == ("pull_failed", answer)
    with pytest.raises(ImagePullError) as caught:
        runtime.registry.remote_digest(ref)
    assert caught.value.kind == "not_found"
    assert str(caught.value).startswith(f"registry check of {ref} failed: not found")


def test_an_unreachable_registry_is_named(runtime: DockerRuntime) -> None:
    from tests.real.registry import free_port

    host = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ImagePullError) as caught:
        ImagePuller(runtime.registry).pull(f"{host}/agent:v1")
    assert caught.value.kind == "unreachable"
    assert str(caught.value).startswith(
        f"pull of {host}/agent:v1 failed: registry {host} unreachable"
    )
