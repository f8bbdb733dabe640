"""A failed pull or registry check put into words: auth, not found, unreachable, disk.

Docker relays the registry's answer as text (``unauthorized: authentication
required``, ``manifest unknown``, ``dial tcp 127.0.0.1:5000: connect: connection
refused``…), in an `APIError` or in the pull stream's error line. The operator
gets what it means and what to do first, then Docker's own words.
"""

from __future__ import annotations

import re

from gpuci_tui.core.errors import ImagePullError

_AUTH = re.compile(
    r"unauthorized|authentication required|no basic auth credentials|denied|"
    r"incorrect username or password",
    re.I,
)
_NOT_FOUND = re.compile(
    r"manifest unknown|not found|repository does not exist|name unknown|no such image", re.I
)
_DISK = re.compile(r"no space left on device", re.I)
_UNREACHABLE = re.compile(
    r"connection refused|no such host|i/o timeout|dial tcp|connection reset|unexpected EOF|"
    r"\bEOF\b|timeout|network is unreachable|TLS handshake|server misbehaving|"
    r"server gave HTTP response to HTTPS client|broken pipe",
    re.I,
)


def registry_of(image: str) -> str:
    """The registry host of an image reference (``docker.io`` for Docker Hub's short names).

    Docker's rule: the first path component is a registry when it holds a ``.``
    or a ``:``, or is ``localhost``.
    """
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def login_hint(image: str) -> str:
    """The ``docker login`` command for the image's registry."""
    registry = registry_of(image)
    return "docker login" if registry == "docker.io" else f"docker login {registry}"


def classify(text: str, status: int | None = None) -> str:
    """``auth``, ``not_found``, ``disk``, ``unreachable`` or ``other`` for Docker's message."""
    if _DISK.search(text):
        return "disk"
    if status == 401 or _AUTH.search(text):
        return "auth"
    if status == 404 or _NOT_FOUND.search(text):
        return "not_found"
    if _UNREACHABLE.search(text):
        return "unreachable"
    return "other"


def pull_failure(
    image: str, text: str, *, status: int | None = None, doing: str = "pull"
) -> ImagePullError:
    """The operator's message for a failed ``doing`` (``pull`` or ``registry check``) of ``image``."""
    kind = classify(text, status)
    registry = registry_of(image)
    said = text.strip() or "no reason given"
    words = {
        "auth": f"unauthorized (check `{login_hint(image)}`; gpuci-tui uses Docker's own "
        "credentials)",
        "not_found": f"not found in {registry} (check the repository and tag)",
        "unreachable": f"registry {registry} unreachable (is it up and reachable from this host?)",
        "disk": "Docker's disk is full (free space: docker image prune)",
    }.get(kind)
    if words is None:
        return ImagePullError(f"{doing} of {image} failed: {said}", kind)
    return ImagePullError(f"{doing} of {image} failed: {words}; Docker said: {said}", kind)
