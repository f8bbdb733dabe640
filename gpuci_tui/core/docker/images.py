"""Which image a container runs: its id, and its registry digest for the configured repository.

The image id (``sha256:`` of the image config) says exactly what ran; the repo
digest (``REPO@sha256:`` of the manifest) is what a registry and a pinned
``image = "REPO@sha256:…"`` speak. Docker keeps one repo digest per repository the
image was pulled from or pushed to (``RepoDigests``); an image built here and
never pushed has none. Pure functions: nothing here talks to the engine.
"""

from __future__ import annotations

from collections.abc import Iterable

_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def repository(reference: str) -> str:
    """The repository of an image reference: without its tag and digest.

    ``registry:5000/team/agent:cuda12@sha256:…`` → ``registry:5000/team/agent``
    (the ``:5000`` of a registry host is not a tag).
    """
    name = reference.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    if ":" in last:
        last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def familiar(repo: str) -> str:
    """Docker Hub's long names in their short form (``docker.io/library/ubuntu`` → ``ubuntu``)."""
    for prefix in _HUB_PREFIXES:
        if repo.startswith(prefix):
            repo = repo[len(prefix) :]
            break
    return repo.removeprefix("library/") if repo.count("/") == 1 else repo


def repo_digest_for(reference: str, repo_digests: Iterable[str]) -> str:
    """The image's repo digest for ``reference``'s repository ("" when it has none).

    A reference pinned by digest gets that digest when the image carries it
    (an image may hold several for one repository: a manifest list and its
    platform manifest); otherwise the first one of the repository.
    """
    wanted = familiar(repository(reference))
    pinned = reference.partition("@")[2]
    matches = [
        str(item)
        for item in repo_digests
        if "@" in str(item) and familiar(str(item).split("@", 1)[0]) == wanted
    ]
    for item in matches:
        if pinned and item.endswith(f"@{pinned}"):
            return item
    return matches[0] if matches else ""
