"""What the simulated organisation says about where its resources live.

Every Azure DevOps client made from Microsoft's SDK (``azure-devops``) first asks
``OPTIONS {org}/_apis`` for the resource locations (id, area, route template,
versions) and ``GET {org}/_apis/ResourceAreas`` for the host of each area; it then
builds every URL from them. These are the entries the agent-pool calls need,
with the values the service answers.
"""

from __future__ import annotations

from typing import Any

#: The task-agent area (``distributedtask``) and the location service's own area.
DISTRIBUTED_TASK_AREA = "a85b8835-c1a1-4aac-ae97-1c3d0ba72dbd"
LOCATION_AREA = "00d9565f-ed9c-4a06-9a50-00e7896ccab4"

_LOCATIONS = (
    # id, area, resourceName, routeTemplate, resourceVersion
    ("a8c47e17-4d56-4a56-92bb-de7ea7dc65be", "distributedtask", "pools",
     "_apis/{area}/{resource}/{poolId}", 1),
    ("e298ef32-5878-4cab-993c-043836571f42", "distributedtask", "agents",
     "_apis/{area}/pools/{poolId}/{resource}/{agentId}", 1),
    ("fc825784-c92a-4299-9221-998a02d1b54f", "distributedtask", "jobrequests",
     "_apis/{area}/pools/{poolId}/{resource}/{requestId}", 1),
    ("00d9565f-ed9c-4a06-9a50-00e7896ccab4", "Location", "ConnectionData",
     "_apis/{resource}", 1),
    ("e81700f7-3be2-46de-8624-2eb35882fcaa", "Location", "ResourceAreas",
     "_apis/{resource}/{areaId}", 1),
)  # fmt: skip


def resource_locations() -> dict[str, Any]:
    """The answer to ``OPTIONS {org}/_apis``: a collection of ``ApiResourceLocation``."""
    value = [
        {
            "id": location_id,
            "area": area,
            "resourceName": resource,
            "routeTemplate": template,
            "resourceVersion": version,
            "minVersion": "1.0",
            "maxVersion": "7.2",
            "releasedVersion": "7.1",
        }
        for location_id, area, resource, template, version in _LOCATIONS
    ]
    return {"count": len(value), "value": value}


def resource_areas(org_url: str) -> dict[str, Any]:
    """The answer to ``GET {org}/_apis/ResourceAreas``: each area and the URL that serves it."""
    base = org_url.rstrip("/") + "/"
    value = [
        {"id": DISTRIBUTED_TASK_AREA, "name": "distributedtask", "locationUrl": base},
        {"id": LOCATION_AREA, "name": "Location", "locationUrl": base},
    ]
    return {"count": len(value), "value": value}
