"""SimOrg: the dispatch and life-cycle rules of the simulated organisation."""

from __future__ import annotations

import re
import threading

import pytest

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import (
    SimAuthError,
    SimNotFoundError,
    SimScopeError,
    SimSessionError,
    wire_time,
)

from .conftest import NO_SCOPE_PAT, PAT, READ_ONLY_PAT, wait_until

POOL = 42


def test_wire_time_has_seven_fraction_digits_and_z() -> None:
    assert wire_time(1795341224.5) == "2026-11-22T09:53:44.5000000Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z", wire_time(1.9999999999))


def test_pool_ids_start_at_42_and_names_can_be_ambiguous(org: SimOrg) -> None:
    assert [p.id for p in org.pools("gpu")] == [POOL]
    org.add_pool("gpu")
    assert len(org.pools("gpu")) == 2
    assert org.pools("nope") == []


def test_register_checks_pat_scope_and_pool(org: SimOrg) -> None:
    with pytest.raises(SimAuthError):
        org.register("gpu", "a", "wrong")
    with pytest.raises(SimScopeError):
        org.register("gpu", "a", READ_ONLY_PAT)
    with pytest.raises(SimScopeError):
        org.register("gpu", "a", NO_SCOPE_PAT)
    with pytest.raises(SimNotFoundError) as exc:
        org.register("cpu", "a", PAT)
    assert exc.value.type_key == "TaskAgentPoolNotFoundException"


def test_register_sets_fields_and_replace_keeps_id_and_enabled(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT, hostname="3f9c2a1b7d10")
    agent = org.get_agent(POOL, aid)
    assert agent.online and agent.enabled and agent.registrations == 1
    assert agent.capabilities["Agent.Name"] == "gpu-1"
    assert agent.capabilities["HOSTNAME"] == "3f9c2a1b7d10"
    assert agent.capabilities["Agent.Version"] == agent.version
    org.set_agent_enabled(POOL, aid, False)
    aid2, key2 = org.register("gpu", "gpu-1", PAT, hostname="other")
    assert aid2 == aid and key2 != key
    agent = org.get_agent(POOL, aid)
    assert not agent.enabled and agent.registrations == 2
    assert agent.capabilities["HOSTNAME"] == "other"
    with pytest.raises(SimSessionError):
        org.poll(aid, key, timeout=0)


def test_jobs_are_dispatched_fifo_to_the_longest_waiting_agent(org: SimOrg) -> None:
    first = org.queue_job(POOL, pipeline="a")
    second = org.queue_job(POOL, pipeline="b")
    a1, k1 = org.register("gpu", "gpu-1", PAT)
    a2, k2 = org.register("gpu", "gpu-2", PAT)
    got: dict[int, int] = {}

    def poll(aid: int, key: str) -> None:
        ticket = org.poll(aid, key, timeout=5)
        assert ticket is not None
        got[aid] = ticket.request_id

    t1 = threading.Thread(target=poll, args=(a1, k1))
    t1.start()
    t1.join(5)
    t2 = threading.Thread(target=poll, args=(a2, k2))
    t2.start()
    t2.join(5)
    assert got == {a1: first, a2: second}
    job = org.job(first)
    assert job.state == "running" and job.agent_name == "gpu-1" and job.assign_count == 1
    assert job.receive_time is not None and job.assign_time is not None


def test_a_waiting_poll_gets_a_job_queued_later(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT)
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(org.poll(aid, key, timeout=5)))
    t.start()
    wait_until(lambda: org.get_agent(POOL, aid).active_polls == 1, what="the poll to start")
    rid = org.queue_job(POOL)
    t.join(5)
    assert [getattr(r, "request_id", None) for r in result] == [rid]


def test_disabled_agent_gets_no_job_until_enabled_and_keeps_its_current_one(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT)
    org.set_agent_enabled(POOL, aid, False)
    rid = org.queue_job(POOL)
    assert org.poll(aid, key, timeout=0.05) is None
    assert org.job(rid).state == "queued"
    org.set_agent_enabled(POOL, aid, True)
    ticket = org.poll(aid, key, timeout=1)
    assert ticket is not None and ticket.request_id == rid
    org.set_agent_enabled(POOL, aid, False)  # disabling mid-job does not stop the job
    assert org.heartbeat(aid, key, rid) is False
    assert org.finish(rid, "succeeded", key)
    assert org.job(rid).result == "succeeded"


def test_once_session_takes_one_job_and_a_new_registration_takes_the_next(org: SimOrg) -> None:
    r1, r2 = org.queue_job(POOL), org.queue_job(POOL)
    aid, key = org.register("gpu", "gpu-1", PAT)
    t1 = org.poll(aid, key, timeout=1)
    assert t1 is not None and t1.request_id == r1
    org.finish(r1, "succeeded", key)
    assert org.poll(aid, key, timeout=0.05) is None
    assert org.job(r2).state == "queued"
    org.offline(aid, key)
    assert org.get_agent(POOL, aid).status == "offline"
    aid2, key2 = org.register("gpu", "gpu-1", PAT)
    t2 = org.poll(aid2, key2, timeout=1)
    assert aid2 == aid and t2 is not None and t2.request_id == r2


def test_lost_heartbeat_abandons_the_job_and_takes_the_agent_offline(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT)
    rid = org.queue_job(POOL)
    assert org.poll(aid, key, timeout=1) is not None
    assert org.wait_for(lambda o: o.job(rid).state == "finished", timeout=3)
    job = org.job(rid)
    assert job.result == "abandoned" and "heartbeat" in job.note
    assert org.get_agent(POOL, aid).status == "offline"
    assert org.finish(rid, "succeeded") is False  # too late: stays abandoned
    assert org.job(rid).result == "abandoned"


def test_heartbeats_keep_a_long_job_alive(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT)
    rid = org.queue_job(POOL)
    assert org.poll(aid, key, timeout=1) is not None
    stop = threading.Event()
    while not stop.wait(0.1):
        assert org.heartbeat(aid, key, rid) is False
        if org.clock() - org.job(rid).assign_time > 1.0:  # type: ignore[operator]
            stop.set()
    assert org.job(rid).state == "running"


def test_deleting_a_busy_agent_abandons_its_job(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT)
    rid = org.queue_job(POOL)
    assert org.poll(aid, key, timeout=1) is not None
    org.delete_agent(POOL, aid)
    assert org.job(rid).result == "abandoned"
    with pytest.raises(SimNotFoundError) as exc:
        org.get_agent(POOL, aid)
    assert exc.value.type_key == "TaskAgentNotFoundException"
    with pytest.raises(SimSessionError):
        org.heartbeat(aid, key, rid)


def test_cancel_queued_and_running(org: SimOrg) -> None:
    queued = org.queue_job(POOL)
    org.cancel_job(queued)
    assert org.job(queued).result == "canceled"
    aid, key = org.register("gpu", "gpu-1", PAT)
    running = org.queue_job(POOL)
    assert org.poll(aid, key, timeout=1) is not None
    org.cancel_job(running)
    assert org.heartbeat(aid, key, running) is True
    org.finish(running, "succeeded", key)
    assert org.job(running).result == "canceled"


def test_demands_must_be_met(org: SimOrg) -> None:
    rid = org.queue_job(POOL, demands=("cuda", "gpu -equals a100", "Agent.Version -gtVersion 2.1"))
    plain, pk = org.register("gpu", "cpu-1", PAT)
    assert org.poll(plain, pk, timeout=0.05) is None
    ok, okk = org.register("gpu", "gpu-1", PAT, capabilities={"cuda": "12.4", "gpu": "a100"})
    ticket = org.poll(ok, okk, timeout=1)
    assert ticket is not None and ticket.request_id == rid
    assert [a.name for a in org.matched_agents(org.job(rid))] == ["gpu-1"]


def test_job_requests_filters(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT, max_jobs=None)
    done = [org.queue_job(POOL) for _ in range(3)]
    for rid in done:
        assert org.poll(aid, key, timeout=1) is not None
        org.finish(rid, "succeeded", key)
    waiting = org.queue_job(POOL, pipeline="other")
    org.set_agent_enabled(POOL, aid, False)
    assert [j.request_id for j in org.job_requests(POOL, completed_request_count=0)] == [waiting]
    assert [j.request_id for j in org.job_requests(POOL, completed_request_count=2)] == [
        waiting,
        done[2],
        done[1],
    ]
    assert len(org.job_requests(POOL)) == 4
    assert {j.request_id for j in org.job_requests(POOL, agent_id=aid)} == set(done)


def test_no_job_is_ever_assigned_twice_under_concurrency(org: SimOrg) -> None:
    errors: list[BaseException] = []

    def agent(n: int) -> None:
        try:
            while True:
                aid, key = org.register("gpu", f"gpu-{n}", PAT)
                ticket = org.poll(aid, key, timeout=1.0)
                if ticket is None:
                    return
                org.finish(ticket.request_id, "succeeded", key)
                org.offline(aid, key)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    wait_until(lambda: sum(a.active_polls for a in org.agents(POOL)) == 8, what="8 agents polling")
    for _ in range(60):
        org.queue_job(POOL, duration=0)
    for t in threads:
        t.join(20)
    assert not errors
    jobs = org.jobs()
    assert len(jobs) == 60
    assert all(j.result == "succeeded" and j.assign_count == 1 for j in jobs)
    # The first eight went to the eight waiting agents, longest-waiting first.
    assert len({j.agent_name for j in jobs[:8]}) == 8


def test_faults_by_count_duration_and_token(org: SimOrg) -> None:
    f = org.faults.server_error(503, count=2)
    assert org.faults.match(private=False, token=PAT).status == 503  # type: ignore[union-attr]
    assert org.faults.match(private=True, token=PAT) is None  # private endpoints spared
    assert org.faults.match(private=False, token=None) is not None
    assert org.faults.match(private=False, token=PAT) is None  # count used up
    assert f.hits == 2
    org.faults.html_signin(token=READ_ONLY_PAT)
    assert org.faults.match(private=False, token=PAT) is None
    assert org.faults.match(private=False, token=READ_ONLY_PAT).kind == "html"  # type: ignore[union-attr]
    org.faults.clear()
    org.faults.rate_limit(retry_after=3, duration=0.05)
    assert org.faults.match(private=False, token=PAT).retry_after == 3  # type: ignore[union-attr]
    wait_until(lambda: org.faults.match(private=False, token=PAT) is None, what="expiry")
    org.faults.unreachable(duration=10)
    assert org.faults.unreachable_now() and org.faults.unreachable_now(private=True)
    org.faults.clear()
    assert not org.faults.unreachable_now()


def test_request_stats(org: SimOrg) -> None:
    start = org.clock()
    for _ in range(3):
        org.stats.record("GET", "/_apis/distributedtask/pools/{poolId}/agents", 200)
    org.stats.record("POST", "/_sim/poll", 200, private=True)
    assert org.request_counts() == {("GET", "/_apis/distributedtask/pools/{poolId}/agents"): 3}
    assert org.request_counts(private=True) == {("POST", "/_sim/poll"): 1}
    assert org.requests_per_minute(since=start - 60) == pytest.approx(3.0, rel=0.05)


def test_registration_and_session_are_two_steps_like_config_sh_then_run_sh(org: SimOrg) -> None:
    aid, key = org.register("gpu", "gpu-1", PAT, open_session=False)
    agent = org.find_agent("gpu-1")
    assert agent is not None and agent.enabled and not agent.online, "registered, offline"
    rid = org.queue_job(POOL)
    assert org.job(rid).state == "queued", "an offline agent is never handed a job"
    with pytest.raises(SimSessionError):
        org.poll(aid, key, timeout=0.01)  # no session yet
    assert org.open_session(aid, key) == key
    assert org.poll(aid, key, timeout=1) is not None


def test_a_replace_before_the_session_invalidates_the_first_registration(org: SimOrg) -> None:
    aid, first = org.register("gpu", "gpu-1", PAT, open_session=False)
    org.set_agent_enabled(POOL, aid, False)
    aid2, second = org.register("gpu", "gpu-1", PAT, open_session=False)
    assert aid2 == aid
    with pytest.raises(SimSessionError):
        org.open_session(aid, first)
    org.open_session(aid, second)
    agent = org.find_agent("gpu-1")
    assert agent is not None and agent.online and not agent.enabled, "replace keeps enabled=False"
