"""`PullTracker`: Docker's pull stream lines folded into layers, bytes, rate and ETA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.pull_progress import (
    PullError,
    PullProgress,
    PullTracker,
    decimal_bytes,
    duration,
)

RECORDED = Path(__file__).parents[2] / "data" / "pull" / "loopback_two_layers.jsonl"
IMAGE = "127.0.0.1:5000/agent:v2"
MB = 1_000_000


def lines() -> list[dict[str, Any]]:
    """A real stream: a 3-layer image pulled from a loopback registry, one layer already here."""
    return [json.loads(line) for line in RECORDED.read_text().splitlines()]


def test_a_recorded_pull_ends_with_every_layer_and_the_digest() -> None:
    tracker = PullTracker(IMAGE, started_at=0.0)
    seen = [tracker.feed(line, now=i * 0.1) for i, line in enumerate(lines())]
    last = seen[-1]
    assert (last.layers_done, last.layers_total) == (3, 3)
    assert last.bytes_done == last.bytes_total == 20006296 + 20006290
    assert last.digest == "sha256:d129fdd4b68a02ae8b50387e1771d720fc96ff0ea5724562650696fe306b2d9b"
    assert last.finished and last.sizes_known
    # Bytes never go back, layers done never go back.
    assert [p.bytes_done for p in seen] == sorted(p.bytes_done for p in seen)
    assert [p.layers_done for p in seen] == sorted(p.layers_done for p in seen)
    assert last.describe() == f"pulled {IMAGE} ({last.digest})"


def feed(tracker: PullTracker, now: float, **line: Any) -> PullProgress:
    return tracker.feed(line, now)


def downloading(layer: str, current: int, total: int) -> dict[str, Any]:
    return {
        "status": "Downloading",
        "id": layer,
        "progressDetail": {"current": current, "total": total},
    }


def test_rate_eta_and_the_words() -> None:
    tracker = PullTracker(IMAGE, started_at=100.0)
    feed(tracker, 100.0, status="Pulling from agent", id="v2")
    for layer in ("a", "b", "c"):
        feed(tracker, 100.0, status="Pulling fs layer", id=layer, progressDetail={})
    first = tracker.feed(downloading("a", 0, 1000 * MB), 100.0)
    # Two of three sizes unknown: no ETA, the total is what is known so far.
    assert (first.bytes_total, first.sizes_known, first.eta, first.rate) == (
        1000 * MB,
        False,
        None,
        None,
    )
    assert first.describe() == f"pulling {IMAGE}: 0/3 layers, 0 B of 1.0 GB"
    tracker.feed(downloading("b", 0, 3000 * MB), 100.5)
    tracker.feed(downloading("c", 0, 800 * MB), 100.5)
    feed(tracker, 100.5, status="Pull complete", id="c")  # e.g. a layer pulled meanwhile
    now = tracker.feed(downloading("a", 350 * MB, 1000 * MB), 110.0)
    assert now.rate == pytest.approx((350 + 800) * MB / 10.0)
    assert now.sizes_known
    assert now.eta == pytest.approx((4800 - 1150) * MB / now.rate)
    assert now.describe() == (
        f"pulling {IMAGE}: 1/3 layers, 1.1 GB of 4.8 GB, 115.0 MB/s, about 32 s"
    )


def test_the_rate_forgets_samples_older_than_its_window() -> None:
    tracker = PullTracker(IMAGE, started_at=0.0)
    tracker.feed(downloading("a", 0, 100 * MB), 0.0)
    tracker.feed(downloading("a", 90 * MB, 100 * MB), 5.0)  # fast at first
    tracker.feed(downloading("a", 91 * MB, 100 * MB), 20.0)
    slow = tracker.feed(downloading("a", 92 * MB, 100 * MB), 30.0)
    assert slow.rate == pytest.approx(1 * MB / 10.0)


def test_retrying_is_shown() -> None:
    tracker = PullTracker(IMAGE, started_at=0.0)
    tracker.feed(downloading("a", 10 * MB, 100 * MB), 0.0)
    progress = feed(tracker, 2.0, status="Retrying in 5 seconds", id="a", progressDetail={})
    assert progress.describe().endswith("retrying in 5 seconds")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            {"errorDetail": {"message": "unexpected EOF"}, "error": "unexpected EOF"},
            "unexpected EOF",
        ),
        ({"error": "write /var/lib/docker/x: no space left on device"}, "no space left"),
        ({"errorDetail": {}}, "the pull failed"),
    ],
)
def test_an_error_line_raises_docker_s_message(line: dict[str, Any], message: str) -> None:
    with pytest.raises(PullError, match=message):
        PullTracker(IMAGE, 0.0).feed(line, 1.0)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (20_006_296, "20.0 MB"),
        (4_800_000_000, "4.8 GB"),
        (2e12, "2.0 TB"),
    ],
)
def test_decimal_bytes(value: float, text: str) -> None:
    assert decimal_bytes(int(value)) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.2, "1 s"), (40, "40 s"), (100, "2 min"), (3900, "1 h 5 min")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text
