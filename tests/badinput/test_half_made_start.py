"""A container start that fails half-way never blocks its slot's name.

Faults are injected into the real Docker path (the engine's client, on the real
engine): the token copy fails with "Too many open files" and so does the
removal meant to clean up; or the engine creates the container but its answer
is lost. The next start of the same name must succeed all the same, while a
container of the same name that is not ours is left alone.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest
import requests

from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import ContainerNameConflictError, RuntimeUnavailableError
from tests.real.docker_runtime_helpers import make_spec, ours, secret

pytestmark = pytest.mark.docker


def emfile(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.EMFILE, "Too many open files")


def by_name(docker_client: Any, run_label: str, name: str) -> list[dict[str, Any]]:
    return [c for c in ours(docker_client, run_label) if f"/{name}" in c["Names"]]


def test_copy_and_cleanup_both_failing_leave_a_container_the_next_start_removes(
    docker_client: Any, busybox_image: str, run_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = DockerRuntime(docker_client)
    spec = make_spec(run_label, "half", busybox_image)
    with monkeypatch.context() as faults:
        faults.setattr(docker_client.api, "put_archive", emfile)
        faults.setattr(docker_client.api, "remove_container", emfile)
        with pytest.raises(RuntimeUnavailableError, match="out of file descriptors"):
            runtime.start(spec, secret())
    left = by_name(docker_client, run_label, spec.name)
    assert [c["State"] for c in left] == ["created"]  # the fault really left it behind
    info = runtime.start(spec, secret())
    now = by_name(docker_client, run_label, spec.name)
    assert [(c["Id"], c["State"]) for c in now] == [(info.id, "running")]


def test_a_create_whose_answer_was_lost_does_not_block_the_name(
    docker_client: Any, busybox_image: str, run_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = DockerRuntime(docker_client)
    spec = make_spec(run_label, "lost", busybox_image)
    real_create = docker_client.api.create_container

    def create_then_lose_the_answer(*args: Any, **kwargs: Any) -> Any:
        real_create(*args, **kwargs)
        raise requests.exceptions.ConnectionError(OSError(errno.EMFILE, "Too many open files"))

    with monkeypatch.context() as faults:
        faults.setattr(docker_client.api, "create_container", create_then_lose_the_answer)
        with pytest.raises(RuntimeUnavailableError):
            runtime.start(spec, secret())
    assert [c["State"] for c in by_name(docker_client, run_label, spec.name)] == ["created"]
    info = runtime.start(spec, secret())
    assert [c["Id"] for c in by_name(docker_client, run_label, spec.name)] == [info.id]


def test_a_container_of_the_same_name_that_is_not_ours_is_left_alone(
    docker_client: Any, busybox_image: str, run_label: str
) -> None:
    runtime = DockerRuntime(docker_client)
    spec = make_spec(run_label, "foreign", busybox_image)
    foreign = docker_client.api.create_container(
        busybox_image, ["true"], name=spec.name, labels={"gpuci.test": run_label, "x": "other"}
    )
    with pytest.raises(ContainerNameConflictError):
        runtime.start(
            make_spec(run_label, "foreign", busybox_image, labels={"gpuci.test": "b"}), secret()
        )
    assert [c["Id"] for c in by_name(docker_client, run_label, spec.name)] == [foreign["Id"]]
