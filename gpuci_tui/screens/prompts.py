"""The exact words of every confirmation: what will happen, to which agent, to which job.

The console does not work out what a command does: it asks the core
(`SupervisorHandle.preview`), which answers slot by slot with the engine's
own rules, and these pure functions only put that answer into words, so the
wording is unit-tested without a terminal. The promise "no job is killed" is
only made where it is true: drain, restart and scale-down never stop a busy
agent's container.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuci_tui.core.engine.preview import CommandPreview, Effect, SlotEffect
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.wording import plural
from gpuci_tui.widgets.format import job_label

_WITH_STANDBY = frozenset({"ready", "booting"})


@dataclass(frozen=True)
class Prompt:
    """A confirmation's title, body and the label of its confirm button."""

    title: str
    body: str
    confirm: str

    def on(self, host: str) -> Prompt:
        """The same confirmation, its title naming the host it acts on (a fleet host's).

        ``Drain gpu3-2?`` becomes ``Drain gpu3-2 on gpu-node-17.lab.example.org?``.
        """
        title = self.title.removesuffix("?")
        return replace(self, title=f"{title} on {host}?")


def _verb(count: int, singular: str, plural: str) -> str:
    return singular if count == 1 else plural


def _standbys(preview: CommandPreview) -> int:
    return sum(1 for item in preview.effects if item.standby in _WITH_STANDBY)


def _one(preview: CommandPreview) -> SlotEffect:
    if len(preview.effects) != 1:
        raise ValueError(f"expected the preview of one slot, got {len(preview.effects)}")
    return preview.effects[0]


def drain_prompt(preview: CommandPreview) -> Prompt:
    """Confirm draining one agent."""
    slot = _one(preview)
    title = f"Drain {slot.name}?"
    standby = slot.standby in _WITH_STANDBY
    if slot.effect == Effect.AFTER_JOB:
        body = f"It is busy with {job_label(slot.job)}: it finishes that job, then stays stopped."
        if standby:
            body += " Its standby agent is stopped now."
        body += " No job is killed."
    elif slot.effect == Effect.NOT_STARTED:
        body = "No container runs in this slot: it will not be started again."
    elif standby:
        body = (
            "It is idle: it and its standby agent are disabled on the server and stopped now, "
            "so neither takes a new job."
        )
    else:
        body = (
            "It is idle: it is disabled on the server and its container is stopped now, "
            "so it takes no new job."
        )
    body += " Nothing replaces it until you resume it (u)."
    return Prompt(title, body, "Drain")


def drain_all_prompt(preview: CommandPreview) -> Prompt:
    """Confirm draining every agent."""
    total = len(preview.effects)
    busy = preview.count(Effect.AFTER_JOB)
    idle = preview.count(Effect.STOP_NOW)
    parts = []
    if busy:
        parts.append(
            f"{plural(busy, 'busy agent')} {_verb(busy, 'finishes its', 'finish their')} "
            f"current job, then {_verb(busy, 'stays', 'stay')} stopped"
        )
    if idle:
        parts.append(f"{plural(idle, 'idle agent')} {_verb(idle, 'stops', 'stop')} now")
    if standbys := _standbys(preview):
        parts.append(f"{plural(standbys, 'standby agent')} {_verb(standbys, 'stops', 'stop')} now")
    detail = "; ".join(parts) if parts else "no agent is running"
    body = (
        f"All {plural(total, 'agent')} are drained: {detail}. "
        "Nothing replaces them until you resume them (u on each agent). No job is killed."
    )
    return Prompt(f"Drain all {plural(total, 'agent')}?", body, "Drain all")


def restart_prompt(preview: CommandPreview) -> Prompt:
    """Confirm restarting one agent."""
    slot = _one(preview)
    title = f"Restart {slot.name}?"
    if slot.effect == Effect.AFTER_JOB:
        body = (
            f"It is busy with {job_label(slot.job)}: a fresh agent replaces it after that job "
            "finishes. No job is killed."
        )
    elif slot.effect == Effect.START_NOW:
        body = f"No container runs in this slot ({slot.state}): a fresh agent is started now."
    elif slot.standby in _WITH_STANDBY:
        body = (
            "It is idle: a fresh standby agent is started first, then it hands over and is "
            "replaced, so the slot keeps taking jobs."
        )
    else:
        body = "It is idle: its container is stopped and a fresh agent replaces it now."
    return Prompt(title, body, "Restart")


def restart_all_prompt(preview: CommandPreview) -> Prompt:
    """Confirm restarting every agent."""
    total = len(preview.effects)
    busy = preview.count(Effect.AFTER_JOB)
    empty = preview.count(Effect.START_NOW)
    idle = preview.count(Effect.REPLACE_NOW)
    parts = []
    if idle:
        parts.append(f"{plural(idle, 'idle agent')} {_verb(idle, 'is', 'are')} replaced now")
    if busy:
        parts.append(
            f"{plural(busy, 'busy agent')} {_verb(busy, 'is', 'are')} replaced after "
            f"{_verb(busy, 'its', 'their')} current job"
        )
    if empty:
        parts.append(
            f"{plural(empty, 'slot')} without a container {_verb(empty, 'starts', 'start')} "
            "a fresh agent now"
        )
    body = "; ".join(parts) + ". No job is killed." if parts else "There are no agents."
    if parts and _standbys(preview):
        body += " Slots with a ready standby hand over to a fresh one first and keep taking jobs."
    return Prompt(f"Restart all {plural(total, 'agent')}?", body, "Restart all")


def scale_down_prompt(preview: CommandPreview, desired: int, new_count: int) -> Prompt:
    """Confirm removing the highest slots (they are drained, not killed)."""
    title = f"Scale down to {plural(new_count, 'agent')}?"
    if not preview.effects:
        body = f"The desired count goes from {desired} to {new_count}."
        return Prompt(title, body, "Scale down")
    described = []
    for slot in preview.effects:
        if slot.effect == Effect.AFTER_JOB:
            described.append(f"{slot.name} (busy with {job_label(slot.job)}: finishes it first)")
        else:
            described.append(f"{slot.name} ({slot.state})")
    body = (
        f"{', '.join(described)} will be drained and removed. "
        "Busy agents finish their current job first. No job is killed."
    )
    return Prompt(title, body, "Scale down")


def quit_body(
    snapshot: SupervisorSnapshot | None, mode: str, stop: CommandPreview | None = None
) -> str:
    """What quitting means for the agents, depending on where the supervisor runs.

    ``stop`` is the core's preview of stopping the supervisor (agents left running);
    with it, the busy agents that keep running are counted. ``demo``: the demo, whose
    end removes everything it made.
    """
    if mode == "demo":
        return (
            "This is the demo: quitting ends it. Its daemon, simulated organisation and "
            "agents stop, and everything it made (its folder, containers, registry) is removed."
        )
    if mode == "daemon":
        pid = f", pid {snapshot.pid}" if snapshot is not None and snapshot.pid else ""
        # Not "detached": a `gpuci-tui run` in another terminal, or under systemd, is a
        # daemon of its own as much as one this console started in the background.
        return (
            f"The supervisor is a daemon of its own (gpuci-tui run{pid}): quitting the console "
            "never stops it. Agents keep running and are replaced as usual."
        )
    busy = (
        0
        if stop is None
        else sum(1 for item in stop.of(Effect.LEFT_RUNNING) if item.job is not None)
    )
    running = (
        "Running agents keep running and finish their current job"
        if not busy
        else f"Running agents keep running ({plural(busy, 'busy agent')} "
        f"{_verb(busy, 'finishes its', 'finish their')} current job)"
    )
    return (
        f"The supervisor runs inside this console and stops with it. {running}, but nothing "
        "replaces them until gpuci-tui runs again (run it as a daemon to keep agents "
        "replenished without the console)."
    )


def reload_prompt(preview: CommandPreview) -> Prompt:
    """Confirm a reload: the supervisor's dry run of the file as it is now, in its words."""
    lines = preview.message.splitlines()
    # The first line names the file ("reload /etc/gpuci-tui/config.toml:"): it is the title's.
    body = "\n".join(line.strip() for line in lines[1:]) or preview.message
    if "overrides dropped (--reset-overrides)" in preview.message:
        return Prompt("Reload and drop the overrides?", f"{body}\nNo job is killed.", "Reload")
    if "the configuration file has no change" in preview.message:
        return Prompt("Reload the configuration?", body, "Reload anyway")
    return Prompt("Reload the configuration?", f"{body}\nNo job is killed.", "Reload")
