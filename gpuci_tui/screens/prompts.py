"""The exact words of every confirmation: what will happen, to which agent, to which job.

Pure functions of a snapshot, so the wording is unit-tested without a terminal.
The promise "no job is killed" is only made where it is true: drain, restart
and scale-down never stop a busy agent's container.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.models import SlotSnapshot, SlotState, SupervisorSnapshot
from gpuci_tui.widgets.format import job_label

_NO_CONTAINER = frozenset({SlotState.EMPTY, SlotState.DRAINED, SlotState.BACKOFF, SlotState.PARKED})


@dataclass(frozen=True)
class Prompt:
    """A confirmation's title, body and the label of its confirm button."""

    title: str
    body: str
    confirm: str


def _busy(slot: SlotSnapshot) -> bool:
    return slot.job is not None or slot.state is SlotState.BUSY


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def drain_prompt(slot: SlotSnapshot) -> Prompt:
    """Confirm draining one agent."""
    title = f"Drain {slot.name}?"
    if _busy(slot):
        body = (
            f"It is busy with {job_label(slot.job)}: it finishes that job, then stays stopped. "
            "No job is killed."
        )
    elif slot.state in _NO_CONTAINER:
        body = "No container runs in this slot: it will not be started again."
    else:
        body = (
            "It is idle: it is disabled on the server and its container is stopped now, "
            "so it takes no new job."
        )
    body += " Nothing replaces it until you resume it (u)."
    return Prompt(title, body, "Drain")


def _verb(count: int, singular: str, plural: str) -> str:
    return singular if count == 1 else plural


def drain_all_prompt(snapshot: SupervisorSnapshot) -> Prompt:
    """Confirm draining every agent."""
    slots = snapshot.slots
    busy = sum(1 for s in slots if _busy(s))
    idle = sum(1 for s in slots if not _busy(s) and s.state not in _NO_CONTAINER)
    parts = []
    if busy:
        parts.append(
            f"{_plural(busy, 'busy agent')} {_verb(busy, 'finishes its', 'finish their')} "
            f"current job, then {_verb(busy, 'stays', 'stay')} stopped"
        )
    if idle:
        parts.append(f"{_plural(idle, 'idle agent')} {_verb(idle, 'stops', 'stop')} now")
    detail = "; ".join(parts) if parts else "no agent is running"
    body = (
        f"All {_plural(len(slots), 'agent')} are drained: {detail}. "
        "Nothing replaces them until you resume them (u on each agent). No job is killed."
    )
    return Prompt(f"Drain all {_plural(len(slots), 'agent')}?", body, "Drain all")


def restart_prompt(slot: SlotSnapshot) -> Prompt:
    """Confirm restarting one agent."""
    title = f"Restart {slot.name}?"
    if _busy(slot):
        body = (
            f"It is busy with {job_label(slot.job)}: a fresh agent replaces it after that job "
            "finishes. No job is killed."
        )
    elif slot.state in _NO_CONTAINER:
        body = f"No container runs in this slot ({slot.state}): a fresh agent is started now."
    else:
        body = "It is idle: its container is stopped and a fresh agent replaces it now."
    return Prompt(title, body, "Restart")


def restart_all_prompt(snapshot: SupervisorSnapshot) -> Prompt:
    """Confirm restarting every agent."""
    slots = snapshot.slots
    busy = sum(1 for s in slots if _busy(s))
    empty = sum(1 for s in slots if not _busy(s) and s.state in _NO_CONTAINER)
    idle = len(slots) - busy - empty
    parts = []
    if idle:
        parts.append(f"{_plural(idle, 'idle agent')} {_verb(idle, 'is', 'are')} replaced now")
    if busy:
        parts.append(
            f"{_plural(busy, 'busy agent')} {_verb(busy, 'is', 'are')} replaced after "
            f"{_verb(busy, 'its', 'their')} current job"
        )
    if empty:
        parts.append(
            f"{_plural(empty, 'slot')} without a container {_verb(empty, 'starts', 'start')} "
            "a fresh agent now"
        )
    body = "; ".join(parts) + ". No job is killed." if parts else "There are no agents."
    return Prompt(f"Restart all {_plural(len(slots), 'agent')}?", body, "Restart all")


def scale_down_prompt(snapshot: SupervisorSnapshot, new_count: int) -> Prompt:
    """Confirm removing the highest slots (they are drained, not killed)."""
    # The highest slots go, whatever number the first slot has.
    gone = sorted(snapshot.slots, key=lambda s: s.slot)[max(0, new_count) :]
    title = f"Scale down to {_plural(new_count, 'agent')}?"
    if not gone:
        body = f"The desired count goes from {snapshot.desired_count} to {new_count}."
        return Prompt(title, body, "Scale down")
    described = []
    for slot in gone:
        if _busy(slot):
            described.append(f"{slot.name} (busy with {job_label(slot.job)}: finishes it first)")
        else:
            described.append(f"{slot.name} ({slot.state})")
    body = (
        f"{', '.join(described)} will be drained and removed. "
        "Busy agents finish their current job first. No job is killed."
    )
    return Prompt(title, body, "Scale down")


def quit_body(snapshot: SupervisorSnapshot | None, mode: str) -> str:
    """What quitting means for the agents, depending on where the supervisor runs."""
    if mode == "daemon":
        pid = f" (pid {snapshot.pid})" if snapshot is not None and snapshot.pid else ""
        return (
            f"The supervisor runs as a detached daemon{pid}: quitting the console never stops it. "
            "Agents keep running and are replaced as usual."
        )
    return (
        "The supervisor runs inside this console and stops with it. Running agents keep "
        "running and finish their current job, but nothing replaces them until gpuci-tui "
        "runs again (run it as a daemon to keep agents replenished without the console)."
    )
