"""How the host daemon's settings become pod settings (decisions in k8s_export's docstring)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig
from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from gpuci_tui.core.export.k8s import (
    AGENT_CAPABILITIES,
    DEFAULT_GROUP,
    ExportError,
    ExportOptions,
    render_manifests,
    resource_name,
)
from gpuci_tui.core.export.k8s_options import memory_quantity

from .conftest import AGENTS, AZURE, Render


def _pod(out: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = out["ScaledJob"]["spec"]["jobTargetRef"]["template"]["spec"]
    return pod


def _agent(out: dict[str, Any]) -> dict[str, Any]:
    (agent,) = _pod(out)["containers"]
    assert agent["name"] == "agent"
    return agent  # type: ignore[no-any-return]


def _env(out: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _agent(out)["env"]}


def _with(**changes: Any) -> AgentsConfig:
    return dataclasses.replace(AGENTS, **changes)


def test_scaling_follows_the_pool_and_the_slot_count(render: Render) -> None:
    spec = render(_with(count=7))["ScaledJob"]["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 7)
    assert spec["rollout"] == {"strategy": "gradual"}  # re-applying never kills a running job
    (trigger,) = spec["triggers"]
    assert trigger["metadata"]["poolName"] == "gpu"
    assert trigger["metadata"]["organizationURLFromEnv"] == "AZP_URL"
    assert trigger["authenticationRef"]["name"] == "gpuhost-default-azp"
    job = spec["jobTargetRef"]
    assert (job["parallelism"], job["completions"], job["backoffLimit"]) == (1, 1, 0)
    assert _pod(render())["restartPolicy"] == "Never"


def test_agent_env_matches_the_daemon_contract(render: Render) -> None:
    out = render()
    env = _env(out)
    assert env["AZP_URL"] == "https://dev.azure.com/acme" and env["AZP_POOL"] == "gpu"
    assert env["AZP_TOKEN_FILE"] == TOKEN_PATH
    # Each pod registers under its own (unique) pod name.
    assert env["AZP_AGENT_NAME"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
    assert env["IMAGENET_DIR"] == "/datasets/imagenet"
    assert "--once" in _agent(out)["args"]
    assert _agent(out)["image"] == AGENTS.image


def test_the_pat_comes_from_the_secret_through_an_init_container(render: Render) -> None:
    out = render(secret_name="my-pat")
    pod = _pod(out)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pat"]["secret"]["secretName"] == "my-pat"
    assert volumes["pat"]["secret"]["defaultMode"] == 0o400
    assert volumes["token"]["emptyDir"]["medium"] == "Memory"
    (init,) = pod["initContainers"]
    assert init["command"][-1] == TOKEN_PATH
    assert {m["name"] for m in init["volumeMounts"]} == {"pat", "token"}
    # The agent (and so every job) never sees the Secret volume, only the copy start.sh deletes.
    assert "pat" not in {m["name"] for m in _agent(out)["volumeMounts"]}
    refs = out["TriggerAuthentication"]["spec"]["secretTargetRef"]
    assert refs == [{"parameter": "personalAccessToken", "name": "my-pat", "key": "token"}]
    assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("gpus", "per_agent", "expected"),
    [("per-agent", None, "1"), ("all", 3, "3"), ("none", None, None)],
)
def test_gpu_policy(render: Render, gpus: str, per_agent: int | None, expected: str | None) -> None:
    out = render(_with(gpus=gpus), gpus_per_agent=per_agent)
    limits = _agent(out).get("resources", {}).get("limits", {})
    assert limits.get("nvidia.com/gpu") == expected
    tolerations = _pod(out).get("tolerations", [])
    assert bool(tolerations) == (expected is not None)
    # Without a GPU request, a node whose default runtime is NVIDIA's must not expose them all.
    assert (_env(out).get("NVIDIA_VISIBLE_DEVICES") == "void") == (expected is None)


def test_gpus_all_needs_a_count_and_others_refuse_one() -> None:
    with pytest.raises(ExportError, match="--gpus-per-agent N"):
        render_manifests(AZURE, _with(gpus="all"), DEFAULT_GROUP, ExportOptions())
    with pytest.raises(ExportError, match='only to agents.gpus = "all"'):
        render_manifests(AZURE, AGENTS, DEFAULT_GROUP, ExportOptions(gpus_per_agent=2))
    with pytest.raises(ExportError, match="at least 1"):
        render_manifests(AZURE, _with(gpus="all"), DEFAULT_GROUP, ExportOptions(gpus_per_agent=0))


def test_datasets_are_read_only_hostpaths_or_claims(render: Render) -> None:
    out = render(dataset_pvcs={"/data/coco": "coco-ro"})
    volumes = {v["name"]: v for v in _pod(out)["volumes"]}
    assert volumes["dataset-0"]["hostPath"] == {"path": "/data/imagenet", "type": "Directory"}
    assert volumes["dataset-1"]["persistentVolumeClaim"] == {
        "claimName": "coco-ro",
        "readOnly": True,
    }
    mounts = {m["mountPath"]: m for m in _agent(out)["volumeMounts"]}
    assert mounts["/datasets/imagenet"]["readOnly"] is True
    assert mounts["/datasets/coco"]["readOnly"] is True


def test_a_claim_for_an_unknown_dataset_is_refused() -> None:
    options = ExportOptions(dataset_pvcs={"/data/other": "x"})
    with pytest.raises(ExportError, match="/data/coco, /data/imagenet"):
        render_manifests(AZURE, AGENTS, DEFAULT_GROUP, options)


@pytest.mark.parametrize(
    ("docker", "k8s"), [("64g", "64Gi"), ("512m", "512Mi"), ("1.5g", "1.5Gi"), ("1024k", "1024Ki"),
                        ("8GB", "8Gi"), ("6291456", "6291456")]
)  # fmt: skip
def test_memory_limit_units(docker: str, k8s: str) -> None:
    assert memory_quantity(docker) == k8s


def test_memory_limit_is_set_only_when_configured(render: Render) -> None:
    assert _agent(render())["resources"]["limits"]["memory"] == "64Gi"
    out = render(_with(mem_limit=None, gpus="none"))
    assert "resources" not in _agent(out)


def test_security_context_is_the_images(render: Render) -> None:
    out = render()
    context = _agent(out)["securityContext"]
    assert context["runAsUser"] == 0  # start.sh reads the token as root, then drops to uid 1000
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"], "add": list(AGENT_CAPABILITIES)}
    (init,) = _pod(out)["initContainers"]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert _pod(out)["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_host_network_maps_to_host_network(render: Render) -> None:
    assert "hostNetwork" not in _pod(render())
    pod = _pod(render(_with(network="host")))
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_docker_socket_is_refused_with_the_reason() -> None:
    with pytest.raises(ExportError, match="different design on Kubernetes"):
        render_manifests(AZURE, _with(docker_socket=True), DEFAULT_GROUP, ExportOptions())


def test_every_problem_is_reported_at_once() -> None:
    azure = AzureConfig(url="https://dev.azure.com/acme", pool=" ")
    options = ExportOptions(namespace="Bad_NS", secret_name="-x-")
    with pytest.raises(ExportError) as caught:
        render_manifests(azure, _with(docker_socket=True, gpus="all"), DEFAULT_GROUP, options)
    problems = caught.value.problems
    assert len(problems) == 5, problems
    assert any("azure.pool is empty" in p for p in problems)


@pytest.mark.parametrize(
    ("prefix", "group", "expected"),
    [("gpuhost", "default", "gpuhost-default"), ("GPU_host.01", "default", "gpu-host-01-default"),
     ("x" * 50, "default", "x" * 32 + "-default"), ("_.-", "train", "gpuci-train")],
)  # fmt: skip
def test_resource_names_are_dns_labels_short_enough_for_pod_names(
    prefix: str, group: str, expected: str
) -> None:
    assert resource_name(_with(name_prefix=prefix), group) == expected


def test_output_is_deterministic_and_names_files_by_group(render: Render) -> None:
    assert render()["files"] == render()["files"]
    files = render_manifests(AZURE, AGENTS, "train", ExportOptions())
    assert sorted(files) == [
        "train-NOTES.md",
        "train-scaledjob.yaml",
        "train-triggerauthentication.yaml",
    ]


def test_notes_tell_the_exact_steps_and_the_placeholder_rule(render: Render) -> None:
    text = render(namespace="ci", secret_name="azp")["files"]["default-NOTES.md"]
    assert "kubectl -n ci create secret generic azp --from-file=token=PATFILE" in text
    assert "kubectl apply -f default-triggerauthentication.yaml -f default-scaledjob.yaml" in text
    assert "No agent found in pool" in text and "minReplicaCount" in text
    assert "never the last one" in text


def test_slot_shapes_export_as_a_gpu_count_and_mig_is_refused() -> None:
    out = render_manifests(
        AZURE, _with(gpus="per-agent", gpus_per_slot=2), DEFAULT_GROUP, ExportOptions()
    )
    assert 'nvidia.com/gpu: "2"' in out["default-scaledjob.yaml"]
    with pytest.raises(ExportError, match='agents.gpus = "mig" cannot be exported'):
        render_manifests(AZURE, _with(gpus="mig"), DEFAULT_GROUP, ExportOptions())
