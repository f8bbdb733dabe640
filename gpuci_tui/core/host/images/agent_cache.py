"""The host's cache of verified Azure Pipelines agent packages, one directory per version.

When the organisation requires a newer agent than an image bakes, a ``--once``
agent spends its one run on the update and leaves (issue 20). The daemon fetches
the required package ONCE (URL and SHA-256 from ``packages/agent``), verifies it,
unpacks it into ``ROOT/<version>/`` and mounts that directory read-only into new
agent containers, whose ``start.sh`` prefers it to the baked agent.

Safety, because what is cached runs every CI job of the host:

* only ``http(s)`` URLs; no credentials are sent (the packages are public);
* the tarball streams into a temporary file next to the cache, its SHA-256 computed
  on the way, with a size cap; a mismatch is refused (`PackageRefused`) and nothing
  is kept; a partial download leaves nothing behind;
* it is unpacked with tarfile's ``data`` filter (no absolute paths, no links out,
  no device files, no setuid bits) into a temporary directory, made read-only for
  group and others (dirs 0755), then renamed into place atomically, so a reader
  sees a whole version or none;
* concurrent requests for one version wait for a single download.

``.image-agent-version`` is written into the tree (the file the image's agent
directory carries too), so start.sh's per-version copy logic works unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from gpuci_tui.core.engine.agent_versions import parse_version
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.packages import AgentPackage

#: The version file start.sh compares (the image's agent directory has one too).
VERSION_FILE = ".image-agent-version"
#: A real agent tarball is ~150 MB; anything much bigger is not an agent package.
MAX_BYTES = 512 * 1024 * 1024
#: Versions kept: the current one and the previous (containers may still use it).
KEEP = 2

Fetch = Callable[[str, BinaryIO, int], None]
"""Download ``url`` into the open file, at most ``max_bytes`` (raise beyond): the seam."""

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class PackageError(GpuciError):
    """The package could not be fetched now (network, server); may work later."""


class PackageRefused(PackageError):  # noqa: N818 - a refusal, named as the operator reads it
    """The package is not trusted (hash mismatch, no hash, bad URL, too big): never used."""


def http_fetch(url: str, dest: BinaryIO, max_bytes: int) -> None:
    """Stream ``url`` into ``dest`` without credentials; raise `PackageError` on failure."""
    import requests  # noqa: PLC0415 - only the daemon's real downloads need it

    try:
        with requests.get(url, stream=True, timeout=(10, 60), allow_redirects=True) as r:
            if r.status_code != 200:
                raise PackageError(f"{url} answered HTTP {r.status_code}")
            got = 0
            for chunk in r.iter_content(1 << 16):
                got += len(chunk)
                if got > max_bytes:
                    raise PackageRefused(f"{url} is larger than {max_bytes} bytes")
                dest.write(chunk)
    except requests.RequestException as exc:
        raise PackageError(f"cannot download {url}: {exc}") from None


class AgentPackageCache:
    """Verified agent packages under ``root``, one directory per version; thread-safe.

    Args:
        root: The cache directory (created 0755).
        fetch: The download seam (default: plain HTTPS through requests).
        max_bytes: Size cap of one tarball.
    """

    def __init__(self, root: Path, fetch: Fetch = http_fetch, max_bytes: int = MAX_BYTES) -> None:
        self.root = root
        self.fetch = fetch
        self.max_bytes = max_bytes
        self.downloads = 0
        """Downloads started (a test counts one per version)."""
        self._lock = threading.Lock()
        self._version_locks: dict[str, threading.Lock] = {}

    def path(self, version: str) -> Path:
        """Where ``version`` is (or would be) unpacked."""
        if parse_version(version) is None:
            raise PackageRefused(f"not an agent version: {version!r}")
        return self.root / version

    def cached(self, version: str) -> Path | None:
        """The unpacked directory of ``version``, None when it is not (wholly) there."""
        path = self.path(version)
        return path if (path / VERSION_FILE).is_file() else None

    def versions(self) -> list[str]:
        """The cached versions, newest first."""
        try:
            names = [p.name for p in self.root.iterdir() if (p / VERSION_FILE).is_file()]
        except OSError:
            return []
        found = [(parse_version(n), n) for n in names]
        return [n for v, n in sorted((v, n) for v, n in found if v is not None)[::-1]]

    def ensure(self, package: AgentPackage) -> Path:
        """The unpacked, verified directory of ``package``: fetched once, then from the cache.

        Raises:
            PackageRefused: wrong or missing SHA-256, not an http(s) URL, too big,
                not a tarball: nothing is kept.
            PackageError: the download failed (try again later).
        """
        path = self.path(package.version)
        with self._lock:
            lock = self._version_locks.setdefault(package.version, threading.Lock())
        with lock:  # concurrent callers for one version: the first downloads, the rest reuse
            if self.cached(package.version) is not None:
                return path
            self._check(package)
            self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.root, prefix=".download-")
            try:
                with open(fd, "wb") as tmp:
                    self.downloads += 1
                    self.fetch(package.download_url, tmp, self.max_bytes)
                digest = _sha256(Path(name), self.max_bytes)
                if digest != package.hash_value:
                    raise PackageRefused(
                        f"agent package {package.version} refused: its SHA-256 is {digest}, "
                        f"the organisation lists {package.hash_value}"
                    )
                self._unpack(Path(name), package.version, path)
            finally:
                # A partial or refused download leaves nothing behind.
                Path(name).unlink(missing_ok=True)
            return path

    def prune(self, keep: int = KEEP) -> list[str]:
        """Remove all but the ``keep`` newest versions; returns the versions removed."""
        removed = []
        for version in self.versions()[keep:]:
            shutil.rmtree(self.root / version, ignore_errors=True)
            removed.append(version)
        return removed

    def _check(self, package: AgentPackage) -> None:
        scheme = urlsplit(package.download_url).scheme.lower()
        if scheme not in ("http", "https"):
            raise PackageRefused(
                f"agent package {package.version} refused: {package.download_url!r} "
                "is not an http(s) URL"
            )
        if not _HEX64.match(package.hash_value):
            raise PackageRefused(
                f"agent package {package.version} refused: the organisation lists no SHA-256 "
                "for it, so it cannot be verified"
            )

    def _unpack(self, tarball: Path, version: str, dest: Path) -> None:
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=f".unpack-{version}-"))
        try:
            try:
                with tarfile.open(tarball, "r:gz") as tar:
                    tar.extractall(staging, filter="data")
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise PackageRefused(
                    f"agent package {version} refused: not a readable tarball ({exc})"
                ) from None
            (staging / VERSION_FILE).write_text(version + "\n", encoding="utf-8")
            _read_only_for_others(staging)
            try:
                os.rename(staging, dest)
            except OSError:
                if self.cached(version) is None:  # another daemon won the race: keep its copy
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _sha256(path: Path, max_bytes: int) -> str:
    if path.stat().st_size > max_bytes:
        raise PackageRefused(f"{path.name} is larger than {max_bytes} bytes")
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_only_for_others(top: Path) -> None:
    """Directories 0755, files keep their execute bit, nobody but the owner may write."""
    os.chmod(top, 0o755)
    for base, dirs, files in os.walk(top):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o755)
        for name in files:
            full = os.path.join(base, name)
            if not os.path.islink(full):
                os.chmod(full, 0o755 if os.stat(full).st_mode & 0o111 else 0o644)
