"""``/metrics`` of a real `gpuci-tui run` process (real Docker, simulated organisation),
scraped over HTTP and read with prometheus_client's own text parser."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from gpuci_tui.cli import exitcodes
from gpuci_tui.core.config.loader import MetricsConfig, save_config
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image)


def with_metrics(rig: Rig, port: int) -> str:
    """Turn metrics on in the rig's configuration; returns the scrape URL."""
    rig.config = dataclasses.replace(rig.config, metrics=MetricsConfig(f"127.0.0.1:{port}"))
    save_config(rig.config, rig.config_path)
    return f"http://127.0.0.1:{port}/metrics"


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    reply = requests.get(url, timeout=5)
    reply.raise_for_status()
    assert reply.headers["Content-Type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def get(url: str, name: str, **labels: str) -> float | None:
    return scrape(url).get((name, frozenset(labels.items())))


def settled(rig: Rig, url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """One scrape taken once both slots hold an idle agent and a ready standby.

    "Two idle agents" alone is not a state that lasts: a standby lane that was
    never registered comes up enabled (idle) and is disabled within
    milliseconds. Every slot idle with its standby ready lasts until a job
    comes, so the scrape that shows it is the one the assertions read.
    """
    wait_for(rig.all_idle, 60, "both slots idle with a ready standby")

    def steady() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        got = scrape(url)
        idle = got.get(("gpuci_agents", frozenset({("group", "default"), ("state", "idle")})))
        standby = got.get(("gpuci_agents", frozenset({("group", "default"), ("state", "standby")})))
        return got if (idle, standby) == (2, 2) else None

    return dict(wait_for(steady, 30, "two idle agents and two standbys in /metrics"))


def test_scrape_follows_agents_and_jobs(rig: Rig) -> None:
    url = with_metrics(rig, free_port())
    rig.start_daemon()
    got = settled(rig, url)
    assert got[("gpuci_slots", frozenset({("group", "default"), ("state", "idle")}))] == 2
    assert got[("gpuci_slots_desired", frozenset({("group", "default")}))] == 2
    assert got[("gpuci_docker_up", frozenset())] == 1
    assert got[("gpuci_azure_state", frozenset({("state", "ok")}))] == 1
    assert got[("gpuci_container_starts_total", frozenset({("group", "default")}))] >= 2
    # By outcome, route and code: the outcome's total is the sum over routes and codes.
    ok = [v for (n, labels), v in got.items() if n == "gpuci_azure_requests_total"
          and ("outcome", "ok") in labels]  # fmt: skip
    assert sum(ok) > 0
    agents = ("gpuci_azure_response_bytes_total", frozenset({("route", "agents")}))
    assert got[agents] > 0
    # One image series per slot, naming the id Docker gives the image the agents run.
    image = rig.config.agents.image
    image_id = rig.client.images.get(image).id
    images = {labels: v for (name, labels), v in got.items() if name == "gpuci_agent_image_info"}
    assert images == {
        frozenset(
            {("group", "default"), ("slot", str(n)), ("image", image), ("image_id", image_id)}
        ): 1
        for n in (0, 1)
    }

    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    wait_for(lambda: rig.org.job(job).result == "succeeded", what="the job")
    wait_for(lambda: get(url, "gpuci_jobs_total", group="default", result="succeeded") == 1,
             what="the finished job in /metrics")  # fmt: skip
    assert get(url, "gpuci_job_duration_seconds_count", group="default") == 1
    assert get(url, "gpuci_job_queue_wait_seconds_count", group="default") == 1
    # The slot whose agent ran the job gets an idle agent again: one replenish measured.
    wait_for(lambda: get(url, "gpuci_replenish_seconds_count", group="default") == 1,
             what="the replenish latency")  # fmt: skip
    settled(rig, url)
    status = rig.cli("status")
    assert f"Prometheus metrics: {url}" in status.stdout


def test_a_taken_port_stops_run_with_advice(rig: Rig) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with_metrics(rig, port)
        out = rig.cli("run", timeout=60)
    assert out.returncode == exitcodes.FAILED, out.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}: the port is already in use" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert rig.containers() == [], "nothing may start when the metrics port is taken"
