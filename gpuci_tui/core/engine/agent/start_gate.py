"""Where a gated container is at the start gate (dockeragent/start.sh's go file).

An image with the label ``io.gpuci.start-gate=1`` runs a start.sh that registers
its agent (config.sh), prints ``[start.sh] registered as NAME; waiting for the go
file PATH`` and waits for the daemon to put that file into the container before
it starts the agent (run.sh). Until then the agent has no session, so it can take
no job: a lane name may be registered for the first time (it comes up *enabled*)
at any time, also next to a busy lane, and the daemon sets the flag it needs
(disabled, for a standby) before it gives the go.
"""

from __future__ import annotations

from enum import StrEnum


class GoState(StrEnum):
    """Where a lane's container is at the start gate (`LaneRecord.go`)."""

    NONE = "none"
    """No gate: the agent starts on its own (an image without the label)."""
    HELD = "held"
    """Waits for our go: no session, so no job."""
    GIVEN = "given"
    """Our go is delivered or on its way: the agent may have a session."""
    ASSUMED = "assumed"
    """Adopted: it may be past the gate (counted as given; the go is sent again if it
    says it still waits)."""
    REFUSED = "refused"
    """The go file could not be written: still held, and stopped (a failed start)."""
