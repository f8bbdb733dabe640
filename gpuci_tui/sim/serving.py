"""What a request of the simulated organisation needs of the server it came to.

`sim.handler` answers requests; `sim.server` serves them and imports the handler.
The handler reads its server through these protocols instead of importing it back,
so the two modules form no import circle.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

from gpuci_tui.sim.org import SimOrg


class Served(Protocol):
    """What a request reads of the simulated organisation's server (`SimServer`)."""

    org: SimOrg
    stopping: threading.Event

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        ...

    @property
    def org_url(self) -> str:
        """The URL with the organisation segment."""
        ...

    def log(self, line: str) -> None:
        """Keep one line of the request log."""
        ...


class Serving(Protocol):
    """The HTTP server a request came to (the server's ``_HTTPServer``)."""

    sim: Served

    def request_started(self) -> None:
        """A request is being answered."""
        ...

    def request_done(self) -> None:
        """Its answer is written."""
        ...

    def cut_signal(self, connection: Any) -> AbstractContextManager[threading.Event]:
        """An event set if ``connection`` is cut while its request is being answered."""
        ...
