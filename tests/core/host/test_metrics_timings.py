"""Slot start-up and next-job gap, end to end: the supervisor against the simulated organisation,
the engine's measured notes into the metrics, and out of a real ``/metrics`` endpoint."""

from __future__ import annotations

import asyncio
import socket

import requests
from prometheus_client.parser import text_string_to_metric_families

from gpuci_tui.core.host.metrics.registry import Metrics, follow
from gpuci_tui.core.host.metrics.server import MetricsServer
from gpuci_tui.sim.container import AgentTiming
from gpuci_tui.sim.runtime import SimulatedRuntime
from tests.core.supervisor_env import Env, wait_until

BOOT = 0.4
"""The simulated agent's start-up: container start to registration (a real one takes ~9 s)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(url: str) -> dict[str, float]:
    """Every sample of the exposition text: ``name{label=...}`` → value (the endpoint's words)."""
    text = requests.get(url, timeout=5).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


async def test_startup_and_next_job_gap_are_observed_and_exposed(env: Env) -> None:
    env.runtime = SimulatedRuntime(env.org, destroy_delay=0.05, timing=AgentTiming(boot_delay=BOOT))
    sup = env.supervisor(count=1)
    metrics = Metrics(groups=[""])
    server = MetricsServer(metrics.registry, f"127.0.0.1:{free_port()}")
    server.start()
    following = asyncio.create_task(follow(sup, metrics))
    task = asyncio.create_task(sup.run())

    def count(family: str) -> float:
        value = metrics.registry.get_sample_value(f"{family}_count", {"group": "default"})
        return value or 0.0

    try:
        await wait_until(lambda: count("gpuci_slot_startup_seconds") >= 1, what="a start-up")
        first = env.org.queue_job(env.pool_id, duration=0.2)
        await wait_until(lambda: env.org.job(first).result == "succeeded", what="the first job")
        assert count("gpuci_slot_job_gap_seconds") == 0  # no previous job on the slot
        second = env.org.queue_job(env.pool_id, duration=0.2)
        await wait_until(lambda: env.org.job(second).result == "succeeded", what="the 2nd job")
        await wait_until(lambda: count("gpuci_slot_job_gap_seconds") == 1, what="the gap")
        await wait_until(lambda: count("gpuci_slot_startup_seconds") >= 2, what="the restart")
        samples = await asyncio.to_thread(scrape, server.url)
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
        following.cancel()
        server.close()
    startups = samples["gpuci_slot_startup_seconds_count{group=default}"]
    startup_sum = samples["gpuci_slot_startup_seconds_sum{group=default}"]
    assert startups >= 2
    # Each start-up is at least the agent's boot, and well under the first bucket above it.
    assert BOOT * startups <= startup_sum < 5 * startups
    assert samples["gpuci_slot_startup_seconds_bucket{group=default,le=5.0}"] == startups
    # With no standby, the next job waits for the replacement agent's start-up.
    gap = samples["gpuci_slot_job_gap_seconds_sum{group=default}"]
    assert samples["gpuci_slot_job_gap_seconds_count{group=default}"] == 1
    assert BOOT <= gap < 10
