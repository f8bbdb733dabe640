"""The ``/metrics`` endpoint over real HTTP, a taken port, and the Azure DevOps client's
request observer against the simulated organisation."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import requests
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.azure.usage import HttpAttempt
from gpuci_tui.core.errors import AzureNotFoundError
from gpuci_tui.core.host.metrics.registry import Metrics
from gpuci_tui.core.host.metrics.server import MetricsListenError, MetricsServer
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

PAT = "metrics-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another process (here, a plain socket) is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serves_the_private_registry_and_releases_the_port() -> None:
    metrics = Metrics()
    metrics.azure_response(HttpAttempt("GET", "agents", 200, 10))
    server = MetricsServer(metrics.registry, f"127.0.0.1:{free_port()}")
    server.start()
    try:
        reply = requests.get(server.url, timeout=5)
        assert reply.status_code == 200
        families = {f.name: f for f in text_string_to_metric_families(reply.text)}
        counted = [
            s.value
            for s in families["gpuci_azure_requests"].samples
            if s.name.endswith("_total") and s.labels["route"] == "agents"
        ]
        assert counted == [1]
        # A private registry: none of the library's process/GC metrics.
        assert not any(name.startswith(("process_", "python_")) for name in families)
    finally:
        server.close()
    with socket.socket() as sock:  # released: a restarted daemon can bind it again at once
        # As servers do (the scrape's connection may linger in TIME_WAIT on this port).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", server.port))
        sock.listen()


def test_a_taken_port_is_a_clear_error(held_port: int) -> None:
    server = MetricsServer(Metrics().registry, f"127.0.0.1:{held_port}")
    with pytest.raises(MetricsListenError) as caught:
        server.start()
    assert str(caught.value) == (
        f"cannot serve metrics on 127.0.0.1:{held_port}: the port is already in use (another "
        "exporter, or another gpuci-tui run). Choose a free port in [metrics] listen = "
        f"'127.0.0.1:{held_port}' of the configuration, or remove the line to run without metrics."
    )
    server.close()  # harmless when it never started


def test_the_azure_client_reports_each_attempt() -> None:
    org = SimOrg("acme")
    org.add_pat(PAT)
    pool = org.add_pool("gpu")
    server = SimServer(org).start()
    metrics = Metrics()
    try:
        with AzureDevOpsClient(server.url, PAT, max_retries=0) as client:
            client.observe_requests(metrics.azure_response)
            client.list_agents(pool)
            with pytest.raises(AzureNotFoundError):
                client.list_agents(pool + 100)
        with AzureDevOpsClient(f"http://127.0.0.1:{free_port()}/acme", PAT, max_retries=0) as dead:
            dead.observe_requests(metrics.azure_response)
            with pytest.raises(Exception):  # noqa: B017, PT011 - the kind is tested elsewhere
                dead.list_agents(pool)
    finally:
        server.stop()
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        if family.name != "gpuci_azure_requests":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                outcome = sample.labels["outcome"]
                counts[outcome] = counts.get(outcome, 0) + sample.value
    # Every outcome is exported from the start (0 until its first request).
    assert counts == {
        "ok": 1, "client_error": 1, "network_error": 1,
        "auth_error": 0, "rate_limited": 0, "server_error": 0,
    }  # fmt: skip
