"""What ``export kubernetes`` needs beyond the configuration, and what it refuses.

`ExportOptions` holds what the configuration file does not say about a cluster
(namespace, Secret, GPUs per pod for ``gpus = "all"``, dataset claims). `problems`
checks a group's configuration and the options together before anything is
rendered, so the operator sees every problem at once (an `ExportError` lists them,
each with what to do); `gpus_per_pod` and `memory_quantity` translate the daemon's
GPU and memory settings into what a pod requests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.wording import plural

DEFAULT_NAMESPACE = "gpuci"
DEFAULT_SECRET_NAME = "gpuci-azp-pat"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MEM = re.compile(r"(\d+(?:\.\d+)?)([kmg]?)b?", re.I)
_MEM_SUFFIX = {"": "", "k": "Ki", "m": "Mi", "g": "Gi"}


class ExportError(GpuciError):
    """The configuration or the options cannot be exported; ``str()`` says what to do.

    Attributes:
        problems: Each problem as one sentence.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class ExportOptions:
    """What the configuration file does not say about a cluster."""

    namespace: str = DEFAULT_NAMESPACE
    """Namespace of every generated object (and of the operator's Secret)."""
    secret_name: str = DEFAULT_SECRET_NAME
    """The Secret holding the PAT under the key `SECRET_KEY`."""
    gpus_per_agent: int | None = None
    """GPUs per agent pod; required when ``agents.gpus = "all"``, refused otherwise."""
    dataset_pvcs: Mapping[str, str] = field(default_factory=dict)
    """Host path of an ``[[agents.volumes]]`` entry → PersistentVolumeClaim to mount instead."""
    capabilities: Mapping[str, str] = field(default_factory=dict)
    """The board's GPU capabilities (``gpu.product``…) the pods advertise (see k8s_demands)."""
    with_secret: bool = True
    """Set by `render_manifests` from ``[azure] auth``: pods read the Secret (not with
    workload identity)."""
    service_account: str = ""
    """Set likewise: the federated service account of workload-identity pods."""


def memory_quantity(mem_limit: str) -> str:
    """A Docker memory limit (``"64g"``) as a Kubernetes quantity (``"64Gi"``)."""
    match = _MEM.fullmatch(mem_limit.strip())
    if not match:
        raise ExportError([f'agents.mem_limit "{mem_limit}" is not a size like "64g"'])
    return match[1] + _MEM_SUFFIX[match[2].lower()]


def problems(
    azure: AzureConfig, agents: AgentsConfig, group_name: str, options: ExportOptions
) -> list[str]:
    """Every reason the group ``group_name`` cannot be exported with ``options`` (empty: none)."""
    problems = []
    if not azure.url.strip():
        problems.append(
            'azure.url is empty: set the organisation URL, e.g. "https://dev.azure.com/ORG"'
        )
    if not azure.pool.strip():
        problems.append('azure.pool is empty: set the agent pool that KEDA watches, e.g. "gpu"')
    if not _DNS_LABEL.fullmatch(group_name) or len(group_name) > 30:
        problems.append(f'group name "{group_name}" must be a lowercase DNS label (a-z, 0-9, -)')
    if not _DNS_LABEL.fullmatch(options.namespace) or len(options.namespace) > 63:
        problems.append(
            f'--namespace "{options.namespace}" is not a valid namespace: lowercase letters, '
            "digits and '-', at most 63, starting and ending with a letter or digit"
        )
    if not _DNS_SUBDOMAIN.fullmatch(options.secret_name) or len(options.secret_name) > 253:
        problems.append(
            f'--secret-name "{options.secret_name}" is not a valid Secret name: lowercase '
            "letters, digits, '-' and '.'"
        )
    if agents.docker_socket:
        problems.append(
            "agents.docker_socket = true cannot be exported: container jobs through the "
            "host's Docker socket need a different design on Kubernetes (e.g. a job "
            "container per pod); set it to false for the export or keep this group on the daemon"
        )
    if agents.gpus == "mig":  # a cluster's device plugin offers slices as resources instead
        problems.append('agents.gpus = "mig" cannot be exported (MIG slices are nvidia.com/mig-*)')
    if agents.gpus == "all" and options.gpus_per_agent is None:
        problems.append(
            'agents.gpus = "all" has no meaning on a cluster: say how many GPUs each agent '
            "pod requests with --gpus-per-agent N"
        )
    elif agents.gpus != "all" and options.gpus_per_agent is not None:
        given = (
            f"{plural(gpus_per_pod(agents, options), 'GPU')} per agent"
            if agents.gpus != "none"
            else ("no GPUs")
        )
        problems.append(
            f'--gpus-per-agent applies only to agents.gpus = "all"; this group has '
            f'gpus = "{agents.gpus}" ({given})'
        )
    elif options.gpus_per_agent is not None and options.gpus_per_agent < 1:
        problems.append(f"--gpus-per-agent must be at least 1, got {options.gpus_per_agent}")
    hosts = {volume.host for volume in agents.volumes}
    for host, claim in options.dataset_pvcs.items():
        if host not in hosts:
            known = ", ".join(sorted(hosts)) or "none are configured"
            problems.append(
                f"--dataset-pvc {host}={claim}: {host} is not the host path of an "
                f"[[agents.volumes]] entry ({known})"
            )
        if not _DNS_SUBDOMAIN.fullmatch(claim) or len(claim) > 253:
            problems.append(f'--dataset-pvc {host}={claim}: "{claim}" is not a valid claim name')
    if agents.mem_limit is not None and not _MEM.fullmatch(agents.mem_limit.strip()):
        problems.append(f'agents.mem_limit "{agents.mem_limit}" is not a size like "64g"')
    return problems


def gpus_per_pod(agents: AgentsConfig, options: ExportOptions) -> int:
    """GPUs each agent pod requests: ``gpus_per_slot`` for ``per-agent``, the list's length
    for a list, ``--gpus-per-agent`` for ``all`` (a cluster schedules GPUs by count, not by id).
    """
    if agents.gpus == "per-agent":
        return agents.gpus_per_slot
    if agents.gpus == "list":
        return len(agents.gpu_ids)
    if agents.gpus == "all":
        return options.gpus_per_agent or 0
    return 0
