"""Progress of one image pull, aggregated from Docker's pull stream (pure).

Docker answers ``POST /images/create`` with one JSON object per line, per layer
(docker-py's ``api.pull(..., stream=True, decode=True)`` yields them decoded)::

    {"status": "Pulling fs layer", "id": "c290affa8dcc", "progressDetail": {}}
    {"status": "Downloading", "id": "c290affa8dcc",
     "progressDetail": {"current": 203776, "total": 20006296}}
    {"status": "Download complete", "id": "c290affa8dcc"}
    {"status": "Extracting", ...}  {"status": "Pull complete", "id": "c290affa8dcc"}
    {"status": "Digest: sha256:d129…"}  {"status": "Status: Downloaded newer image for …"}
    {"error": "…", "errorDetail": {"message": "…"}}

`PullTracker` folds those lines into a `PullProgress`: layers done of layers
known, bytes downloaded of the bytes announced so far, the rate over the last
seconds and an ETA. Time comes from the caller (tests use a fake clock). A
layer's size is known only once its download starts, so the byte total grows
during a pull; the ETA is given only when every layer's size is known.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Seconds of samples the rate is measured over (a pull's rate varies by layer).
RATE_WINDOW = 10.0

_DONE = frozenset({"Pull complete", "Already exists"})
#: The layer's bytes are all here (extraction follows).
_DOWNLOADED = frozenset({"Verifying Checksum", "Download complete", "Extracting"})


@dataclass(frozen=True)
class PullProgress:
    """Where one pull stands."""

    image: str
    layers_done: int = 0
    layers_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    """The sizes of the layers whose download has started (it grows during a pull)."""
    sizes_known: bool = False
    """Every layer's size is known (``bytes_total`` is final)."""
    rate: float | None = None
    """Bytes per second over the last `RATE_WINDOW` seconds (None: not measured yet)."""
    eta: float | None = None
    """Seconds left at ``rate`` (None: unknown)."""
    digest: str = ""
    """The manifest digest Docker reports at the end (``sha256:…``)."""
    status: str = ""
    """Docker's last overall status line (``Retrying in 5 seconds`` shows a flaky registry)."""
    finished: bool = False

    def describe(self) -> str:
        """``pulling IMAGE: 3/7 layers, 1.2 GB of 4.8 GB, 35 MB/s, about 2 min``."""
        if self.finished:
            return f"pulled {self.image}" + (f" ({self.digest})" if self.digest else "")
        parts: list[str] = []
        if self.layers_total:
            parts.append(f"{self.layers_done}/{self.layers_total} layers")
        if self.bytes_total:
            parts.append(f"{decimal_bytes(self.bytes_done)} of {decimal_bytes(self.bytes_total)}")
        if self.rate:
            parts.append(f"{decimal_bytes(int(self.rate))}/s")
        if self.eta is not None:
            parts.append(f"about {duration(self.eta)}")
        if self.status.startswith("Retrying"):
            parts.append(self.status.lower())
        detail = ", ".join(parts) or "starting"
        return f"pulling {self.image}: {detail}"


class PullError(Exception):
    """The pull stream carried an error line (the pull failed on the engine's side)."""


@dataclass
class _Layer:
    current: int = 0
    total: int | None = None
    done: bool = False


class PullTracker:
    """Folds pull stream lines into a `PullProgress` (one tracker per pull)."""

    def __init__(self, image: str, started_at: float) -> None:
        """Track the pull of ``image`` that began at ``started_at``."""
        self.image = image
        self._layers: dict[str, _Layer] = {}
        self._samples: deque[tuple[float, int]] = deque([(started_at, 0)])
        self._digest = ""
        self._status = ""
        self._finished = False
        self._rate: float | None = None

    def feed(self, line: Mapping[str, Any], now: float) -> PullProgress:
        """Fold one stream line in and return the progress after it.

        Raises:
            PullError: the line is an error (Docker's own message).
        """
        if "error" in line or "errorDetail" in line:
            detail = line.get("errorDetail") or {}
            message = detail.get("message") if isinstance(detail, Mapping) else None
            raise PullError(str(message or line.get("error") or "the pull failed"))
        status = str(line.get("status") or "")
        layer_id = line.get("id")
        if layer_id and status and not status.startswith("Pulling from"):
            self._layer_line(str(layer_id), status, line.get("progressDetail"))
        elif status.startswith("Digest: "):
            self._digest = status.removeprefix("Digest: ").strip()
        elif status.startswith("Status: "):
            self._finished = True
        if status and not layer_id:
            self._status = status
        return self._progress(now)

    def _layer_line(self, layer_id: str, status: str, detail: object) -> None:
        layer = self._layers.setdefault(layer_id, _Layer())
        if status in _DONE:
            layer.done = True
            if layer.total is not None:
                layer.current = layer.total
            return
        if status == "Downloading" and isinstance(detail, Mapping):
            current, total = detail.get("current"), detail.get("total")
            if isinstance(total, int) and total > 0:
                layer.total = total
            if isinstance(current, int):
                layer.current = max(layer.current, current)
        elif status in _DOWNLOADED and layer.total is not None:
            layer.current = layer.total
        if status.startswith("Retrying"):
            self._status = status

    def _progress(self, now: float) -> PullProgress:
        layers = list(self._layers.values())
        # "Already exists" layers are done without a download: not counted in bytes.
        sized = [layer for layer in layers if layer.total is not None]
        done_bytes = sum(layer.current for layer in sized)
        total_bytes = sum(layer.total or 0 for layer in sized)
        sizes_known = bool(layers) and all(
            layer.done or layer.total is not None for layer in layers
        )
        self._sample(now, done_bytes)
        eta = None
        if sizes_known and self._rate and not self._finished:
            eta = max(0.0, (total_bytes - done_bytes) / self._rate)
        return PullProgress(
            image=self.image,
            layers_done=sum(1 for layer in layers if layer.done),
            layers_total=len(layers),
            bytes_done=done_bytes,
            bytes_total=total_bytes,
            sizes_known=sizes_known,
            rate=self._rate,
            eta=eta,
            digest=self._digest,
            status=self._status,
            finished=self._finished,
        )

    def _sample(self, now: float, done_bytes: int) -> None:
        samples = self._samples
        samples.append((now, done_bytes))
        while len(samples) > 2 and samples[1][0] <= now - RATE_WINDOW:
            samples.popleft()
        first_at, first_bytes = samples[0]
        # Under a second of samples says little: the first progress line arrives in a burst.
        if now - first_at >= 1.0:
            self._rate = max(0.0, (done_bytes - first_bytes) / (now - first_at))


def decimal_bytes(value: int) -> str:
    """``1.2 GB``-style text in Docker's own (decimal) units, as its progress bars show."""
    size = float(value)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(size) < 1000:
            return f"{size:.0f} {unit}" if unit in ("B", "kB") else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def duration(seconds: float) -> str:
    """``40 s``, ``2 min``, ``1 h 5 min``: an ETA in rounded words."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
