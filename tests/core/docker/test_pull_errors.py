"""Docker's words for a failed pull, by kind, with what to do first (a table of real messages)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.docker.pull_errors import classify, login_hint, pull_failure, registry_of


@pytest.mark.parametrize(
    ("image", "registry", "login"),
    [
        ("127.0.0.1:5000/agent:v2", "127.0.0.1:5000", "docker login 127.0.0.1:5000"),
        ("registry.example/team/agent:cuda12", "registry.example", "docker login registry.example"),
        ("localhost/agent:1", "localhost", "docker login localhost"),
        ("team/agent:1", "docker.io", "docker login"),
        ("ubuntu", "docker.io", "docker login"),
    ],
)
def test_the_registry_of_a_reference(image: str, registry: str, login: str) -> None:
    assert (registry_of(image), login_hint(image)) == (registry, login)


@pytest.mark.parametrize(
    ("text", "status", "kind"),
    [
        ('Head "http://127.0.0.1:5000/v2/a/manifests/v1": no basic auth credentials', 500, "auth"),
        ("unauthorized: authentication required", 500, "auth"),
        ("pull access denied for x, repository does not exist or may require 'docker login'", 404, "auth"),
        ("manifest for 127.0.0.1:5000/a:v9 not found: manifest unknown: manifest unknown", 404, "not_found"),
        ("manifest unknown: manifest unknown", None, "not_found"),
        ('Get "http://127.0.0.1:5001/v2/": dial tcp 127.0.0.1:5001: connect: connection refused', 500, "unreachable"),
        ("read tcp 127.0.0.1:55886->127.0.0.1:51575: read: connection reset by peer", None, "unreachable"),
        ("unexpected EOF", None, "unreachable"),
        ("write /var/lib/docker/tmp/GetImageBlob1: no space left on device", None, "disk"),
        # Docker 20.10's words in the full-disk drill: the download fits, unpacking it does not.
        ("failed to register layer: Error processing tar file(exit status 1): write /blob: no space left on device", None, "disk"),
        ("something else entirely", 500, "other"),
    ],
)  # fmt: skip
def test_classify(text: str, status: int | None, kind: str) -> None:
    assert classify(text, status) == kind


def test_the_words_name_the_fix_then_docker_s_own() -> None:
    image = "127.0.0.1:5000/agent:v2"
    error = pull_failure(image, "unauthorized: authentication required", status=500)
    assert (error.kind, str(error)) == (
        "auth",
        "pull of 127.0.0.1:5000/agent:v2 failed: unauthorized (check `docker login "
        "127.0.0.1:5000`; gpuci-tui uses Docker's own credentials); Docker said: unauthorized: "
        "authentication required",
    )
    disk = pull_failure(image, "no space left on device")
    assert str(disk) == (
        "pull of 127.0.0.1:5000/agent:v2 failed: Docker's disk is full (free space: docker image "
        "prune); Docker said: no space left on device"
    )
    other = pull_failure(image, "  ", doing="registry check")
    assert (other.kind, str(other)) == (
        "other",
        "registry check of 127.0.0.1:5000/agent:v2 failed: no reason given",
    )
