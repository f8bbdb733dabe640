"""SimulatedRuntime: in-process "containers" that behave like the agent emulator."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from gpuci_tui.core.docker.errors import ContainerOperationError
from gpuci_tui.core.errors import (
    ContainerNameConflictError,
    ContainerStartError,
    ImageLabelMissingError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.protocols import ContainerEvent, ContainerRuntime, ContainerSpec
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime

from .conftest import PAT, READ_ONLY_PAT, wait_until

POOL = 42
LABELS = {"gpuci.instance": "test"}


def spec(name: str = "gpu-1", image: str = DEFAULT_IMAGE, **kw: object) -> ContainerSpec:
    env = {
        "AZP_URL": "http://127.0.0.1:1/simorg",
        "AZP_POOL": "gpu",
        "AZP_AGENT_NAME": name,
        "AZP_TOKEN_FILE": "/run/azp/token",
        "GPUCI_SLOT": name.rsplit("-", 1)[-1],
    }
    # Most tests here model Docker's auto-remove; agents run without it (see below).
    kw.setdefault("auto_remove", True)
    return ContainerSpec(name=name, image=image, labels=LABELS, environment=env, **kw)  # type: ignore[arg-type]


class Recorder:
    """Collects the runtime's events on a thread."""

    def __init__(self, runtime: SimulatedRuntime) -> None:
        self.events: list[ContainerEvent] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(runtime,), daemon=True)
        self._thread.start()

    def _run(self, runtime: SimulatedRuntime) -> None:
        for event in runtime.events(LABELS, self.stop):
            self.events.append(event)

    def actions(self, name: str | None = None) -> list[str]:
        return [e.action for e in self.events if name is None or e.name == name]

    def wait_for(self, action: str, count: int = 1, timeout: float = 5.0) -> None:
        wait_until(lambda: self.actions().count(action) >= count, timeout, f"{count}x {action}")

    def died(self) -> int | None:
        """The exit code of the last ``die`` (its ``destroy`` may already follow it)."""
        return [e for e in self.events if e.action == "die"][-1].exit_code

    def close(self) -> None:
        self.stop.set()
        self._thread.join(2)


@pytest.fixture
def runtime(org: SimOrg) -> SimulatedRuntime:
    return SimulatedRuntime(org, destroy_delay=0.02, broken_images=("broken:1",))


@pytest.fixture
def rec(runtime: SimulatedRuntime) -> Iterator[Recorder]:
    r = Recorder(runtime)
    yield r
    r.close()


def agent_online(org: SimOrg, name: str) -> bool:
    agent = org.find_agent(name)
    return agent is not None and agent.status == "online"


def test_it_is_a_container_runtime(runtime: SimulatedRuntime) -> None:
    assert isinstance(runtime, ContainerRuntime)


def test_one_job_then_exit_0_with_the_docker_event_sequence(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(), PAT)
    assert info.status == "running" and info.name == "gpu-1"
    wait_until(lambda: agent_online(org, "gpu-1"), what="the agent to come online")
    c = runtime.container(info.id)
    assert c is not None and not c.token_file_present
    rid = org.queue_job(POOL, duration=0.2)
    rec.wait_for("destroy")
    assert rec.actions() == ["create", "start", "die", "destroy"]
    die = rec.events[2]
    # As Docker's: the container's labels, the image's among them (the start gate's).
    assert die.exit_code == 0 and die.container_id == info.id
    assert dict(die.labels) == {**LABELS, **runtime.image_config(DEFAULT_IMAGE).labels}
    job = org.job(rid)
    assert job.result == "succeeded" and job.agent_name == "gpu-1" and job.assign_count == 1
    agent = org.find_agent("gpu-1")
    assert agent is not None and agent.status == "offline"
    assert agent.capabilities["GPUCI_SLOT"] == "1" and "AZP_TOKEN_FILE" not in agent.capabilities
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: "
    assert [re.sub(stamp, "", line) for line in c.tail(10)[-5:]] == [
        "Listening for Jobs",
        "Running job: train - main",
        f"job {rid} started (train - main {job.run_name})",
        "Job train - main completed with result: Succeeded",
        f"job {rid} succeeded",
    ]
    assert runtime.list_containers(LABELS) == []
    assert runtime.logs_tail(info.id) == []  # gone


def test_without_auto_remove_a_dead_container_keeps_its_logs_until_removed(
    runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(image="broken:1", auto_remove=False), PAT)
    rec.wait_for("die")
    wait_until(lambda: runtime.list_containers(LABELS) != [], what="listed")
    (dead,) = runtime.list_containers(LABELS)
    assert dead.status == "exited" and runtime.logs_tail(info.id) != []
    with pytest.raises(ContainerNameConflictError):
        runtime.start(spec(), PAT)
    runtime.remove(info.id)
    rec.wait_for("destroy")
    assert runtime.list_containers(LABELS) == []


def test_name_is_taken_until_destroy(org: SimOrg) -> None:
    runtime = SimulatedRuntime(org, destroy_delay=0.3)
    rec = Recorder(runtime)
    try:
        first = runtime.start(spec(), PAT)
        wait_until(lambda: agent_online(org, "gpu-1"))
        runtime.stop(first.id, timeout=5)
        rec.wait_for("die")
        with pytest.raises(ContainerNameConflictError, match="still in use"):
            runtime.start(spec(), PAT)
        assert [c.status for c in runtime.list_containers(LABELS)] == ["exited"]
        rec.wait_for("destroy")
        second = runtime.start(spec(), PAT)
        wait_until(lambda: agent_online(org, "gpu-1"))
        agent = org.find_agent("gpu-1")
        assert agent is not None and agent.registrations == 2  # replaced, same id
        assert second.id != first.id
    finally:
        rec.close()


def test_sigterm_while_idle_goes_offline_and_exits_143(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(), PAT)
    wait_until(lambda: agent_online(org, "gpu-1"))
    runtime.stop(info.id, timeout=5)
    rec.wait_for("die")
    assert rec.died() == 143
    assert not agent_online(org, "gpu-1")
    assert "SIGTERM while idle: went offline" in runtime.history()[0].tail(5)


def test_sigterm_while_busy_finishes_the_job_then_exits_0(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(), PAT)
    rid = org.queue_job(POOL, duration=0.4)
    wait_until(lambda: org.job(rid).state == "running", what="the job to start")
    runtime.stop(info.id, timeout=5)
    rec.wait_for("die")
    assert rec.died() == 0
    assert org.job(rid).result == "succeeded"


def test_stop_timeout_kills_a_busy_agent_and_the_job_is_abandoned(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(), PAT)
    rid = org.queue_job(POOL, duration=30)
    wait_until(lambda: org.job(rid).state == "running")
    runtime.stop(info.id, timeout=0.1)
    rec.wait_for("die")
    assert rec.died() == 137
    assert org.wait_for(lambda o: o.job(rid).result == "abandoned", timeout=3)


def test_remove_kills_and_destroys_at_once(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    info = runtime.start(spec(), PAT)
    wait_until(lambda: agent_online(org, "gpu-1"))
    runtime.remove(info.id)
    rec.wait_for("destroy")
    assert rec.actions()[-2:] == ["die", "destroy"]
    assert [e.exit_code for e in rec.events if e.action == "die"] == [137]
    runtime.start(spec(), PAT)  # the name is free again right away
    runtime.remove("gone-container-id")  # not an error


def test_oom_job_sends_oom_then_die_137(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    runtime.start(spec(), PAT)
    rid = org.queue_job(POOL, kind="oom")
    rec.wait_for("destroy")
    assert rec.actions() == ["create", "start", "oom", "die", "destroy"]
    assert rec.events[3].exit_code == 137
    assert runtime.history()[0].oom_killed
    assert org.wait_for(lambda o: o.job(rid).result == "abandoned", timeout=3)


def test_failing_job_reports_failed_and_exits_0(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    runtime.start(spec(), PAT)
    rid = org.queue_job(POOL, kind="fail", duration=0.05)
    rec.wait_for("die")
    assert rec.died() == 0
    assert org.job(rid).result == "failed"


@pytest.mark.parametrize(
    ("token", "env", "message"),
    [
        ("not-a-valid-pat-at-all", {}, "rejected the PAT (401)"),
        (READ_ONLY_PAT, {}, "rejected the PAT (401)"),
        (PAT, {"AZP_POOL": "cpu"}, "agent pool cpu does not exist"),
        (PAT, {"AZP_URL": ""}, "missing AZP_URL"),
        (PAT, {"AZP_TOKEN_FILE": "/elsewhere"}, "cannot read the token file /elsewhere"),
    ],
)
def test_configuration_failures_exit_1_with_a_plain_message(
    runtime: SimulatedRuntime, rec: Recorder, token: str, env: dict[str, str], message: str
) -> None:
    base = spec()
    bad = ContainerSpec(
        name=base.name,
        image=base.image,
        labels=base.labels,
        environment={**base.environment, **env},
    )
    runtime.start(bad, token)
    rec.wait_for("die")
    assert rec.died() == 1
    c = runtime.history()[0]
    assert any(message in line for line in c.tail(5)), c.tail(5)
    # The token file is deleted once it was read (the last two fail before reading it).
    assert c.token_file_present == ("AZP_URL" in message or "token file" in message)
    assert all(token not in line for line in c.tail(50))


def test_images_broken_missing_and_injected_start_failures(
    runtime: SimulatedRuntime, rec: Recorder
) -> None:
    assert runtime.image_present(DEFAULT_IMAGE) and runtime.image_present("broken:1")
    assert not runtime.image_present("nvidia/cuda:12.4.1-base-ubuntu22.04")
    with pytest.raises(ContainerStartError, match="not present on this host"):
        runtime.start(spec(image="nvidia/cuda:12.4.1-base-ubuntu22.04"), PAT)
    runtime.start(spec(image="broken:1"), PAT)
    rec.wait_for("die")
    assert rec.died() == 1
    runtime.fail_next_starts(1)
    with pytest.raises(ContainerStartError, match="NVIDIA Container Toolkit"):
        runtime.start(spec("gpu-2"), PAT)
    runtime.start(spec("gpu-2"), PAT)


def test_refuses_a_pat_in_the_environment(runtime: SimulatedRuntime) -> None:
    base = spec()
    leaky = ContainerSpec(
        name="gpu-1",
        image=DEFAULT_IMAGE,
        labels=LABELS,
        environment={**base.environment, "AZP_TOKEN": PAT},
    )
    with pytest.raises(ContainerStartError, match="PAT appears"):
        runtime.start(leaky, PAT)


def test_list_containers_filters_by_labels(org: SimOrg, runtime: SimulatedRuntime) -> None:
    runtime.start(spec("gpu-1"), PAT)
    other = ContainerSpec(
        name="x-1", image=DEFAULT_IMAGE, labels={"gpuci.instance": "other"}, environment={}
    )
    runtime.start(other, PAT)
    assert [c.name for c in runtime.list_containers(LABELS)] == ["gpu-1"]
    assert len(runtime.list_containers({})) == 2


def test_engine_down_and_event_stream_cut(
    org: SimOrg, runtime: SimulatedRuntime, rec: Recorder
) -> None:
    runtime.available = False
    with pytest.raises(RuntimeUnavailableError, match="Docker daemon"):
        runtime.ping()
    with pytest.raises(RuntimeUnavailableError):
        runtime.start(spec(), PAT)
    rec.wait_for("stream-lost")
    runtime.available = True
    rec.wait_for("stream-restored")
    runtime.break_event_stream(0.3)
    rec.wait_for("stream-lost", 2)
    info = runtime.start(spec(), PAT)  # its create/start happen in the gap: lost
    rec.wait_for("stream-restored", 2)
    assert "create" not in rec.actions()
    assert [c.id for c in runtime.list_containers(LABELS)] == [info.id]  # re-adoption works
    runtime.stop(info.id, timeout=5)
    rec.wait_for("die")


def test_32_slots_refilled_on_destroy_run_300_short_jobs(org: SimOrg) -> None:
    """A supervisor-like refill loop: every job runs once, every container takes at most one."""
    # 33 threads on a loaded machine: a 0.5 s silence (the fixture's heartbeat timeout,
    # there for the lease tests) is a scheduling gap here, not a dead agent.
    org.heartbeat_timeout = 30.0
    runtime = SimulatedRuntime(org, destroy_delay=0.01)
    stop = threading.Event()
    ids = [org.queue_job(POOL, duration=0.01) for _ in range(300)]
    for slot in range(32):
        runtime.start(spec(f"gpu-{slot}"), PAT)

    def refill() -> None:
        for event in runtime.events(LABELS, stop):
            if event.action == "destroy" and not stop.is_set():
                runtime.start(spec(event.name), PAT)

    t = threading.Thread(target=refill, daemon=True)
    t.start()
    try:
        assert org.wait_for(lambda o: all(j.state == "finished" for j in o.jobs()), timeout=60), (
            "not all jobs finished"
        )
    finally:
        stop.set()
        t.join(5)
    jobs = [org.job(i) for i in ids]
    odd = [
        (j.request_id, j.result, j.assign_count)
        for j in jobs
        if j.result != "succeeded" or j.assign_count != 1
    ]
    assert not odd, odd
    assert all(len(c.jobs) <= 1 for c in runtime.history())
    assert {c.exit_code for c in runtime.history() if c.jobs} == {0}


def test_agents_take_the_organisations_start_up_time_at_two_points() -> None:
    from gpuci_tui.sim.records import AgentStartup

    org = SimOrg(startup=AgentStartup(register=0.4, session=0.4))
    org.add_pat(PAT)
    org.add_pool("gpu")
    runtime = SimulatedRuntime(org, destroy_delay=0.02)
    started = time.monotonic()
    runtime.start(spec(), PAT)
    wait_until(lambda: org.find_agent("gpu-1") is not None, what="the registration")
    registered = time.monotonic() - started
    agent = org.find_agent("gpu-1")
    assert agent is not None and agent.status == "offline", "registered before the session"
    wait_until(lambda: agent_online(org, "gpu-1"), what="the session")
    online = time.monotonic() - started
    assert 0.35 <= registered < 0.75 and online >= 0.75, (registered, online)
    runtime.close()


def test_sigterm_during_registration_exits_143_without_a_session(org: SimOrg) -> None:
    from gpuci_tui.sim.records import AgentStartup

    slow = SimOrg(startup=AgentStartup(register=0.2, session=5.0))
    slow.add_pat(PAT)
    slow.add_pool("gpu")
    runtime = SimulatedRuntime(slow, destroy_delay=0.02)
    rec = Recorder(runtime)
    try:
        info = runtime.start(spec(), PAT)
        wait_until(lambda: slow.find_agent("gpu-1") is not None, what="the registration")
        runtime.stop(info.id, timeout=5)
        rec.wait_for("die")
        assert rec.died() == 143
        agent = slow.find_agent("gpu-1")
        assert agent is not None and agent.status == "offline"
    finally:
        rec.close()


def test_the_output_is_followed_as_it_comes_and_the_follow_ends_with_the_container(
    org: SimOrg, runtime: SimulatedRuntime
) -> None:
    info = runtime.start(spec(), PAT)
    c = runtime.container(info.id)
    assert c is not None
    stop = threading.Event()
    seen: list[str] = []
    follower = threading.Thread(target=lambda: seen.extend(runtime.follow_output(info.id, stop)))
    follower.start()
    wait_until(lambda: any("Listening for Jobs" in line for line in seen), what="online, read")
    org.queue_job(POOL, duration=0.2)
    follower.join(10)
    assert not follower.is_alive(), "the follow ends when the container has ended"
    assert seen == c.tail(100) and any("completed with result" in line for line in seen)


def test_a_gated_agent_waits_for_its_go_file(org: SimOrg, runtime: SimulatedRuntime) -> None:
    gated = spec(required_labels={"io.gpuci.start-gate": "1"})
    gated = replace(gated, environment={**gated.environment, "AZP_GO_FILE": "/run/azp/go"})
    info = runtime.start(gated, PAT)
    c = runtime.container(info.id)
    assert c is not None
    wait_until(lambda: org.find_agent("gpu-1") is not None, what="the registration")
    wait_until(lambda: "waiting for the go file" in "".join(c.tail(5)), what="the gate's line")
    assert not agent_online(org, "gpu-1"), "no session before the go"
    runtime.put_file(info.id, "/run/azp/go", "go\n")
    wait_until(lambda: agent_online(org, "gpu-1"), what="online after the go")
    runtime.stop(info.id, timeout=5)


def test_a_start_that_needs_a_label_the_image_lacks_creates_nothing(org: SimOrg) -> None:
    runtime = SimulatedRuntime(org, start_gate=False)
    with pytest.raises(ImageLabelMissingError, match="io.gpuci.start-gate"):
        runtime.start(spec(required_labels={"io.gpuci.start-gate": "1"}), PAT)
    assert runtime.history() == []
    with pytest.raises(ContainerOperationError, match="not running"):
        runtime.put_file("nope", "/run/azp/go", "go\n")
