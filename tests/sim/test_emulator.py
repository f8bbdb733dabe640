"""The busybox agent emulator in real Docker containers against a SimServer on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.host.images.agent_cache import AgentPackageCache
from gpuci_tui.sim import image as image_mod
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.image import HASH_LABEL, EmulatorImageError, build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

from .conftest import PAT, TOKEN_PATH, token_tar, wait_until

POOL = 42

pytestmark = pytest.mark.docker


@pytest.fixture
def server(org: SimOrg) -> Iterator[SimServer]:
    org.heartbeat_timeout = 3.0  # containers heartbeat every second
    with SimServer(org) as s:
        yield s


def start_agent(
    client: Any,
    image: str,
    server: SimServer,
    run_label: str,
    name: str,
    token: str = PAT,
    **kw: Any,
) -> Any:
    """create → put_archive(token) → start, the way the supervisor does it."""
    container = client.containers.create(
        image,
        name=f"{name}-{run_label}",
        network_mode="host",
        labels={"gpuci.test": run_label},
        environment={
            "AZP_URL": server.org_url,
            "AZP_POOL": "gpu",
            "AZP_AGENT_NAME": name,
            "AZP_TOKEN_FILE": TOKEN_PATH,
            "AZP_WORK": "/azp/_work",
        },
        **kw,
    )
    assert container.put_archive("/", token_tar(token))
    container.start()
    return container


def online(org: SimOrg, name: str) -> bool:
    agent = org.find_agent(name)
    return agent is not None and agent.status == "online"


def proc_text(container: Any) -> str:
    """Every process's argv and environment inside the container."""
    result = container.exec_run(["sh", "-c", "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ"])
    return str(result.output.decode(errors="replace"))


def test_registers_takes_one_job_and_exits_0_without_leaking_the_pat(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-1")
    wait_until(lambda: online(org, "emu-1"), 10, "the emulator to register")
    assert c.exec_run(["test", "-e", TOKEN_PATH]).exit_code == 1, "token file not deleted"
    assert "nc" in proc_text(c) and PAT not in proc_text(c)  # idle, long-polling
    rid = org.queue_job(POOL, duration=2.5)
    wait_until(lambda: org.job(rid).state == "running", 10, "the job to start")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # busy: sleeping and heartbeating
        assert PAT not in proc_text(c)
    assert c.wait(timeout=20)["StatusCode"] == 0
    job = org.job(rid)
    assert job.result == "succeeded" and job.agent_name == "emu-1" and job.assign_count == 1
    agent = org.find_agent("emu-1")
    assert agent is not None and agent.status == "offline"
    assert agent.capabilities["HOSTNAME"] == c.attrs["Config"]["Hostname"]
    assert agent.capabilities["AZP_POOL"] == "gpu" and "AZP_TOKEN_FILE" not in agent.capabilities
    logs = c.logs().decode()
    assert f"registered as emu-1 (id {agent.id})" in logs
    assert f"job {rid} started" in logs and f"job {rid} succeeded" in logs
    c.reload()
    assert PAT not in json.dumps(c.attrs) and PAT not in logs


def test_sigterm_while_idle_goes_offline_and_exits_143(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-2")
    wait_until(lambda: online(org, "emu-2"), 10, "the emulator to register")
    wait_until(lambda: org.find_agent("emu-2").active_polls == 1, 5, "the long poll")  # type: ignore[union-attr]
    started = time.monotonic()
    c.kill(signal="SIGTERM")
    assert c.wait(timeout=5)["StatusCode"] == 143
    assert time.monotonic() - started < 2.0
    assert not online(org, "emu-2")
    assert "SIGTERM while idle: went offline" in c.logs().decode()


def test_sigterm_while_busy_finishes_the_job_then_exits_0(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-3")
    rid = org.queue_job(POOL, duration=2.0)
    wait_until(lambda: org.job(rid).state == "running", 10, "the job to start")
    c.kill(signal="SIGTERM")
    assert c.wait(timeout=15)["StatusCode"] == 0
    assert org.job(rid).result == "succeeded"


def test_failing_job_reports_failed(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-4")
    rid = org.queue_job(POOL, duration=0.5, kind="fail")
    assert c.wait(timeout=15)["StatusCode"] == 0
    assert org.job(rid).result == "failed"


def test_oom_job_is_killed_by_the_kernel(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(
        docker_client,
        emulator_image,
        server,
        run_label,
        "emu-5",
        mem_limit="24m",
        memswap_limit="24m",
        oom_score_adj=1000,
    )
    rid = org.queue_job(POOL, duration=5, kind="oom")
    status = c.wait(timeout=30)["StatusCode"]
    c.reload()
    assert c.attrs["State"]["OOMKilled"] is True and status == 137
    assert org.wait_for(lambda o: o.job(rid).result == "abandoned", timeout=10)


def test_bad_pat_exits_1_with_a_plain_message(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    bad = "bad-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456"
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-6", token=bad)
    assert c.wait(timeout=10)["StatusCode"] == 1
    err = c.logs(stdout=False, stderr=True).decode()
    assert "rejected the PAT (401)" in err and "Agent Pools" in err
    assert bad not in c.logs().decode()
    assert org.find_agent("emu-6") is None


def test_unreachable_org_at_registration_exits_1(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    org.faults.unreachable()
    wait_until(lambda: not server.listening, what="the port to close")
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-7")
    assert c.wait(timeout=10)["StatusCode"] == 1
    assert "cannot reach" in c.logs(stdout=False, stderr=True).decode()


def test_image_build_is_idempotent_and_follows_the_script(
    docker_client: Any, emulator_image: str, run_label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = docker_client.images.get(emulator_image)
    assert build_emulator_image(docker_client) == emulator_image
    assert docker_client.images.get(emulator_image).id == first.id
    tag = f"gpuci-sim/agent-test:{run_label}"
    try:
        build_emulator_image(docker_client, tag)
        before = docker_client.images.get(tag)
        assert before.labels[HASH_LABEL] == first.labels[HASH_LABEL]
        script = image_mod.agent_script() + b"\n# changed\n"
        monkeypatch.setattr(image_mod, "agent_script", lambda: script)
        build_emulator_image(docker_client, tag)
        after = docker_client.images.get(tag)
        assert after.id != before.id and after.labels[HASH_LABEL] != before.labels[HASH_LABEL]
    finally:
        docker_client.images.remove(tag, force=True)


def test_a_dynamic_busybox_is_refused(docker_client: Any) -> None:
    with pytest.raises(EmulatorImageError, match="not a statically linked busybox"):
        build_emulator_image(docker_client, "gpuci-sim/never:1", busybox="/bin/ls")
    with pytest.raises(EmulatorImageError, match="busybox-static"):
        build_emulator_image(docker_client, "gpuci-sim/never:1", busybox="/nonexistent/busybox")


def test_with_a_newer_package_mounted_it_reports_that_version_and_takes_the_job(
    docker_client: Any,
    emulator_image: str,
    org: SimOrg,
    server: SimServer,
    run_label: str,
    tmp_path: Path,
) -> None:
    # issue 20: the daemon's cache, fetched from the organisation's own package list.
    org.require_agent_version("4.270.0")
    api = SimPoolApi(org, PAT)
    api.download_base = server.url
    [pkg] = [p for p in api.agent_packages("linux-x64") if p.version == "4.270.0"]
    cached = AgentPackageCache(tmp_path / "cache").ensure(pkg)
    assert org.packages.downloads == {pkg.filename: 1}
    mount = {str(cached): {"bind": "/azp/agent-package", "mode": "ro"}}
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-new", volumes=mount)
    wait_until(lambda: online(org, "emu-new"), 10, "the emulator to register")
    agent = org.find_agent("emu-new")
    assert agent is not None and agent.version == "4.270.0"
    rid = org.queue_job(POOL, duration=0.5)
    assert c.wait(timeout=20)["StatusCode"] == 0
    assert org.job(rid).result == "succeeded"
    assert "using agent 4.270.0 from the package mounted at /azp/agent-package" in c.logs().decode()


def test_without_it_the_out_of_date_emulator_leaves_to_update_and_the_job_waits(
    docker_client: Any, emulator_image: str, org: SimOrg, server: SimServer, run_label: str
) -> None:
    c = start_agent(docker_client, emulator_image, server, run_label, "emu-old")
    wait_until(lambda: online(org, "emu-old"), 10, "the emulator to register")
    org.require_agent_version("4.270.0")
    rid = org.queue_job(POOL, duration=0.5)
    assert c.wait(timeout=20)["StatusCode"] == 12
    job = org.job(rid)
    assert job.state == "queued" and job.assign_count == 0
    assert "Agent.Version -gtVersion 4.270.0" in job.demands
    agent = org.find_agent("emu-old")
    assert agent is not None and agent.status == "offline" and agent.version == "4.264.2"
