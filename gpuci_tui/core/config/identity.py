"""Names derived from a configuration: the instance id, the daemon's id, the container hash.

They end up in container labels, lock files and socket names, so each must stay
stable across releases for the same configuration values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from gpuci_tui.core.config.model import Config, agent_groups, for_group


def instance_id(config: Config) -> str:
    """12 hex digits naming the agent set a supervisor manages (org, pool, name prefix).

    Used in container labels, the lock file and the control socket name, so it
    must stay stable across releases for the same three values.
    """
    key = "\n".join((_org_key(config.azure.url), config.azure.pool, config.agents.name_prefix))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def daemon_instance(config: Config) -> str:
    """The id of a daemon: its only group's instance, or one for the set of groups."""
    groups = agent_groups(config)
    if len(groups) == 1:
        return instance_id(for_group(config, groups[0]))
    ids = sorted(instance_id(for_group(config, g)) for g in groups)
    return instance_id(
        dataclasses.replace(
            config,
            azure=dataclasses.replace(config.azure, pool="+".join(ids)),
            agents=dataclasses.replace(config.agents, name_prefix="groups"),
        )
    )


def config_hash(config: Config) -> str:
    """12 hex digits of everything that shapes an agent container.

    Stored as a container label, so a supervisor notices containers started
    under an older configuration. Slot count and supervisor timing are left out:
    changing them needs no new containers.
    """
    agents = config.agents
    relevant = {
        "url": config.azure.url,
        "pool": config.azure.pool,
        "image": agents.image,
        "network": agents.network,
        "gpus": agents.gpus,
        **({"gpu_ids": list(agents.gpu_ids)} if agents.gpu_ids else {}),
        # Only when set: the hash of every existing configuration stays the same.
        **({"per_slot": agents.gpus_per_slot} if agents.gpus_per_slot != 1 else {}),
        "volumes": [[v.host, v.container, v.env] for v in agents.volumes],
        "oom": agents.oom_score_adj,
        "mem": agents.mem_limit,
        "sock": agents.docker_socket,
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]


def _org_key(url: str) -> str:
    # Organisation names are case-insensitive, and the id must not depend on spelling.
    return url.rstrip("/").lower()
