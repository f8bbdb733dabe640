"""From configuration to the container of one slot: name, labels, env, GPUs, mounts.

The labels are how a restarted supervisor finds (adopts) its containers, so
their keys are a stable contract; see `LABEL_*`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping

from gpuci_tui.core.config.loader import Config, config_hash, instance_id
from gpuci_tui.core.config.slot_shapes import shaped_slot
from gpuci_tui.core.engine.lifecycle import Lane, lane_name
from gpuci_tui.core.engine.stale import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.core.engine.steps import ListedContainer, NameHolder
from gpuci_tui.core.packages import AgentPackageMount
from gpuci_tui.core.protocols import ContainerInfo, ContainerSpec, VolumeMount

LABEL_PROJECT = "io.gpuci-tui.project"
LABEL_INSTANCE = "io.gpuci-tui.instance"
LABEL_SLOT = "io.gpuci-tui.slot"
LABEL_GROUP = "io.gpuci-tui.group"
"""The agent group of a container, in a configuration with ``[groups.NAME]`` tables."""
LABEL_LANE = "io.gpuci-tui.lane"
"""Which of the slot's two registrations a container is (``a`` or ``b``; absent means ``a``)."""
LABEL_POOL = "io.gpuci-tui.pool"
LABEL_ORG = "io.gpuci-tui.org"
LABEL_CONFIG = "io.gpuci-tui.config"
LABEL_DEMO = "io.gpuci-tui.demo"
LABEL_AGENT_PACKAGE = "io.gpuci-tui.agent-package"
"""The cached agent package version mounted into the container (absent: the image's agent)."""
LABEL_STATE_DIR = "io.gpuci-tui.state-dir"
"""The state directory of the daemon that made the container: whose it is, for an operator
who finds it in another daemon's way (`name_holder`). Not part of the adoption filter."""
START_GATE_LABEL = "io.gpuci.start-gate"
"""An *image* label: ``1`` when its start.sh honours AZP_GO_FILE (dockeragent/start.sh:
after registering it waits for that file before the agent may start)."""
LABEL_GATED = "io.gpuci-tui.gated"
"""``1`` on a container started with the start gate (AZP_GO_FILE set, its image's label
checked at the start): its agent waits for our go. Absent: it starts on its own."""
PROJECT = "gpuci-tui"

TOKEN_PATH = "/run/azp/token"
#: The go file a gated start.sh waits for (its AZP_GO_FILE), written by `ContainerRuntime.put_file`.
GO_FILE = "/run/azp/go"
#: Where start.sh looks for a newer agent package (read-only; its AZP_AGENT_PACKAGE_DIR default).
AGENT_PACKAGE_DIR = "/azp/agent-package"
DOCKER_SOCKET = "/var/run/docker.sock"

__all__ = [
    "build_spec", "config_hash", "gated_of", "image_gated", "instance_id", "instance_labels",
    "lane_of", "package_of", "placed", "slot_gpus", "slot_of", "spec_of",
]  # fmt: skip


def agent_name(config: Config, slot: int, lane: Lane = Lane.A) -> str:
    """Agent and container name of ``lane`` of ``slot`` (see `lifecycle.lane_name`)."""
    return lane_name(config.agents.name_prefix, slot, lane)


def instance_labels(config: Config, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Labels shared by every container of this supervisor (used as the adoption filter)."""
    labels = {LABEL_PROJECT: PROJECT, LABEL_INSTANCE: instance_id(config)}
    labels.update(extra or {})
    return labels


def host_marker() -> str:
    """This host's name as the ``GPUCI_HOST`` marker carries it (see `engine.stale`)."""
    return socket.gethostname()


def slot_gpus(config: Config, slot: int) -> str | tuple[str, ...]:
    """GPUs for ``slot`` under the configured policy.

    ``per-agent``: slot i gets GPU i, or the i-th of ``gpu_ids``; ``list``: every
    slot gets ``gpu_ids``; ``all``/``none`` as said. With ``gpus_per_slot`` > 1 or
    ``mig`` the host's topology decides (`config.slot_shapes`): the GPUs' UUIDs, or
    the MIG device's ``MIG-…`` UUID.
    """
    agents = config.agents
    shaped = shaped_slot(agents, slot)
    if shaped is not None:
        return shaped.ids
    if agents.gpus == "per-agent":
        if agents.gpu_ids:
            return (agents.gpu_ids[slot],) if slot < len(agents.gpu_ids) else "none"
        return (str(slot),)
    if agents.gpus == "list":
        return agents.gpu_ids
    if agents.gpus == "all":
        return "all"
    return "none"


def build_spec(
    config: Config,
    slot: int,
    lane: Lane = Lane.A,
    *,
    extra_labels: Mapping[str, str] | None = None,
    command: tuple[str, ...] | None = None,
    agent_dir_root: str | None = None,
    capabilities: Mapping[str, str] | None = None,
    agent_package: AgentPackageMount | None = None,
    gate: bool = False,
) -> ContainerSpec:
    """The container spec of ``slot``. The PAT is not part of it (see `ContainerRuntime.start`).

    With ``agents.docker_socket`` and an ``agent_dir_root``, the slot's agent
    directory is a host directory mounted at the same path: container jobs are
    started by the host's Docker, which mounts the agent's work and externals
    directories into the job container by their (host) paths.

    ``capabilities`` (the slot's GPU facts, `core.host.gpus.caps`) become
    environment variables, which the agent reports as capabilities.
    ``agent_package``: a verified newer agent package from the host's cache, mounted
    read-only where start.sh prefers it to the image's agent (issue 20).
    ``gate``: start it with the start gate: AZP_GO_FILE is set, the container is
    labelled `LABEL_GATED`, and the image must carry `START_GATE_LABEL` (else the start
    is refused before anything is created), so a gated container always waits.
    """
    agents = config.agents
    name = agent_name(config, slot, lane)
    labels = instance_labels(config, extra_labels)
    labels.update(
        {
            LABEL_SLOT: str(slot),
            LABEL_LANE: lane.value,
            LABEL_POOL: config.azure.pool,
            LABEL_ORG: config.azure.url,
            LABEL_CONFIG: config_hash(config),
        }
    )
    environment = {
        "AZP_URL": config.azure.url,
        "AZP_POOL": config.azure.pool,
        "AZP_AGENT_NAME": name,
        "AZP_TOKEN_FILE": TOKEN_PATH,
        "AZP_WORK": "_work",
        "GPUCI_SLOT": str(slot),
        # The marker (reported by the agent as system capabilities): which registrations
        # are this host's and this instance's when the pool is cleaned of stale ones.
        MARKER_INSTANCE: instance_id(config),
        MARKER_HOST: host_marker(),
    }
    for key, value in (capabilities or {}).items():
        environment.setdefault(key, value)  # never over the agent's own settings
    if gate:
        environment["AZP_GO_FILE"] = GO_FILE
        labels[LABEL_GATED] = "1"
    volumes = tuple(VolumeMount(v.host, v.container, v.env) for v in agents.volumes)
    if agent_package is not None:
        volumes += (VolumeMount(agent_package.host, AGENT_PACKAGE_DIR, "AZP_AGENT_PACKAGE_DIR"),)
        environment["AZP_AGENT_PACKAGE_VERSION"] = agent_package.version
        labels[LABEL_AGENT_PACKAGE] = agent_package.version
    for volume in volumes:
        if volume.env:
            environment[volume.env] = volume.container
    extra_mounts: tuple[tuple[str, str, str], ...] = ()
    if agents.docker_socket:
        # Opt-in for container jobs; this is root-equivalent access to the host.
        extra_mounts = ((DOCKER_SOCKET, DOCKER_SOCKET, "rw"),)
        if agent_dir_root:
            agent_dir = f"{agent_dir_root.rstrip('/')}/{name}"
            extra_mounts += ((agent_dir, agent_dir, "rw"),)
            environment["AZP_AGENT_DIR"] = agent_dir
    return ContainerSpec(
        name=name,
        image=agents.image,
        labels=labels,
        environment=environment,
        token_path=TOKEN_PATH,
        network=agents.network,
        gpus=slot_gpus(config, slot),
        volumes=volumes,
        oom_score_adj=agents.oom_score_adj,
        mem_limit=agents.mem_limit,
        command=command,
        extra_mounts=extra_mounts,
        required_labels={START_GATE_LABEL: "1"} if gate else {},
    )


def lane_of(labels: Mapping[str, str]) -> Lane:
    """The lane a container's labels name (containers from before hot standby are lane a)."""
    try:
        return Lane(labels.get(LABEL_LANE, Lane.A.value))
    except ValueError:
        return Lane.A


def slot_of(labels: Mapping[str, str]) -> int | None:
    """The slot number a container's labels name, or None."""
    try:
        return int(labels.get(LABEL_SLOT, ""))
    except ValueError:
        return None


def spec_of(labels: Mapping[str, str]) -> str:
    """The agent spec (`config_hash`) a container was made from; empty without the label."""
    return labels.get(LABEL_CONFIG, "")


def package_of(labels: Mapping[str, str]) -> str:
    """The cached agent package version mounted into a container; empty: the image's agent."""
    return labels.get(LABEL_AGENT_PACKAGE, "")


def name_holder(info: ContainerInfo, instance: str) -> NameHolder:
    """``info``, the container that holds a name our start wanted, as the engine sees it.

    ``instance``: this supervisor's (its containers' `LABEL_INSTANCE`).
    """
    theirs = info.labels.get(LABEL_INSTANCE, "")
    return NameHolder(
        container_id=info.id,
        status=info.status,
        ours=bool(instance) and theirs == instance,
        instance=theirs,
        state_dir=info.labels.get(LABEL_STATE_DIR, ""),
    )


def gated_of(labels: Mapping[str, str]) -> bool:
    """Whether a container's labels say it was started with the start gate (`LABEL_GATED`)."""
    return labels.get(LABEL_GATED) == "1"


def image_gated(labels: Mapping[str, str]) -> bool:
    """Whether an image's labels say its start.sh honours the start gate."""
    return labels.get(START_GATE_LABEL) == "1"


def placed(containers: Iterable[ContainerInfo]) -> tuple[ListedContainer, ...]:
    """Each container with the slot, lane and spec its labels name, for the engine's `Listed`.

    A container whose labels name no slot is left out (it is not one of a slot's).
    """
    found = []
    for info in containers:
        number = slot_of(info.labels)
        if number is not None:
            labels = info.labels
            lane = lane_of(labels)
            found.append(
                ListedContainer(
                    number, lane, info, spec_of(labels), package_of(labels), gated_of(labels)
                )
            )
    return tuple(found)
