"""The same agents on a Kubernetes cluster: a KEDA ScaledJob per agent group.

`render_manifests` is what ``gpuci-tui export kubernetes`` writes for one group:
a KEDA ``ScaledJob`` whose ``azure-pipelines`` trigger starts one single-job
agent pod per pending pipeline job (0 to ``agents.count`` at once), the
``TriggerAuthentication`` that gives KEDA the PAT, and a NOTES file. It is a
pure function of the configuration, so several groups (issue 10 §1) only need a
loop over it; today a configuration has one ``[agents]`` table, the group
`DEFAULT_GROUP`. The options beyond the configuration, and the checks that refuse an
export before anything is rendered, are in `k8s_options`.

How the host daemon's settings map (also in docs/kubernetes.md, "Moving to Kubernetes"):

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
from dataclasses import replace

from gpuci_tui.core.config.loader import DEFAULT_GROUP as CONFIG_DEFAULT_GROUP
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig
from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from gpuci_tui.core.export import k8s_auth, k8s_options
from gpuci_tui.core.export.k8s_demands import node_selector, pod_capabilities, trigger_metadata
from gpuci_tui.core.export.k8s_notes import MIN_KEDA_VERSION, notes
from gpuci_tui.core.export.k8s_options import (
    DEFAULT_NAMESPACE,
    DEFAULT_SECRET_NAME,
    ExportError,
    ExportOptions,
    gpus_per_pod,
    memory_quantity,
)
from gpuci_tui.core.export.k8s_yaml import Node, dump_documents

__all__ = [
    "DEFAULT_GROUP", "DEFAULT_NAMESPACE", "DEFAULT_SECRET_NAME", "SECRET_KEY", "ExportError",
    "ExportOptions", "gpus_per_pod", "render_manifests", "resource_name",
]  # fmt: skip

DEFAULT_GROUP = CONFIG_DEFAULT_GROUP
"""The group name of the single ``[agents]`` table of today's configuration."""
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
_SECRET_DIR = "/run/azp-secret"
_TOKEN_DIR = TOKEN_PATH.rsplit("/", 1)[0]


def resource_name(agents: AgentsConfig, group_name: str) -> str:
    """The ScaledJob's name: ``{name_prefix}-{group}`` made a DNS label of at most 40 characters.

    A long prefix is shortened, never the group, so groups keep distinct names.
    Pods, and so agents, are named after it plus two random suffixes.
    """
    prefix = re.sub(r"[^a-z0-9-]+", "-", agents.name_prefix.lower()).strip("-") or "gpuci"
    prefix = prefix[: max(_NAME_MAX - len(group_name) - 1, 1)].rstrip("-")
    return f"{prefix}-{group_name}"[:_NAME_MAX]


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
    problems = k8s_options.problems(azure, agents, group_name, options)
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
