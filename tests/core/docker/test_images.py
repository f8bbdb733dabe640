"""Which image a container runs: the id from Docker's JSON, the repo digest for the reference."""

from __future__ import annotations

import pytest

from gpuci_tui.core.docker.images import familiar, repo_digest_for, repository
from gpuci_tui.core.docker.mapping import info_from_inspect, info_from_summary
from gpuci_tui.core.formatting import short_id

IMAGE_ID = "sha256:" + "9" * 64
D1, D2 = "sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.mark.parametrize(
    ("reference", "repo"),
    [
        ("agent", "agent"),
        ("agent:cuda12", "agent"),
        ("reg.example:5000/team/agent:cuda12", "reg.example:5000/team/agent"),
        ("reg.example:5000/team/agent", "reg.example:5000/team/agent"),
        (f"reg.example:5000/agent:cuda12@{D1}", "reg.example:5000/agent"),
        (f"agent@{D1}", "agent"),
    ],
)
def test_repository_drops_tag_and_digest_not_the_registry_port(reference: str, repo: str) -> None:
    assert repository(reference) == repo


def test_docker_hub_names_compare_in_their_short_form() -> None:
    assert familiar("docker.io/library/ubuntu") == "ubuntu"
    assert familiar("docker.io/nvidia/cuda") == "nvidia/cuda"
    assert familiar("reg:5000/library/x") == "reg:5000/library/x"


@pytest.mark.parametrize(
    ("reference", "digests", "expected"),
    [
        ("reg:5000/agent:1", [f"other/agent@{D1}", f"reg:5000/agent@{D2}"], f"reg:5000/agent@{D2}"),
        # A pinned reference gets its own digest, even when the image carries two.
        (
            f"reg:5000/agent@{D2}",
            [f"reg:5000/agent@{D1}", f"reg:5000/agent@{D2}"],
            f"reg:5000/agent@{D2}",
        ),
        ("ubuntu:24.04", [f"ubuntu@{D1}"], f"ubuntu@{D1}"),
        ("docker.io/library/ubuntu:24.04", [f"ubuntu@{D1}"], f"ubuntu@{D1}"),
        ("gpuci-fixture/agent:1", [], ""),  # built here, never pushed
        ("reg:5000/agent:1", [f"reg:5000/agent-old@{D1}"], ""),
    ],
)
def test_repo_digest_is_the_one_of_the_references_repository(
    reference: str, digests: list[str], expected: str
) -> None:
    assert repo_digest_for(reference, digests) == expected


def test_image_id_comes_from_the_list_and_from_inspect() -> None:
    summary = info_from_summary(
        {"Id": "abc", "Names": ["/a-0"], "Image": "img:1", "ImageID": IMAGE_ID, "State": "running"}
    )
    assert (summary.image, summary.image_id) == ("img:1", IMAGE_ID)
    inspected = info_from_inspect(
        {
            "Id": "abc",
            "Image": IMAGE_ID,
            "Config": {"Image": "img:1"},
            "State": {"Status": "running"},
        }
    )
    assert (inspected.image, inspected.image_id) == ("img:1", IMAGE_ID)
    assert short_id(IMAGE_ID) == "9" * 12
