"""Every exported manifest is valid for Kubernetes v1.34 and KEDA's CRDs, and uses only
trigger and authentication parameters that KEDA's azure-pipelines documentation names.

The schemas and the documentation excerpt live in tests/data/k8s (PROVENANCE.md). The
negative tests show the validators do reject what the API server would.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest
import yaml

from gpuci_tui.core.config.loader import AgentsConfig
from gpuci_tui.core.export.k8s import TRIGGER_METADATA_KEYS, TRIGGER_TYPE

from .conftest import AGENTS, Render
from .schemas import (
    DATA,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    QUANTITY,
    SCALEDJOB_CRD,
    TRIGGERAUTH_CRD,
    crd_validator,
    documented_auth_parameters,
    documented_trigger_parameters,
    errors,
    k8s_validator,
)

VARIANTS: dict[str, tuple[AgentsConfig, dict[str, Any]]] = {
    "per-agent+hostPath+memory": (AGENTS, {}),
    "all+pvc+namespace": (
        AgentsConfig(**{**AGENTS.__dict__, "gpus": "all", "mem_limit": None}),
        {
            "gpus_per_agent": 2,
            "dataset_pvcs": {"/data/imagenet": "imagenet-ro"},
            "namespace": "ci-gpu",
            "secret_name": "azp.pat",
        },
    ),
    "per-agent+gpu-capabilities": (
        AGENTS,
        {"capabilities": {"gpu.product": "NVIDIA-H100-80GB-HBM3", "gpu.memory": "81559"}},
    ),
    "none+host-network+no-volumes": (
        AgentsConfig(**{**AGENTS.__dict__, "gpus": "none", "network": "host", "volumes": ()}),
        {},
    ),
}


@pytest.fixture(params=sorted(VARIANTS))
def exported(request: pytest.FixtureRequest, render: Render) -> dict[str, Any]:
    agents, options = VARIANTS[request.param]
    out: dict[str, Any] = render(agents, **options)
    return out


def _job(scaled_job: dict[str, Any]) -> dict[str, Any]:
    """The batch/v1 Job KEDA creates from a ScaledJob (its jobTargetRef is a JobSpec)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": scaled_job["metadata"]["name"] + "-"},
        "spec": scaled_job["spec"]["jobTargetRef"],
    }


def _quantities(node: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            if key in ("limits", "requests") and isinstance(value, dict):
                found += [(f"{path}/{key}/{k}", v) for k, v in value.items()]
            elif key == "sizeLimit":
                found.append((f"{path}/{key}", value))
            else:
                found += _quantities(value, f"{path}/{key}")
        return found
    if isinstance(node, list):
        return [q for i, item in enumerate(node) for q in _quantities(item, f"{path}/{i}")]
    return []


def test_the_export_is_exactly_these_files(exported: dict[str, Any]) -> None:
    assert sorted(exported["files"]) == [
        "default-NOTES.md",
        "default-scaledjob.yaml",
        "default-triggerauthentication.yaml",
    ]
    assert {"ScaledJob", "TriggerAuthentication"} <= set(exported)


def test_scaledjob_is_valid_for_keda_crd(exported: dict[str, Any]) -> None:
    assert errors(crd_validator(SCALEDJOB_CRD), exported["ScaledJob"]) == []


def test_triggerauthentication_is_valid_for_keda_crd(exported: dict[str, Any]) -> None:
    assert errors(crd_validator(TRIGGERAUTH_CRD), exported["TriggerAuthentication"]) == []


def test_job_target_is_a_valid_kubernetes_job(exported: dict[str, Any]) -> None:
    job = _job(exported["ScaledJob"])
    assert errors(k8s_validator("io.k8s.api.batch.v1.Job"), job) == []
    assert errors(k8s_validator("io.k8s.api.batch.v1.JobSpec"), job["spec"]) == []


def test_object_metadata_is_valid_kubernetes_metadata(exported: dict[str, Any]) -> None:
    for kind in ("ScaledJob", "TriggerAuthentication"):
        meta = exported[kind]["metadata"]
        assert errors(k8s_validator("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), meta) == []
        assert DNS_SUBDOMAIN.fullmatch(meta["name"]) and len(meta["name"]) <= 253
        assert DNS_LABEL.fullmatch(meta["namespace"]) and len(meta["namespace"]) <= 63
        assert exported[kind]["apiVersion"] == "keda.sh/v1alpha1"


def test_names_and_quantities_follow_kubernetes_syntax(exported: dict[str, Any]) -> None:
    spec = exported["ScaledJob"]["spec"]["jobTargetRef"]["template"]["spec"]
    for container in spec["containers"] + spec["initContainers"]:
        assert DNS_LABEL.fullmatch(container["name"])
    for volume in spec["volumes"]:
        assert DNS_LABEL.fullmatch(volume["name"])
    quantities = _quantities(exported["ScaledJob"])
    assert quantities  # at least the token emptyDir's sizeLimit
    for where, value in quantities:
        assert isinstance(value, str) and QUANTITY.fullmatch(value), where


def test_trigger_uses_only_documented_metadata(exported: dict[str, Any]) -> None:
    documented = documented_trigger_parameters()
    (trigger,) = exported["ScaledJob"]["spec"]["triggers"]
    assert trigger["type"] == TRIGGER_TYPE
    assert set(trigger["metadata"]) <= documented, set(trigger["metadata"]) - documented
    assert set(TRIGGER_METADATA_KEYS) <= documented
    # jobsToFetch is mutually exclusive with fetchUnfinishedJobsOnly and parent (the docs).
    assert "jobsToFetch" not in trigger["metadata"]
    assert all(isinstance(v, str) for v in trigger["metadata"].values())


def test_authentication_uses_only_documented_parameters(exported: dict[str, Any]) -> None:
    refs = exported["TriggerAuthentication"]["spec"]["secretTargetRef"]
    assert {ref["parameter"] for ref in refs} <= documented_auth_parameters()


def test_the_documentation_excerpt_parses_to_the_known_lists() -> None:
    assert documented_trigger_parameters() == {
        "poolName", "poolID", "organizationURLFromEnv", "personalAccessTokenFromEnv",
        "tenantId", "clientId", "targetPipelinesQueueLength",
        "activationTargetPipelinesQueueLength", "parent", "demands", "requireAllDemands",
        "requireAllDemandsAndIgnoreOthers", "jobsToFetch", "fetchUnfinishedJobsOnly",
        "caseInsensitiveDemandsProcessing",
    }  # fmt: skip
    assert documented_auth_parameters() == {
        "organizationURL", "personalAccessToken", "clientSecret", "clientCertificate",
        "clientCertificatePassword",
    }  # fmt: skip


# --------------------------------------------------------------------------- the checks can fail


@pytest.fixture
def good(render: Render) -> dict[str, Any]:
    out: dict[str, Any] = render()
    return out


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("spec", "maxReplicaCount"), "4"),  # a string where an int32 goes
        (("spec", "maxReplicaCount"), 2**31),  # out of int32 range
        (("spec", "maxReplicas"), 4),  # not a ScaledJob field
        (("spec", "triggers", 0, "metadata", "poolName"), 7),  # metadata values are strings
        (("spec", "triggers", 0, "authenticationRef"), {"kind": "TriggerAuthentication"}),
        (("spec", "rollout", "strategy"), ["gradual"]),
    ],
)
def test_keda_schema_rejects_broken_scaledjobs(
    good: dict[str, Any], where: tuple[Any, ...], value: Any
) -> None:
    broken = copy.deepcopy(good["ScaledJob"])
    node = broken
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert errors(crd_validator(SCALEDJOB_CRD), broken)


def test_keda_schema_rejects_a_broken_triggerauthentication(good: dict[str, Any]) -> None:
    broken = copy.deepcopy(good["TriggerAuthentication"])
    del broken["spec"]["secretTargetRef"][0]["key"]
    assert errors(crd_validator(TRIGGERAUTH_CRD), broken)
    broken = copy.deepcopy(good["TriggerAuthentication"])
    broken["spec"]["secretRef"] = broken["spec"].pop("secretTargetRef")
    assert errors(crd_validator(TRIGGERAUTH_CRD), broken)


@pytest.mark.parametrize(
    "breakage",
    [
        lambda pod: pod["containers"][0].update(imagePullPolicy=["Always"]),
        lambda pod: pod["containers"][0]["securityContext"].update(runAsUser="root"),
        lambda pod: pod["containers"][0].update(gpus=1),  # unknown field
        lambda pod: pod["volumes"][0]["secret"].update(defaultMode="0400"),
        lambda pod: pod["containers"][0].pop("name"),  # required
        lambda pod: pod.update(restartPolicy=None, containers="agent"),
    ],
)
def test_kubernetes_schema_rejects_broken_pods(good: dict[str, Any], breakage: Any) -> None:
    job = _job(copy.deepcopy(good["ScaledJob"]))
    breakage(job["spec"]["template"]["spec"])
    assert errors(k8s_validator("io.k8s.api.batch.v1.Job"), job)


def test_undocumented_trigger_metadata_is_caught(good: dict[str, Any]) -> None:
    metadata = dict(good["ScaledJob"]["spec"]["triggers"][0]["metadata"], poolname="gpu")
    assert set(metadata) - documented_trigger_parameters() == {"poolname"}


def test_quantity_syntax_check_rejects_docker_units() -> None:
    assert not QUANTITY.fullmatch("64g") and not QUANTITY.fullmatch("64GB")
    assert QUANTITY.fullmatch("64Gi") and QUANTITY.fullmatch("1.5Gi") and QUANTITY.fullmatch("1")


# --------------------------------------------------------------------------- the test data itself


def test_keda_check_matches_an_upstream_file_and_spots_a_difference(tmp_path: Any) -> None:
    """extract_schemas.py keda-check: elided nodes are ignored, anything else must be equal."""
    excerpt = yaml.safe_load(SCALEDJOB_CRD.read_text(encoding="utf-8"))
    upstream = copy.deepcopy(excerpt)
    props = upstream["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props["properties"]["jobTargetRef"] = {
        "type": "object",
        "properties": {"x": {"type": "string"}},
    }
    (tmp_path / "up.yaml").write_text(yaml.safe_dump(upstream), encoding="utf-8")
    script = str(DATA / "extract_schemas.py")
    check = [sys.executable, script, "keda-check", str(tmp_path / "up.yaml"), str(SCALEDJOB_CRD)]
    assert subprocess.run(check, capture_output=True, check=False).returncode == 0
    props["properties"]["maxReplicaCount"]["type"] = "string"
    (tmp_path / "up.yaml").write_text(yaml.safe_dump(upstream), encoding="utf-8")
    assert subprocess.run(check, capture_output=True, check=False).returncode == 1


def test_kubernetes_definitions_record_their_source() -> None:
    text = (DATA / "kubernetes" / "v1.34.0-strict-defs.json").read_text(encoding="utf-8")
    assert "kubernetes_validate-1.37.0-py3-none-any.whl" in text and "v1.34.0-local-strict" in text
    assert "io.k8s.api.batch.v1.JobSpec" in text
