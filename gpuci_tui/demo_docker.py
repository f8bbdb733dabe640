"""``gpuci-tui demo --docker``: real emulator containers, and a registry on 127.0.0.1 to pull from.

The demo's agents run the emulator image (`sim.image`), built locally from the
host's static busybox. Its image reference names a registry on loopback, never
a public one, so that a pull (the console's ``i``, ``gpuci-tui image pull``, the
daemon's pull policy) can never reach docker.io for an image that exists only
here:

* with Debian's ``docker-registry`` installed, the demo runs one of its own
  (``docker-registry serve``, storage in the demo's folder, ``127.0.0.1:PORT``),
  pushes the image there and names it ``127.0.0.1:PORT/gpuci-sim/agent:1``: a pull
  asks that registry, as on a real host;
* without it, the image is tagged on the simulated organisation's own port, which
  serves no image: a pull fails there, on loopback, and the demo says so plainly.

`DockerSetup.close` removes the tag it made and stops the registry; the demo's
containers are removed by the demo (`demo.DemoEnvironment.close`).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuci_tui.core.errors import GpuciError

__all__ = ["REPOSITORY", "DemoRegistry", "DockerSetup", "docker_setup"]

REPOSITORY = "gpuci-sim/agent"
TAG = "1"
REGISTRY_START_TIMEOUT = 20.0


class DemoRegistryError(GpuciError):
    """The demo's registry did not start, or refused the push."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DemoRegistry:
    """One ``docker-registry serve`` of the demo's own on 127.0.0.1 (Docker pulls from
    loopback registries over plain HTTP).
    """

    root: Path
    binary: str
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write its configuration into ``root``, start it and wait until it answers.

        Raises:
            DemoRegistryError: it exited or did not answer in time (with its log's end).
        """
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.root / 'data'}\n"
            f"http:\n  addr: {self.host}\n"
        )
        log_path = self.root / "registry.log"
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - a fixed argv of our own
                [self.binary, "serve", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + REGISTRY_START_TIMEOUT
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = log_path.read_text(errors="replace")[-600:].strip()
                raise DemoRegistryError(
                    f"the demo's registry ({self.binary}) did not start on {self.host}"
                    + (f": {tail}" if tail else "")
                )
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).close()  # noqa: S310
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def push(self, client: Any, local: str) -> str:
        """Tag ``local`` as this registry's image and push it there; its reference.

        Raises:
            DemoRegistryError: the engine refused the push.
        """
        import docker.errors

        repository = f"{self.host}/{REPOSITORY}"
        try:
            client.api.tag(local, repository, TAG)
            for line in client.api.push(repository, TAG, stream=True, decode=True):
                if "error" in line:
                    raise DemoRegistryError(f"pushing the demo's image failed: {line['error']}")
        except docker.errors.APIError as exc:
            raise DemoRegistryError(
                f"pushing the demo's image failed: {exc.explanation or exc}"
            ) from None
        return f"{repository}:{TAG}"

    def stop(self) -> None:
        """Stop the registry (its storage goes with the demo's folder)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@dataclass
class DockerSetup:
    """What ``--docker`` made: the image the agents run, and how to undo it."""

    image: str
    """The agents' image: on the demo's registry, or on the organisation's port."""
    pull_note: str
    """Why ``image pull`` pulls nothing here ("" when the demo's registry serves it)."""
    registry: DemoRegistry | None

    def close(self) -> None:
        """Remove the names made on the engine (the tag, and the digest a push or pull
        left) and stop the registry; the built image stays, reused by the next demo.
        """
        import docker

        host = self.image.split("/", 1)[0] + "/"
        with contextlib.suppress(Exception):
            client = docker.from_env()
            try:
                attrs = client.api.inspect_image(self.image)
                names = [*(attrs.get("RepoTags") or ()), *(attrs.get("RepoDigests") or ())]
                for name in names:
                    if name.startswith(host):
                        with contextlib.suppress(docker.errors.APIError):
                            client.api.remove_image(name, noprune=True)
            finally:
                client.close()
        if self.registry is not None:
            self.registry.stop()


def docker_setup(folder: Path, organisation_port: int) -> DockerSetup:
    """Build the emulator image and name it on a loopback registry (see the module).

    Raises:
        GpuciError: no usable engine, no static busybox, or the registry failed.
    """
    import docker as docker_sdk

    from gpuci_tui.sim.image import build_emulator_image

    client = docker_sdk.from_env()
    try:
        local = build_emulator_image(client)
        binary = shutil.which("docker-registry")
        if binary is not None:
            registry = DemoRegistry(folder / "registry", binary)
            registry.start()
            try:
                image = registry.push(client, local)
            except BaseException:
                registry.stop()
                raise
            return DockerSetup(image, "", registry)
        image = f"127.0.0.1:{organisation_port}/{REPOSITORY}:{TAG}"
        client.api.tag(local, image.rsplit(":", 1)[0], TAG)
        note = (
            f"this demo has no registry to pull {image} from: `gpuci-tui demo --docker` runs "
            "one on 127.0.0.1 when Debian's docker-registry is installed (apt-get install "
            "docker-registry). A pull here would ask 127.0.0.1, the simulated organisation, "
            "which serves no image."
        )
        return DockerSetup(image, note, None)
    finally:
        client.close()
