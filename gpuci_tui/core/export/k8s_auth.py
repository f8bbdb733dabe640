"""How KEDA and the agent pods authenticate, for each ``[azure] auth``.

KEDA's azure-pipelines scaler (2.20 documentation, kept in tests/data/k8s) takes
a PAT, a service principal's client secret or certificate, or Azure Workload
Identity; the agent pods register with what the real agent supports:

=====================  ==========================================  ==========================
``auth``               KEDA's TriggerAuthentication                 the agent pod registers with
=====================  ==========================================  ==========================
``pat``                ``personalAccessToken`` (Secret key token)   the PAT (token file)
``service-principal``  ``clientSecret`` (key token), or             ``--auth SP`` with the client
                       ``clientCertificate`` (key certificate)      secret (key token; the agent
                       with ``client_certificate``; trigger         takes no certificate)
                       metadata ``tenantId``/``clientId``
``managed-identity``   ``podIdentity`` ``azure-workload``           an access token start.sh gets
                                                                    for its workload identity
=====================  ==========================================  ==========================

The Secret's ``token`` key is what the init container copies into the token
file; start.sh deletes it before the agent starts, as on the daemon's hosts.
"""

from __future__ import annotations

from gpuci_tui.core.config.model import AzureConfig
from gpuci_tui.core.export.k8s_yaml import Node

SECRET_KEY = "token"
"""Key of the registration secret (PAT or client secret) in the operator's Secret."""
CERTIFICATE_KEY = "certificate"
"""Key of the service principal's PEM (private key and certificate) for KEDA."""
WORKLOAD_IDENTITY_LABEL = "azure.workload.identity/use"
"""The pod label Azure Workload Identity's webhook looks for (it then injects
``AZURE_CLIENT_ID``, ``AZURE_TENANT_ID``, ``AZURE_FEDERATED_TOKEN_FILE``…)."""


def uses_secret(azure: AzureConfig) -> bool:
    """Whether the pods and KEDA read an operator-made Secret (not with workload identity)."""
    return azure.auth != "managed-identity"


def trigger_auth_spec(azure: AzureConfig, secret_name: str) -> Node:
    """The TriggerAuthentication's ``spec``."""
    if azure.auth == "managed-identity":
        identity: dict[str, Node] = {"provider": "azure-workload"}
        if azure.client_id:
            identity["identityId"] = azure.client_id
        return {"podIdentity": identity}
    if azure.auth == "service-principal":
        parameter, key = (
            ("clientCertificate", CERTIFICATE_KEY)
            if azure.client_certificate
            else ("clientSecret", SECRET_KEY)
        )
    else:
        parameter, key = "personalAccessToken", SECRET_KEY
    return {"secretTargetRef": [{"parameter": parameter, "name": secret_name, "key": key}]}


def trigger_metadata(azure: AzureConfig) -> dict[str, str]:
    """Trigger metadata the method needs (a service principal's ids)."""
    if azure.auth == "service-principal":
        return {"tenantId": azure.tenant_id, "clientId": azure.client_id}
    return {}


def agent_auth_env(azure: AzureConfig) -> list[Node]:
    """The agent container's ``AZP_AUTH`` settings for start.sh."""
    if azure.auth == "service-principal":
        return [
            {"name": "AZP_AUTH", "value": "service-principal"},
            {"name": "AZP_CLIENT_ID", "value": azure.client_id},
            {"name": "AZP_TENANT_ID", "value": azure.tenant_id},
        ]
    if azure.auth == "managed-identity":
        return [{"name": "AZP_AUTH", "value": "workload-identity"}]
    return []


def service_account(azure: AzureConfig, name: str) -> str | None:
    """The pods' service account: federated with the identity (workload identity only)."""
    return f"{name}-agent" if azure.auth == "managed-identity" else None


def notes_section(azure: AzureConfig, name: str, namespace: str, secret_name: str) -> str:
    """The NOTES' paragraph on the identity, for a service principal or workload identity."""
    ns = f"-n {namespace}"
    if azure.auth == "service-principal":
        cert = (
            [
                "KEDA signs in with the certificate: add the PEM (private key and certificate,",
                f"unencrypted: the Secret protects it) under key `{CERTIFICATE_KEY}`:",
                "",
                f"    kubectl {ns} create secret generic {secret_name} "
                f"--from-file={SECRET_KEY}=CLIENTSECRETFILE --from-file={CERTIFICATE_KEY}=SP.pem",
                "",
                "The pods still need the client secret: the agent's `--auth SP` takes no "
                "certificate.",
            ]
            if azure.client_certificate
            else [
                f"The Secret holds the client secret under key `{SECRET_KEY}` (instead of a PAT):",
                "",
                f"    kubectl {ns} create secret generic {secret_name} "
                f"--from-file={SECRET_KEY}=CLIENTSECRETFILE",
            ]
        )
        return "\n".join(
            [
                "## Service principal",
                "",
                f"Application {azure.client_id} of tenant {azure.tenant_id} must be a user of the",
                "organisation and an Administrator of the pool. Each pod registers with the",
                "agent's own `--auth SP` (agent 3.227.1 or later; start.sh `AZP_AUTH`); the",
                "secret reaches it as the token file, deleted before the agent starts.",
                *cert,
                "",
            ]
        )
    if azure.auth == "managed-identity":
        account = service_account(azure, name)
        who = azure.client_id or "CLIENT_ID"
        return "\n".join(
            [
                "## Azure Workload Identity (no Secret at all)",
                "",
                "KEDA's operator and the agent pods sign in with a federated identity. Install",
                "the workload identity webhook and enable it for KEDA (Helm:",
                "`--set podIdentity.azureWorkload.enabled=true`), give the identity a federated",
                f"credential for `system:serviceaccount:{namespace}:{account}`, make it a user of",
                "the organisation and an Administrator of the pool, then create the account:",
                "",
                f"    kubectl {ns} create serviceaccount {account}",
                f"    kubectl {ns} annotate serviceaccount {account} "
                f"azure.workload.identity/client-id={who}",
                "",
                "start.sh exchanges the pod's federated token for an Azure DevOps access token",
                "(valid about an hour) and registers with it; no secret is stored anywhere.",
                "",
            ]
        )
    return ""
