"""The metrics endpoint under a flood of idle, half-sent connections from another user.

Before: one thread per connection; ~1,000 such connections exhausted the daemon's
file descriptors. Now one thread serves every client, at most `max_clients` at
once, and a half-sent request is dropped after the timeout.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

import pytest
import requests

from gpuci_tui.core.host.metrics.registry import Metrics
from gpuci_tui.core.host.metrics.server import MetricsServer
from tests.badinput.users import flood, local_user, open_fds
from tests.waiting import wait_until

CAP = 8


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(url: str) -> int | None:
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None


@pytest.mark.root
def test_a_flood_from_another_user_costs_one_thread_and_a_bounded_set_of_fds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MetricsServer(
        Metrics().registry, f"127.0.0.1:{free_port()}", max_clients=CAP, timeout=1.5
    )
    threads_before = threading.active_count()
    fds_before = open_fds(os.getpid())
    server.start()
    caplog.set_level(logging.WARNING, logger="gpuci_tui.metrics")
    try:
        with local_user() as user, flood(f"127.0.0.1:{server.port}", 400, user=user):
            wait_until(lambda: server.rejected >= 300, 30, "extra connections closed")
            assert server.clients <= CAP
            # One serving thread in all, and only the capped clients hold descriptors.
            assert threading.active_count() == threads_before + 1
            # (plus the listener, the loop's epoll and wake-up pipe, the flood's two pipes)
            assert open_fds(os.getpid()) <= fds_before + CAP + 8
            # The half-sent requests time out, after which scrapes are served again.
            assert wait_until(lambda: scrape(server.url) == 200, 30, "a scrape served")
        assert server.clients == 0 or wait_until(lambda: server.clients == 0, 10, "clients gone")
    finally:
        server.close()
    assert threading.active_count() == threads_before
    busy = [r for r in caplog.records if "clients already connected" in r.getMessage()]
    assert 1 <= len(busy) <= 2, "the busy warning is rate-limited"


def test_junk_requests_get_an_answer_or_a_close_never_a_hang() -> None:
    server = MetricsServer(Metrics().registry, f"127.0.0.1:{free_port()}", timeout=1.0)
    server.start()
    try:
        for request, expect in (
            (b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
            (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", b"404"),
            (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", b""),
            (b"\x00\xff\r\n\r\n", b"405"),
            (b"GET /metrics", b""),  # never finished: closed after the timeout
        ):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(request)
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                assert data.split(b" ")[1:2] == ([expect] if expect else []), (request[:20], data)
        assert scrape(server.url) == 200
    finally:
        server.close()
