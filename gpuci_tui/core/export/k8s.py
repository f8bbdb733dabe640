"""The same agents on a Kubernetes cluster: a KEDA ScaledJob per agent group.

`render_manifests` is what ``gpuci-tui export kubernetes`` writes for one group:
a KEDA ``ScaledJob`` whose ``azure-pipelines`` trigger starts one single-job
agent pod per pending pipeline job (0 to ``agents.count`` at once), the
``TriggerAuthentication`` that gives KEDA the PAT, and a NOTES file. It is a
pure function of the configuration, so several groups (issue 10 §1) only need a
loop over it; today a configuration has one ``[agents]`` table, the group
`DEFAULT_GROUP`.

How the host daemon's settings map (also in README "Moving to Kubernetes"):

* **PAT.** Never in a manifest. The operator creates a Secret (key `SECRET_KEY`)
  from a file; KEDA reads it through the TriggerAuthentication, and an init
  container copies it into a memory-backed ``emptyDir`` at ``AZP_TOKEN_FILE``.
  The agent container never mounts the Secret: start.sh deletes the token file
  before registering, as with the daemon's ``put_archive`` copy, which a
  read-only Secret volume would not allow.
* **Agent names.** ``AZP_AGENT_NAME`` is the pod name (downward API): unique per
  pod, prefixed with the ScaledJob's name ``{name_prefix}-{group}``. Fixed slot
  names would make concurrent pods ``--replace`` each other's registration, and
  the host name is the node's under ``hostNetwork``.
* **GPUs.** ``per-agent`` → ``nvidia.com/gpu: 1``; ``all`` → ``--gpus-per-agent N``
  (required: a cluster has no "all"); ``none`` → no GPU resource and
  ``NVIDIA_VISIBLE_DEVICES=void``, so a node whose default runtime is NVIDIA's
  does not hand the CUDA image every GPU anyway.
* **Datasets.** Each ``[[agents.volumes]]`` is a read-only ``hostPath`` (type
  Directory) or, with ``dataset_pvcs``, a read-only PersistentVolumeClaim;
  its env var names the mount path as on the host.
* **Limits.** ``mem_limit`` → memory limit (Docker's k/m/g are Ki/Mi/Gi).
  ``oom_score_adj`` has no pod field (the kubelet derives it from the QoS class).
  ``network = "host"`` → ``hostNetwork``. ``docker_socket = true`` is refused:
  container jobs need another design on Kubernetes.
* **Security context of the image.** Its entry point starts as root to read
  and delete the token file and then runs the agent as uid 1000 (``setpriv``),
  so the pod runs as root with every capability dropped except CHOWN,
  DAC_OVERRIDE, SETGID and SETUID, no privilege escalation and the runtime's
  seccomp profile: Pod Security "baseline" (hostPath or hostNetwork need
  "privileged"); no service-account token is mounted.
* **Scaling.** minReplicaCount 0, maxReplicaCount ``agents.count``, rollout
  ``gradual`` (re-applying never deletes a running agent's job),
  ``fetchUnfinishedJobsOnly`` (KEDA polls only queued and running requests; the key
  needs KEDA 2.18 or later, which the manifests and NOTES say).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpuci_tui.core.config.loader import DEFAULT_GROUP as CONFIG_DEFAULT_GROUP
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig
from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.export import k8s_auth
from gpuci_tui.core.export.k8s_demands import node_selector, pod_capabilities, trigger_metadata
from gpuci_tui.core.export.k8s_notes import MIN_KEDA_VERSION, notes
from gpuci_tui.core.export.k8s_yaml import Node, dump_documents

__all__ = [
    "DEFAULT_GROUP", "DEFAULT_NAMESPACE", "DEFAULT_SECRET_NAME", "SECRET_KEY", "ExportError",
    "ExportOptions", "gpus_per_pod", "render_manifests", "resource_name",
]  # fmt: skip

DEFAULT_GROUP = CONFIG_DEFAULT_GROUP
"""The group name of the single ``[agents]`` table of today's configuration."""
DEFAULT_NAMESPACE = "gpuci"
DEFAULT_SECRET_NAME = "gpuci-azp-pat"
SECRET_KEY = k8s_auth.SECRET_KEY
"""Key of the PAT (or client secret) in the operator's Secret (``--from-file=token=FILE``)."""
GPU_RESOURCE = "nvidia.com/gpu"
KEDA_API = "keda.sh/v1alpha1"
TRIGGER_TYPE = "azure-pipelines"
TRIGGER_METADATA_KEYS = (
    "poolName",
    "organizationURLFromEnv",
    "targetPipelinesQueueLength",
    "fetchUnfinishedJobsOnly",
)
"""Every key `render_manifests` puts in the trigger's metadata (tests check KEDA documents them)."""
AGENT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "SETGID", "SETUID")
"""What start.sh needs as root: chown the work dir, write into /azp/agent, drop to uid 1000."""

_NAME_MAX = 40  # + KEDA's job suffix and the Job's pod suffix stay within 63 (a host name)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MEM = re.compile(r"(\d+(?:\.\d+)?)([kmg]?)b?", re.I)
_MEM_SUFFIX = {"": "", "k": "Ki", "m": "Mi", "g": "Gi"}
_SECRET_DIR = "/run/azp-secret"
_TOKEN_DIR = TOKEN_PATH.rsplit("/", 1)[0]


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


def resource_name(agents: AgentsConfig, group_name: str) -> str:
    """The ScaledJob's name: ``{name_prefix}-{group}`` made a DNS label of at most 40 characters.

    A long prefix is shortened, never the group, so groups keep distinct names.
    Pods, and so agents, are named after it plus two random suffixes.
    """
    prefix = re.sub(r"[^a-z0-9-]+", "-", agents.name_prefix.lower()).strip("-") or "gpuci"
    prefix = prefix[: max(_NAME_MAX - len(group_name) - 1, 1)].rstrip("-")
    return f"{prefix}-{group_name}"[:_NAME_MAX]


def memory_quantity(mem_limit: str) -> str:
    """A Docker memory limit (``"64g"``) as a Kubernetes quantity (``"64Gi"``)."""
    match = _MEM.fullmatch(mem_limit.strip())
    if not match:
        raise ExportError([f'agents.mem_limit "{mem_limit}" is not a size like "64g"'])
    return match[1] + _MEM_SUFFIX[match[2].lower()]


def _problems(
    azure: AzureConfig, agents: AgentsConfig, group_name: str, options: ExportOptions
) -> list[str]:
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
            f"{gpus_per_pod(agents, options)} GPU(s) per agent"
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


def _volumes(agents: AgentsConfig, options: ExportOptions) -> tuple[list[Node], list[Node]]:
    """Pod volumes and the agent container's mounts (token first, then datasets)."""
    volumes: list[Node] = (
        []
        if not options.with_secret
        else [
            {
                "name": "pat",
                "secret": {
                    "secretName": options.secret_name,
                    "items": [{"key": SECRET_KEY, "path": "token"}],
                    "defaultMode": 0o400,
                },
            },
        ]
    )
    volumes.append({"name": "token", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
    mounts: list[Node] = [{"name": "token", "mountPath": _TOKEN_DIR}]
    for index, volume in enumerate(agents.volumes):
        name = f"dataset-{index}"
        claim = options.dataset_pvcs.get(volume.host)
        source: Node = (
            {"persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
            if claim
            else {"hostPath": {"path": volume.host, "type": "Directory"}}
        )
        volumes.append({"name": name, **source})  # type: ignore[dict-item]
        mounts.append({"name": name, "mountPath": volume.container, "readOnly": True})
    return volumes, mounts


def _env(
    azure: AzureConfig, agents: AgentsConfig, gpus: int, caps: Mapping[str, str]
) -> list[Node]:
    env: list[Node] = [
        {"name": "AZP_URL", "value": azure.url},
        {"name": "AZP_POOL", "value": azure.pool},
        {  # KEDA skips fieldRef variables when it resolves organizationURLFromEnv
            "name": "AZP_AGENT_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {"name": "AZP_TOKEN_FILE", "value": TOKEN_PATH},
        {"name": "AZP_WORK", "value": "_work"},
    ]
    env.extend(k8s_auth.agent_auth_env(azure))
    env.extend(
        {"name": volume.env, "value": volume.container} for volume in agents.volumes if volume.env
    )
    if gpus == 0:
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    env.extend({"name": name, "value": value} for name, value in caps.items())
    return env


def _pod_spec(
    azure: AzureConfig, agents: AgentsConfig, options: ExportOptions, gpus: int
) -> dict[str, Node]:
    volumes, mounts = _volumes(agents, options)
    caps = pod_capabilities(options.capabilities, gpus)
    limits: dict[str, Node] = {}
    if gpus:
        limits[GPU_RESOURCE] = str(gpus)
    if agents.mem_limit is not None:
        limits["memory"] = memory_quantity(agents.mem_limit)
    agent: dict[str, Node] = {
        "name": "agent",
        "image": agents.image,
        # gpuci-tui's start.sh always runs one job; images built on Microsoft's
        # sample start.sh pass their arguments to run.sh, so they do too.
        "args": ["--once"],
        "env": _env(azure, agents, gpus, caps),
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": list(AGENT_CAPABILITIES)},
        },
        "volumeMounts": mounts,
    }
    if limits:
        agent["resources"] = {"limits": limits}
    copy_token: dict[str, Node] = {
        "name": "copy-token",
        "image": agents.image,
        "command": ["install", "-m", "0400", f"{_SECRET_DIR}/token", TOKEN_PATH],
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "pat", "mountPath": _SECRET_DIR, "readOnly": True},
            {"name": "token", "mountPath": _TOKEN_DIR},
        ],
    }
    spec: dict[str, Node] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [copy_token],
        "containers": [agent],
        "volumes": volumes,
    }
    if not options.with_secret:  # workload identity: no Secret, a federated service account
        del spec["initContainers"]
        spec["serviceAccountName"] = options.service_account
    if agents.network == "host":
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if gpus:
        spec["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    if caps:
        spec["nodeSelector"] = dict(node_selector(caps))
    return spec


def _labels(name: str, group_name: str) -> dict[str, Node]:
    return {
        "app.kubernetes.io/name": "gpuci-agent",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": group_name,
        "app.kubernetes.io/part-of": "gpuci-tui",
        "app.kubernetes.io/managed-by": "gpuci-tui",
    }


def _documents(
    azure: AzureConfig, agents: AgentsConfig, group_name: str, options: ExportOptions
) -> tuple[Node, Node]:
    name = resource_name(agents, group_name)
    auth_name = f"{name}-azp"
    labels = _labels(name, group_name)
    gpus = gpus_per_pod(agents, options)
    auth: Node = {
        "apiVersion": KEDA_API,
        "kind": "TriggerAuthentication",
        "metadata": {"name": auth_name, "namespace": options.namespace, "labels": labels},
        "spec": k8s_auth.trigger_auth_spec(azure, options.secret_name),
    }
    metadata = dict(zip(TRIGGER_METADATA_KEYS, (azure.pool, "AZP_URL", "1", "true"), strict=True))
    metadata.update(trigger_metadata(pod_capabilities(options.capabilities, gpus)))
    metadata.update(k8s_auth.trigger_metadata(azure))
    account = k8s_auth.service_account(azure, name)
    options = replace(options, with_secret=account is None, service_account=account or "")
    pod_labels: dict[str, Node] = dict(labels)
    if account is not None:
        pod_labels[k8s_auth.WORKLOAD_IDENTITY_LABEL] = "true"
    scaled_job: Node = {
        "apiVersion": KEDA_API,
        "kind": "ScaledJob",
        "metadata": {"name": name, "namespace": options.namespace, "labels": labels},
        "spec": {
            "jobTargetRef": {
                "parallelism": 1,
                "completions": 1,
                "backoffLimit": 0,  # a failed agent is not retried: KEDA starts a new one on demand
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": _pod_spec(azure, agents, options, gpus),
                },
            },
            "pollingInterval": 30,
            "successfulJobsHistoryLimit": 5,
            "failedJobsHistoryLimit": 10,
            "minReplicaCount": 0,
            "maxReplicaCount": agents.count,
            "rollout": {"strategy": "gradual"},
            "triggers": [
                {
                    "type": TRIGGER_TYPE,
                    "metadata": metadata,
                    "authenticationRef": {"name": auth_name},
                }
            ],
        },
    }
    return auth, scaled_job


def render_manifests(
    azure: AzureConfig, agents: AgentsConfig, group_name: str, options: ExportOptions
) -> dict[str, str]:
    """The files of ``gpuci-tui export kubernetes`` for one agent group.

    Args:
        azure: Organisation and pool (``[azure]``).
        agents: The group's agents (today the ``[agents]`` table).
        group_name: The group's name (`DEFAULT_GROUP` today); prefixes file and object names.
        options: Namespace, Secret name, GPU count, datasets on claims.

    Returns:
        File name → text: ``{group}-triggerauthentication.yaml``,
        ``{group}-scaledjob.yaml`` and ``{group}-NOTES.md``. No PAT is in any of them.

    Raises:
        ExportError: every problem found, each with what to do about it.
    """
    problems = _problems(azure, agents, group_name, options)
    if problems:
        raise ExportError(problems)
    auth, scaled_job = _documents(azure, agents, group_name, options)
    header = (
        f"Generated by `gpuci-tui export kubernetes` (group {group_name}); "
        "re-run it rather than editing.\n"
        f"See {group_name}-NOTES.md for the Secret to create first and what to check.\n"
        f"Needs KEDA {MIN_KEDA_VERSION} or later (the trigger's fetchUnfinishedJobsOnly)."
    )
    gpus = gpus_per_pod(agents, options)
    return {
        f"{group_name}-triggerauthentication.yaml": dump_documents([auth], header),
        f"{group_name}-scaledjob.yaml": dump_documents([scaled_job], header),
        f"{group_name}-NOTES.md": notes(
            azure=azure,
            agents=agents,
            group_name=group_name,
            name=resource_name(agents, group_name),
            namespace=options.namespace,
            secret_name=options.secret_name,
            secret_key=SECRET_KEY,
            gpus=gpus,
            claims=options.dataset_pvcs,
        )
        + k8s_auth.notes_section(
            azure, resource_name(agents, group_name), options.namespace, options.secret_name
        ),
    }
