"""The pool observer checks the pool's role: at start, rarely after, soon after a failed
registration, every minute while it is missing; a refusal is told in words, without a
backoff that would hold job results back (issue 21)."""

from __future__ import annotations

from gpuci_tui.core.engine.server_steps import PoolRead, PoolRole, QueueRead
from gpuci_tui.core.engine.steps import Observation
from gpuci_tui.core.errors import AzureScopeError
from gpuci_tui.core.host.observers.pool_role import ROLE_INTERVAL, ROLE_RETRY, refusal
from gpuci_tui.core.models import HealthState
from gpuci_tui.core.protocols import Agent, JobRequest, Pool
from gpuci_tui.core.secrets.credentials import PatCredential
from tests.core.host.test_pool_observer import observer_on

SP = "the service principal gpuci-lab is not an Administrator of pool gpu: add it in "
WHERE = "Organization settings → Agent pools → gpu → Security"


class RoleApi:
    """A pool whose Administrator role is given or taken by the test; counts role checks."""

    def __init__(self) -> None:
        self.admin = True
        self.checks = 0
        self.credential = PatCredential("abcdefghij0123456789")

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        return []

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return []

    def can_manage_pool(self, pool: Pool) -> bool:
        self.checks += 1
        return self.admin


def test_the_refusal_in_words() -> None:
    assert refusal("service principal gpuci-lab · token valid 52 min", "gpu") == SP + WHERE
    assert refusal("managed identity vm-id · not signed in yet", "gpu").startswith(
        "the managed identity vm-id is not an Administrator of pool gpu"
    )
    pat = refusal("PAT", "gpu")
    assert "Agent Pools (read & manage)" in pat and WHERE in pat


async def test_checked_at_start_rarely_after_and_every_minute_while_missing() -> None:
    now = [1000.0]
    api = RoleApi()
    observer = observer_on(api, lambda: now[0])
    seen: list[Observation] = []

    async def cycle(after: float = 10.0) -> list[PoolRole]:
        now[0] += after
        seen.clear()
        await observer.cycle(seen.append)
        roles = [o for o in seen if isinstance(o, PoolRole)]
        if roles and len(seen) > 1:
            assert isinstance(seen[0], PoolRead | QueueRead), "the read first, then the role"
        return roles

    assert await cycle(0) == [PoolRole(1000.0, "")]
    assert await cycle() == [] and api.checks == 1, "not again before the interval"
    # A registration failed: one check soon (`ROLE_SOON_GAP` after the last), however
    # many slots failed.
    observer.check_role_soon()
    observer.check_role_soon()
    api.admin = False
    (role,) = await cycle()  # ROLE_SOON_GAP after the last check: due now
    assert api.checks == 2 and role.refused.startswith("the PAT may not manage pool gpu")
    assert observer.role_refused == role.refused
    health = observer.health
    assert health.state is HealthState.AUTH_FAILED and "agent starts wait" in health.message
    assert health.pool_role == role.refused, "the header says it is the role, not a rejection"
    assert observer.blocked_until() == 0.0, "job results and the checks go on"
    # While refused: every ROLE_RETRY, and a failed registration does not shorten it.
    observer.check_role_soon()
    assert await cycle(ROLE_RETRY - 1) == [] and api.checks == 2
    api.admin = True
    assert await cycle(1.0) == [PoolRole(now[0], "")] and api.checks == 3
    assert observer.health.state is HealthState.OK
    assert await cycle(ROLE_INTERVAL - 1) == [] and api.checks == 3
    assert len(await cycle(1.0)) == 1 and api.checks == 4


async def test_a_403_on_a_write_asks_for_a_check() -> None:
    now = [1000.0]
    api = RoleApi()
    observer = observer_on(api, lambda: now[0])
    await observer.cycle(lambda obs: None)
    observer.failed(AzureScopeError("403"))
    now[0] += 60.0  # the write's backoff is over
    await observer.cycle(lambda obs: None)
    assert api.checks == 2


async def test_a_client_without_the_check_is_never_held() -> None:
    from tests.core.host.test_pool_observer import CountingApi

    observer = observer_on(CountingApi(), lambda: 1000.0)
    seen: list[Observation] = []
    await observer.cycle(seen.append)
    assert [type(o) for o in seen] == [PoolRead]
    observer._wake.clear()
    observer.check_role_soon()  # a failed registration: no read for a check it cannot make
    assert not observer._wake.is_set()


async def test_a_failed_check_keeps_the_read_and_is_asked_again_soon() -> None:
    from gpuci_tui.core.errors import AzureServerError
    from gpuci_tui.core.host.observers.pool_role import ROLE_SOON_GAP

    now = [1000.0]
    api = RoleApi()
    answers: list[bool | Exception] = [AzureServerError("500"), True]

    def check(pool: Pool) -> bool:
        api.checks += 1
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    api.can_manage_pool = check  # type: ignore[method-assign]
    observer = observer_on(api, lambda: now[0])
    seen: list[Observation] = []
    await observer.cycle(seen.append)
    assert [type(o) for o in seen] == [PoolRead], "the read is delivered, no word on the role"
    assert observer.health.state is HealthState.OK
    now[0] += ROLE_SOON_GAP
    seen.clear()
    await observer.cycle(seen.append)
    assert seen[1:] == [PoolRole(now[0], "")] and api.checks == 2
