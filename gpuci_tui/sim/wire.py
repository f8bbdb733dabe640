"""JSON shapes of the Azure DevOps REST API, built from `SimOrg` records.

Rules from azure-devops-api.md §1: absent fields are omitted (never ``null``),
enums are camelCase strings, timestamps have 7 fraction digits and a ``Z``,
lists come in a ``{"count", "value"}`` envelope. Error bodies are the VSS
exception wrapper (which, unlike resources, does carry ``innerException: null``).
"""

from __future__ import annotations

from typing import Any

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentRecord, JobRecord, PatRecord, PoolRecord, wire_time

Json = dict[str, Any]

_TYPE_NAMES = {
    "UnauthorizedRequestException": "Microsoft.TeamFoundation.Framework.Server."
    "UnauthorizedRequestException, Microsoft.TeamFoundation.Framework.Server",
    "RequestBlockedException": "Microsoft.TeamFoundation.Framework.Server."
    "RequestBlockedException, Microsoft.TeamFoundation.Framework.Server",
}

SIGNIN_HTML = """<!DOCTYPE html>
<html><head><title>Azure DevOps Services | Sign In</title></head>
<body><p>Sign in to your account to continue to Azure DevOps.</p>
<form method="post" action="https://login.microsoftonline.com/"><input type="submit" value="Sign in"></form>
</body></html>
"""


def envelope(values: list[Json]) -> Json:
    """The collection wrapper."""
    return {"count": len(values), "value": values}


def error(message: str, type_key: str, event_id: int = 3000) -> Json:
    """A VSS exception body."""
    return {
        "$id": "1",
        "innerException": None,
        "message": message,
        "typeName": _TYPE_NAMES.get(
            type_key,
            f"Microsoft.TeamFoundation.DistributedTask.WebApi.{type_key}, "
            "Microsoft.TeamFoundation.DistributedTask.WebApi",
        ),
        "typeKey": type_key,
        "errorCode": 0,
        "eventId": event_id,
    }


def connection_data(org: SimOrg, pat: PatRecord) -> Json:
    """``GET _apis/connectionData``."""
    user = {
        "id": pat.user_id,
        "descriptor": f"Microsoft.IdentityModel.Claims.ClaimsIdentity;{pat.user_id}",
        "subjectDescriptor": f"aad.{pat.user_id}",
        "providerDisplayName": pat.user,
        "isActive": True,
        "properties": {"Account": {"$type": "System.String", "$value": "jane@example.com"}},
    }
    return {
        "authenticatedUser": user,
        "authorizedUser": user,
        "instanceId": org.instance_id,
        "deploymentId": org.instance_id,
        "deploymentType": "hosted",
        "locationServiceData": {
            "serviceOwner": "00025394-6065-48ca-87d9-7f5672854ef7",
            "defaultAccessMappingMoniker": "PublicAccessMapping",
            "lastChangeId": 259878979,
            "lastChangeId64": 259878979,
        },
    }


def pool(p: PoolRecord, size: int) -> Json:
    """A ``TaskAgentPool``."""
    return {
        "createdOn": wire_time(p.created_on),
        "autoProvision": False,
        "autoUpdate": True,
        "autoSize": False,
        "createdBy": {"displayName": "Jane Doe", "id": "79de7c35-0000-4000-8000-00000000c0de"},
        "owner": {"displayName": "Jane Doe", "id": "79de7c35-0000-4000-8000-00000000c0de"},
        "id": p.id,
        "scope": p.scope,
        "name": p.name,
        "isHosted": False,
        "poolType": p.pool_type,
        "size": size,
        "isLegacy": False,
        "options": "none",
    }


def agent_ref(a: AgentRecord, base: str) -> Json:
    """A ``TaskAgentReference`` (used inside job requests)."""
    return {
        "_links": {
            "self": {"href": f"{base}/_apis/distributedtask/pools/{a.pool_id}/agents/{a.id}"}
        },
        "id": a.id,
        "name": a.name,
        "version": a.version,
        "osDescription": a.os_description,
        "enabled": a.enabled,
        "status": a.status,
        "provisioningState": "Provisioned",
        "accessPoint": "CodexAccessMapping",
    }


def agent(
    org: SimOrg,
    a: AgentRecord,
    base: str,
    *,
    capabilities: bool = False,
    assigned: bool = False,
    last_completed: bool = False,
) -> Json:
    """A ``TaskAgent``; the optional parts only when asked for (as the service does)."""
    body: Json = {
        "_links": {
            "self": {"href": f"{base}/_apis/distributedtask/pools/{a.pool_id}/agents/{a.id}"},
            "web": {
                "href": f"{base}/_settings/agentpools?view=jobs&poolId={a.pool_id}&agentId={a.id}"
            },
        },
        "maxParallelism": 1,
        "createdOn": wire_time(a.created_on),
        "statusChangedOn": wire_time(a.status_changed_on),
        "authorization": {"clientId": f"{a.id:08x}-0000-4000-8000-000000000000"},
        "id": a.id,
        "name": a.name,
        "version": a.version,
        "osDescription": a.os_description,
        "enabled": a.enabled,
        "status": a.status,
        "provisioningState": "Provisioned",
        "accessPoint": "CodexAccessMapping",
    }
    if capabilities:
        body["systemCapabilities"] = dict(a.capabilities)
        body["userCapabilities"] = dict(a.user_capabilities)
    current = a.assigned_request if assigned else None
    if current is not None and (kept := org.kept_job(current)) is not None:
        body["assignedRequest"] = job(org, kept, base, matched=False)
    last = a.last_completed_request if last_completed else None
    if last is not None and (kept := org.kept_job(last)) is not None:
        body["lastCompletedRequest"] = job(org, kept, base, matched=False)
    return body


def job(org: SimOrg, j: JobRecord, base: str, *, matched: bool = True) -> Json:
    """A ``TaskAgentJobRequest``; queued ones have no assign/receive/result/reservedAgent keys."""
    body: Json = {"requestId": j.request_id, "queueTime": wire_time(j.queue_time)}
    if j.assign_time is not None:
        body["assignTime"] = wire_time(j.assign_time)
    if j.receive_time is not None:
        body["receiveTime"] = wire_time(j.receive_time)
        if j.finish_time is None:
            body["lockedUntil"] = wire_time(j.receive_time + 600)
    if j.finish_time is not None:
        body["finishTime"] = wire_time(j.finish_time)
    if j.result is not None:
        body["result"] = j.result
    body.update(
        {
            "serviceOwner": "00025394-6065-48ca-87d9-7f5672854ef7",
            "hostId": org.instance_id,
            "scopeId": "27d50f95-0000-4000-8000-00000000babe",
            "planType": "Build",
            "planId": f"{j.request_id:08x}-1111-4000-8000-000000000000",
            "jobId": f"{j.request_id:08x}-2222-4000-8000-000000000000",
            "demands": list(j.demands),
        }
    )
    if j.agent_id is not None:
        reserved = org.agent_by_id(j.agent_id)
        if reserved is not None and reserved.pool_id == j.pool_id:
            body["reservedAgent"] = agent_ref(reserved, base)
        else:  # the agent was deleted since: keep what the job knew of it
            body["reservedAgent"] = {"id": j.agent_id, "name": j.agent_name}
    if matched and j.state == "queued":
        body["matchedAgents"] = [agent_ref(a, base) for a in org.matched_agents(j)]
        body["matchesAllAgentsInPool"] = not j.demands
    body.update(
        {
            "definition": {
                "_links": {
                    "web": {"href": f"{base}/_build/definition?definitionId={j.definition_id}"}
                },
                "id": j.definition_id,
                "name": j.pipeline,
            },
            "owner": {
                "_links": {"web": {"href": f"{base}/_build/results?buildId={j.run_id}"}},
                "id": j.run_id,
                "name": j.run_name,
            },
            "data": {"ParallelismTag": "Private", "IsScheduledKey": "False"},
            "poolId": j.pool_id,
            "orchestrationId": f"{j.request_id:08x}-3333-4000-8000-000000000000.build.__default",
            "priority": 0,
        }
    )
    return body
