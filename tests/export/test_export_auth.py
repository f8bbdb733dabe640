"""The export for each ``[azure] auth``: KEDA's TriggerAuthentication (valid for its CRD,
only documented parameters) and how the agent pods register."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.model import AzureConfig

from .conftest import AZURE, Render
from .schemas import (
    SCALEDJOB_CRD,
    TRIGGERAUTH_CRD,
    crd_validator,
    documented_auth_parameters,
    documented_trigger_parameters,
    errors,
    k8s_validator,
)

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT = "11111111-2222-4333-8444-555555555555"
METHODS: dict[str, AzureConfig] = {
    "pat": AZURE,
    "sp-secret": dataclasses.replace(
        AZURE, auth="service-principal", tenant_id=TENANT, client_id=CLIENT
    ),
    "sp-certificate": dataclasses.replace(
        AZURE,
        auth="service-principal",
        tenant_id=TENANT,
        client_id=CLIENT,
        client_certificate="/etc/gpuci/sp.pem",
    ),
    "workload-identity": dataclasses.replace(AZURE, auth="managed-identity", client_id=CLIENT),
}
EXPECTED_AUTH = {
    "pat": {"secretTargetRef": [{"parameter": "personalAccessToken", "key": "token"}]},
    "sp-secret": {"secretTargetRef": [{"parameter": "clientSecret", "key": "token"}]},
    "sp-certificate": {
        "secretTargetRef": [{"parameter": "clientCertificate", "key": "certificate"}]
    },
    "workload-identity": {"podIdentity": {"provider": "azure-workload", "identityId": CLIENT}},
}


@pytest.fixture(params=sorted(METHODS))
def method(request: pytest.FixtureRequest, render: Render) -> tuple[str, dict[str, Any]]:
    return request.param, render(azure=METHODS[request.param])


def test_trigger_authentication_per_method(method: tuple[str, dict[str, Any]]) -> None:
    kind, out = method
    auth = out["TriggerAuthentication"]
    assert errors(crd_validator(TRIGGERAUTH_CRD), auth) == []
    spec = auth["spec"]
    for ref in spec.get("secretTargetRef", []):
        assert ref.pop("name") == "gpuci-azp-pat"
    assert spec == EXPECTED_AUTH[kind]
    refs = {r["parameter"] for r in auth["spec"].get("secretTargetRef", [])}
    assert refs <= documented_auth_parameters()


def test_scaled_job_and_pods_per_method(method: tuple[str, dict[str, Any]]) -> None:
    kind, out = method
    job = out["ScaledJob"]
    assert errors(crd_validator(SCALEDJOB_CRD), job) == []
    (trigger,) = job["spec"]["triggers"]
    assert set(trigger["metadata"]) <= documented_trigger_parameters()
    template = job["spec"]["jobTargetRef"]["template"]
    pod = template["spec"]
    assert errors(k8s_validator("io.k8s.api.batch.v1.JobSpec"), job["spec"]["jobTargetRef"]) == []
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    volumes = {v["name"] for v in pod["volumes"]}
    if kind.startswith("sp"):
        assert (trigger["metadata"]["tenantId"], trigger["metadata"]["clientId"]) == (
            TENANT,
            CLIENT,
        )
        assert (env["AZP_AUTH"], env["AZP_CLIENT_ID"], env["AZP_TENANT_ID"]) == (
            "service-principal",
            CLIENT,
            TENANT,
        )
    else:
        assert "tenantId" not in trigger["metadata"]
    if kind == "workload-identity":
        assert env["AZP_AUTH"] == "workload-identity"
        assert pod["serviceAccountName"] == "gpuhost-default-agent"
        assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"
        assert "initContainers" not in pod and "pat" not in volumes
        assert "create serviceaccount gpuhost-default-agent" in out["files"]["default-NOTES.md"]
    else:
        assert "serviceAccountName" not in pod and "pat" in volumes
        assert [c["name"] for c in pod["initContainers"]] == ["copy-token"]
    if kind == "pat":
        assert "AZP_AUTH" not in env


@pytest.mark.parametrize(
    ("keys", "auth_words", "secret_line"),
    [
        (
            'auth = "service-principal"\ntenant_id = "72f988bf-86f1-41af-91ab-2d7cd011db47"\n'
            'client_id = "11111111-2222-4333-8444-555555555555"\n',
            "service principal 11111111-2222-4333-8444-555555555555, Secret gpuci-azp-pat",
            "--from-file=token=SECRETFILE",
        ),
        ('auth = "managed-identity"\n', "Azure Workload Identity, no Secret", None),
    ],
)
def test_the_cli_says_what_each_method_needs(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    keys: str,
    auth_words: str,
    secret_line: str | None,
) -> None:
    from gpuci_tui.cli import exitcodes
    from gpuci_tui.cli.main import main

    config = tmp_path / "config.toml"
    config.write_text(
        f'[azure]\nurl = "https://dev.azure.com/acme"\npool = "gpu"\n{keys}\n'
        '[agents]\ncount = 2\nimage = "registry.example/agent:1"\nname_prefix = "gpuhost"\n'
        'gpus = "per-agent"\n',
        encoding="utf-8",
    )
    out_dir = tmp_path / "k8s"
    assert main(["--config", str(config), "export", "kubernetes", "-o", str(out_dir)]) == (
        exitcodes.OK
    )
    stdout = capsys.readouterr().out
    assert auth_words in stdout
    if secret_line is None:
        assert "create secret" not in stdout
    else:
        assert secret_line in stdout
