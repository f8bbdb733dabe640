"""The agent package cache: verified once, refused on a wrong hash, never half there."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

import pytest

from gpuci_tui.core.host.images.agent_cache import (
    VERSION_FILE,
    AgentPackageCache,
    PackageError,
    PackageRefused,
)
from gpuci_tui.core.packages import AgentPackage
from gpuci_tui.sim.agent_packages import VERSION_FILE as SIM_VERSION_FILE
from gpuci_tui.sim.agent_packages import build_tarball

VERSION = "4.270.0"
TARBALL = build_tarball(VERSION)
SHA = hashlib.sha256(TARBALL).hexdigest()


def package(
    version: str = VERSION, sha: str = SHA, url: str = "https://example.invalid/a.tar.gz"
) -> AgentPackage:
    return AgentPackage(version, "linux-x64", url, f"vsts-agent-linux-x64-{version}.tar.gz", sha)


class Server:
    """A fetch seam serving tarballs by URL; counts calls; can fail half-way or wait."""

    def __init__(self, data: bytes = TARBALL) -> None:
        self.data = data
        self.calls = 0
        self.fail_after: int | None = None
        self.gate: threading.Event | None = None

    def __call__(self, url: str, dest: BinaryIO, max_bytes: int) -> None:
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fail_after is not None:
            dest.write(self.data[: self.fail_after])
            raise PackageError(f"connection reset while downloading {url}")
        dest.write(self.data)


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


def test_a_verified_package_is_unpacked_once_read_only_with_its_version_file(
    tmp_path: Path,
) -> None:
    server = Server()
    cache = AgentPackageCache(tmp_path / "cache", server)
    path = cache.ensure(package())
    assert path == tmp_path / "cache" / VERSION
    assert (path / VERSION_FILE).read_text() == VERSION + "\n"
    assert (path / SIM_VERSION_FILE).read_text() == VERSION + "\n"
    assert os.access(path / "run.sh", os.X_OK)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert stat.S_IMODE((path / "bin").stat().st_mode) == 0o755
    assert not stat.S_IMODE((path / SIM_VERSION_FILE).stat().st_mode) & 0o022
    assert cache.ensure(package()) == path and server.calls == 1
    assert cache.versions() == [VERSION] and leftovers(cache.root) == []


def test_a_wrong_hash_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    cache = AgentPackageCache(tmp_path, Server())
    with pytest.raises(PackageRefused, match=f"its SHA-256 is {SHA}, the organisation lists 0+"):
        cache.ensure(package(sha="0" * 64))
    assert cache.cached(VERSION) is None and cache.versions() == []
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("pkg", "why"),
    [
        (package(sha=""), "lists no SHA-256"),
        (package(url="file:///etc/passwd"), "is not an http\\(s\\) URL"),
        (package(url="ftp://example.invalid/a.tar.gz"), "is not an http\\(s\\) URL"),
    ],
)
def test_unverifiable_packages_are_refused_before_any_download(
    tmp_path: Path, pkg: AgentPackage, why: str
) -> None:
    server = Server()
    with pytest.raises(PackageRefused, match=why):
        AgentPackageCache(tmp_path, server).ensure(pkg)
    assert server.calls == 0


def test_a_partial_download_leaves_nothing_and_the_next_try_succeeds(tmp_path: Path) -> None:
    server = Server()
    server.fail_after = 100
    cache = AgentPackageCache(tmp_path, server)
    with pytest.raises(PackageError, match="connection reset"):
        cache.ensure(package())
    assert cache.cached(VERSION) is None and leftovers(tmp_path) == []
    server.fail_after = None
    assert cache.ensure(package()).is_dir() and server.calls == 2


def test_too_big_or_not_a_tarball_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackageRefused, match="larger than"):
        AgentPackageCache(tmp_path, Server(), max_bytes=10).ensure(package())
    junk = b"not a tarball"
    with pytest.raises(PackageRefused, match="not a readable tarball"):
        AgentPackageCache(tmp_path, Server(junk)).ensure(
            package(sha=hashlib.sha256(junk).hexdigest())
        )
    assert leftovers(tmp_path) == []


def test_concurrent_requests_for_one_version_download_once(tmp_path: Path) -> None:
    server = Server()
    server.gate = threading.Event()
    cache = AgentPackageCache(tmp_path, server)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(cache.ensure(package())))]
    threads += [threading.Thread(target=lambda: results.append(cache.ensure(package())))]
    for t in threads:
        t.start()
    server.gate.set()
    for t in threads:
        t.join(10)
    assert results == [tmp_path / VERSION] * 2 and server.calls == 1


def test_prune_keeps_the_current_and_the_previous_version(tmp_path: Path) -> None:
    def fetch(url: str, dest: BinaryIO, max_bytes: int) -> None:
        dest.write(build_tarball(url.rsplit("/", 1)[-1]))

    cache = AgentPackageCache(tmp_path, fetch)
    for version in ("4.262.0", "4.270.0", "4.264.2"):
        data = build_tarball(version)
        cache.ensure(package(version, hashlib.sha256(data).hexdigest(), f"http://h/{version}"))
    assert cache.versions() == ["4.270.0", "4.264.2", "4.262.0"]
    assert cache.prune() == ["4.262.0"] and cache.versions() == ["4.270.0", "4.264.2"]
