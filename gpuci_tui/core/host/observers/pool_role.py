"""Whether the organisation lets our identity manage the pool (issue 21).

An identity that lost the pool's Administrator role (or a PAT without the
manage scope) still reads the pool, but every agent registration is refused
with a 403: without this check every slot would fail its starts, back off and
park, and the operator would read "registration failed" on each of them. The
pool observer asks the organisation instead (`PoolRoleApi.can_manage_pool`,
one GET), at start and rarely after that, and soon after a registration failed;
the engine then holds every start with the reason (`steps.PoolRole`) until a
later check, every ``[supervisor] role_retry`` seconds (`ROLE_RETRY` by default), finds
the role back.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.protocols import Pool

#: While the role is there, it is checked again this often (a role rarely changes).
ROLE_INTERVAL = 3600.0
#: While the role is missing, it is checked this often (``[supervisor] role_retry``, whose
#: default this is): a bounded retry that sends one GET per minute and starts no container,
#: so it cannot crash-loop.
ROLE_RETRY = SupervisorConfig().role_retry
#: A failed registration asks for a check no sooner than this after the last one, so a
#: burst of failing slots (or an image that always fails) costs one GET, not one each.
ROLE_SOON_GAP = 10.0


@runtime_checkable
class PoolRoleApi(Protocol):
    """The part of the organisation's client that says whether the pool may be managed.

    The real client has it; test doubles and the in-process simulation may not,
    and are then never checked (their starts are never held for the role).
    """

    def can_manage_pool(self, pool: Pool) -> bool:
        """Whether our identity may register, disable and delete the pool's agents."""
        ...


def refusal(describe: str, pool: str) -> str:
    """The organisation's refusal in words, with the fix.

    Args:
        describe: The credential in words (`Credential.describe`: ``service principal
            gpuci-lab · token valid 52 min``; ``PAT``); its state is dropped.
        pool: The pool's name.
    """
    who = describe.split(" · ", 1)[0].strip()
    where = f"Organization settings → Agent pools → {pool} → Security"
    if not who or who.startswith("PAT"):
        return (
            f"the PAT may not manage pool {pool}: its user is not an Administrator of the "
            f"pool (add it in {where}) or the PAT lacks the Agent Pools (read & manage) "
            "scope (store a new one with `gpuci-tui setup`)"
        )
    return f"the {who} is not an Administrator of pool {pool}: add it in {where}"
