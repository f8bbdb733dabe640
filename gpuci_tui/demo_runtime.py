"""Where the demo's agents run: the simulated runtime and its registry, or Docker.

Without ``--docker`` the agents are threads of a `SimulatedRuntime` that pulls
from a simulated registry (`sim.registry`): the console's ``i`` shows a pull as
on a real host. With ``--docker`` they are emulator containers on the local
engine, whose image a registry on 127.0.0.1 serves (`demo_docker`). Either way
the image is named on a loopback registry, never a public one.

Each part is registered in the demo's clean-up as soon as it exists
(`demo.build_demo`), so an interrupted start leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuci_tui.core.protocols import ContainerRuntime

if TYPE_CHECKING:
    from gpuci_tui.sim.org import SimOrg

__all__ = ["SIMULATED_PULL", "AgentsEngine", "agents_engine", "quietly", "remove_containers"]

SIMULATED_PULL = (
    "this demo's agents run in its simulated runtime, not in this host's Docker engine, so "
    "`image pull` has nothing to pull here. On a host it pulls each group's image through "
    "Docker (layers, bytes, rate, ETA, digest). In the demo's console, i pulls {image} from "
    "the demo's simulated registry the same way; `gpuci-tui demo --docker` runs a registry on "
    "127.0.0.1 that `image pull` pulls from."
)
"""`demo_instance.DemoNotes.pull` of a demo on the simulated runtime."""


@dataclass(frozen=True)
class AgentsEngine:
    """The runtime the demo's agents run in, and what the configuration says of it."""

    runtime: ContainerRuntime
    image: str
    network: str
    gpus: str
    pull_note: str
    """Why ``image pull`` pulls nothing for this demo ("" when it pulls)."""


def agents_engine(
    org: SimOrg, port: int, folder: Path, docker: bool, cleanup: ExitStack
) -> AgentsEngine:
    """The demo's runtime: Docker (``docker``) or the simulated one, on the organisation's
    ``port``; what it makes goes in ``folder``, its undoing in ``cleanup``.

    Raises:
        GpuciError: ``docker`` and no usable engine, busybox or registry.
    """
    if docker:
        from gpuci_tui.core.docker.runtime import DockerRuntime
        from gpuci_tui.demo_docker import docker_setup

        runtime = DockerRuntime()
        runtime.ping()  # a plain message when the engine is unusable
        cleanup.callback(quietly(runtime.close))
        made = docker_setup(folder, port)
        cleanup.callback(quietly(made.close))
        # The organisation listens on 127.0.0.1 only; the GPUs are synthetic: none for a
        # real container.
        return AgentsEngine(runtime, made.image, "host", "none", made.pull_note)
    simulated, image = _simulated_runtime(org, port, cleanup)
    return AgentsEngine(simulated, image, "bridge", "per-agent", SIMULATED_PULL.format(image=image))


def _simulated_runtime(org: SimOrg, port: int, cleanup: ExitStack) -> tuple[ContainerRuntime, str]:
    """The simulated runtime with its registry, and the image it holds.

    The image is named on the organisation's own loopback port (where the simulated
    registry "is"): a console elsewhere that asks Docker to pull it reaches
    127.0.0.1, never a public registry.
    """
    from gpuci_tui.demo_docker import REPOSITORY, TAG
    from gpuci_tui.sim.registry import SimImageRegistry
    from gpuci_tui.sim.runtime import SimulatedRuntime

    image = f"127.0.0.1:{port}/{REPOSITORY}:{TAG}"
    runtime = SimulatedRuntime(org, images=(image,))
    registry = SimImageRegistry(runtime)
    # The registry has a build pushed since the one the runtime holds: a pull shows progress.
    registry.publish(image, behind=True)
    runtime.registry = registry
    cleanup.callback(runtime.close)  # the agents' threads end
    cleanup.callback(registry.close)  # first: a pull in flight ends at its next line
    return runtime, image


def remove_containers(runtime: ContainerRuntime, labels: dict[str, str]) -> None:
    """Remove every container carrying the demo's ``labels`` (``--docker``)."""
    for info in runtime.list_containers(labels):
        with suppress(Exception):
            runtime.remove(info.id)


def quietly(action: Callable[[], object]) -> Callable[[], None]:
    """``action`` whose failure does not keep the rest of the clean-up from running."""

    def run() -> None:
        with suppress(Exception):
            action()

    return run
