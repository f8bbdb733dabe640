"""Agent packages of the simulated organisation: real (tiny) tarballs with their hashes.

``packages/agent`` lists what the organisation offers, newest first, with a
download URL and the tarball's SHA-256, like the real service (azure-devops-api.md
§2.9). The tarball is a small but real agent tree (``config.sh``, ``run.sh``,
``bin/`` and a version file), built deterministically so its hash is stable, and
served by the sim server itself on loopback (``GET /_download/agent/VER/FILE``,
anonymous like download.agent.dev.azure.com).

`require` raises the version the organisation *requires* while it runs: from
then on an agent older than that, when the server would hand it a job, gets an
update order instead (the real server's AgentRefreshMessage) and a ``--once``
agent leaves to update (exit 12 through start.sh; the emulator does the same).
`corrupt_hash` makes the listed hash wrong, to prove a daemon refuses it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import threading

from gpuci_tui.core.protocols import ContainerSpec
from gpuci_tui.sim.names import agent_release, later_release

#: Versions offered from the start (newest first), with their creation times.
INITIAL = (("4.264.2", "2026-07-01T18:30:02.5270000Z"), ("4.261.0", "2026-05-12T10:02:11.0000000Z"))
PLATFORMS = ("linux-x64", "linux-arm", "linux-arm64", "linux-musl-x64", "linux-musl-arm64")
#: The agent version the emulators bake (agent.sh's AGENT_VERSION; the image's label).
BAKED_AGENT_VERSION = "4.264.2"
#: Where start.sh and the emulators look for a newer agent package the daemon mounted.
PACKAGE_DIR = "/azp/agent-package"
#: Where the packages are said to live when no sim server serves them (in-process API):
#: a name that never resolves, so a simulation never downloads from the internet.
OFFLINE_BASE = "https://sim.invalid"
#: The file of the tarball that names its version (the real agent's is in bin/).
VERSION_FILE = "bin/Agent.Listener.version"


def filename(version: str, platform: str) -> str:
    """``vsts-agent-linux-x64-4.270.0.tar.gz``."""
    return f"vsts-agent-{platform}-{version}.tar.gz"


def build_tarball(version: str) -> bytes:
    """A tiny agent tree as a deterministic ``.tar.gz`` (same bytes every time)."""
    files = {
        "config.sh": "#!/bin/sh\necho 'simulated config.sh'\n",
        "run.sh": "#!/bin/sh\necho 'simulated run.sh'\n",
        "bin/Agent.Listener": f"#!/bin/sh\necho {version}\n",
        VERSION_FILE: f"{version}\n",
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            info.mode = 0o755 if not name.endswith(".version") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def agent_version_of(spec: ContainerSpec) -> tuple[str, str | None]:
    """The version an in-process emulator reports, and what it says about it (agent.sh's rule).

    The baked version, or a newer one from the package mounted at ``AZP_AGENT_PACKAGE_DIR``
    (read on the host side of the mount: the in-process runtime has no container).
    """
    package_dir = spec.environment.get("AZP_AGENT_PACKAGE_DIR", PACKAGE_DIR)
    for mount in spec.volumes:
        if mount.container != package_dir:
            continue
        try:
            with open(f"{mount.host}/.image-agent-version", encoding="utf-8") as fh:
                mounted = fh.readline().strip()
        except OSError:
            continue
        if later_release(mounted, BAKED_AGENT_VERSION):
            return mounted, f"using agent {mounted} from the package mounted at {package_dir}"
    return BAKED_AGENT_VERSION, None


class SimAgentPackages:
    """What ``packages/agent`` offers and the version the organisation requires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offered: list[tuple[str, str]] = list(INITIAL)
        self.required: str | None = None
        """Agents older than this get an update order instead of a job (None: any agent)."""
        self.bad_hash = False
        self._tarballs: dict[str, bytes] = {}
        self.downloads: dict[str, int] = {}
        """Tarball downloads served, per file name (the drills count them)."""

    @property
    def current(self) -> str:
        """The newest version offered."""
        with self._lock:
            return self._offered[0][0]

    def require(self, version: str, created: str = "2026-11-20T09:00:00.0000000Z") -> None:
        """Offer ``version`` (newest) and require it of every agent from now on."""
        if agent_release(version) is None:
            raise ValueError(f"not a version: {version!r}")
        with self._lock:
            if all(v != version for v, _ in self._offered):
                self._offered.insert(0, (version, created))
                self._offered.sort(key=lambda e: agent_release(e[0]) or (0, 0, 0), reverse=True)
            self.required = version

    def corrupt_hash(self, bad: bool = True) -> None:
        """List a wrong SHA-256 for every package (the tarballs stay the same)."""
        with self._lock:
            self.bad_hash = bad

    def update_for(self, agent_version: str) -> str | None:
        """The version an agent of ``agent_version`` must update to first (None: none)."""
        required = self.required
        return required if required and later_release(required, agent_version) else None

    def tarball(self, version: str) -> bytes:
        """The tarball of ``version`` (built once)."""
        with self._lock:
            if version not in self._tarballs:
                self._tarballs[version] = build_tarball(version)
            return self._tarballs[version]

    def serve(self, name: str) -> bytes | None:
        """The bytes of the tarball called ``name`` (None: no such package); counted."""
        with self._lock:
            offered = [v for v, _ in self._offered]
        for version in offered:
            if any(name == filename(version, p) for p in PLATFORMS):
                with self._lock:
                    self.downloads[name] = self.downloads.get(name, 0) + 1
                return self.tarball(version)
        return None

    def entries(self, platform: str | None, top: int | None, base: str) -> list[dict[str, object]]:
        """``packages/agent`` entries, newest first (``base``: where the tarballs are served)."""
        wanted = [platform] if platform else list(PLATFORMS)
        with self._lock:
            offered, bad = list(self._offered), self.bad_hash
        out: list[dict[str, object]] = []
        for version, created in offered:
            major, minor, patch = agent_release(version) or (0, 0, 0)
            digest = hashlib.sha256(self.tarball(version)).hexdigest()
            if bad:
                digest = hashlib.sha256(digest.encode()).hexdigest()
            for plat in (p for p in wanted if p in PLATFORMS):
                name = filename(version, plat)
                out.append(
                    {
                        "type": "agent",
                        "platform": plat,
                        "createdOn": created,
                        "version": {"major": major, "minor": minor, "patch": patch},
                        "downloadUrl": f"{base}/_download/agent/{version}/{name}",
                        "infoUrl": "https://go.microsoft.com/fwlink/?LinkId=798199",
                        "filename": name,
                        "hashValue": digest,
                    }
                )
        return out if top is None else out[:top]
