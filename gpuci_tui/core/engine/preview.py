"""What a command would do, slot by slot, before it is sent: the core's answer to "are you sure?".

The console's confirmations and the CLI build their words from a
`CommandPreview` instead of re-deriving the engine's rules (which slots can
be resumed, what a scale-down stops, what quitting does to busy agents).
`preview` is a pure function of a snapshot, so the same answer comes from an
in-process supervisor, from a daemon over its socket, or from a test.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.command_types import (
    Command,
    Drain,
    GpuClear,
    Pause,
    Prune,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from gpuci_tui.core.engine.commands import refusal
from gpuci_tui.core.engine.gpu_health import gpu_clear_refusal, names_gpu, nothing_to_clear
from gpuci_tui.core.models import JobInfo, SlotSnapshot, SlotState, SupervisorSnapshot

#: States in which a slot runs no container.
NO_CONTAINER = frozenset({SlotState.EMPTY, SlotState.DRAINED, SlotState.BACKOFF, SlotState.PARKED})
#: States a resume undoes.
RESUMABLE = frozenset({SlotState.DRAINING, SlotState.DRAINED, SlotState.PARKED, SlotState.BACKOFF})


class Effect:
    """What happens to one slot (plain strings: they travel in JSON)."""

    STOP_NOW = "stop_now"
    """Idle: disabled, re-checked, stopped now; not replaced."""
    REPLACE_NOW = "replace_now"
    """Idle: replaced by a fresh agent now."""
    AFTER_JOB = "after_job"
    """Busy: finishes its job first (then stops or is replaced)."""
    START_NOW = "start_now"
    """No container: a fresh agent is started now."""
    NOT_STARTED = "not_started"
    """No container: nothing is started in it any more."""
    RESUME = "resume"
    """Drained, draining, parked or backing off: started again."""
    NOTHING = "nothing"
    """Nothing to do (e.g. resuming a slot that runs normally)."""
    LEFT_RUNNING = "left_running"
    """The agent keeps running (and finishes its job), but nothing replaces it afterwards."""
    RELEASE = "release"
    """Quarantined: takes jobs again (its standby is enabled), unless the GPU fails again."""


@dataclass(frozen=True)
class SlotEffect:
    """One slot's fate under a command."""

    slot: int
    name: str
    effect: str
    state: str
    job: JobInfo | None = None
    reason: str = ""
    standby: str = ""
    """The slot's hot standby (``ready``/``booting``…): it shares the slot's fate."""


@dataclass(frozen=True)
class CommandPreview:
    """A command's effect on every slot it touches, or why it would be refused."""

    command: str
    ok: bool
    message: str = ""
    effects: tuple[SlotEffect, ...] = ()

    def count(self, effect: str) -> int:
        """How many slots get ``effect``."""
        return sum(1 for item in self.effects if item.effect == effect)

    def of(self, effect: str) -> tuple[SlotEffect, ...]:
        """The slots that get ``effect``."""
        return tuple(item for item in self.effects if item.effect == effect)


def busy(slot: SlotSnapshot) -> bool:
    """The slot's agent runs a job."""
    return slot.job is not None or slot.state is SlotState.BUSY


def resumable(slot: SlotSnapshot) -> bool:
    """A resume would change something for this slot."""
    return (
        slot.state in RESUMABLE
        or slot.intent in ("drain", "retire")
        or (slot.agent_enabled is False and slot.standby in ("", "off"))
    )


def _effect(slot: SlotSnapshot, effect: str, reason: str = "") -> SlotEffect:
    return SlotEffect(
        slot.slot, slot.name, effect, slot.state.value, slot.job, reason, slot.standby
    )


def _stop(slot: SlotSnapshot) -> SlotEffect:
    if busy(slot):
        return _effect(slot, Effect.AFTER_JOB)
    if slot.state in NO_CONTAINER:
        return _effect(slot, Effect.NOT_STARTED)
    return _effect(slot, Effect.STOP_NOW)


def _restart(slot: SlotSnapshot) -> SlotEffect:
    if busy(slot):
        return _effect(slot, Effect.AFTER_JOB)
    if slot.state in NO_CONTAINER:
        return _effect(slot, Effect.START_NOW)
    return _effect(slot, Effect.REPLACE_NOW)


def _resume(slot: SlotSnapshot) -> SlotEffect:
    if resumable(slot):
        return _effect(slot, Effect.RESUME)
    return _effect(slot, Effect.NOTHING, f"{slot.name} is {slot.state.value}: nothing to resume")


def preview(snapshot: SupervisorSnapshot, command: Command) -> CommandPreview:
    """What ``command`` would do to the slots of ``snapshot``."""
    name = type(command).__name__.lower()
    slots = sorted(snapshot.slots, key=lambda s: s.slot)
    if isinstance(command, Drain | Resume | Restart):
        wanted, group = command.slots, command.group
        if group is not None:
            slots = [s for s in slots if s.group == group]
        problem = refusal(command, [s.slot for s in slots])
        if problem is not None:
            return CommandPreview(name, False, problem)
        targets = slots if wanted is None else [s for s in slots if s.slot in wanted]
        rule = {Drain: _stop, Resume: _resume, Restart: _restart}[type(command)]
        return CommandPreview(name, True, effects=tuple(rule(slot) for slot in targets))
    if isinstance(command, Scale):
        problem = refusal(command, [s.slot for s in slots])
        if problem is not None:
            return CommandPreview(name, False, problem)
        group_slots = [s for s in slots if command.group is None or s.group == command.group]
        gone = tuple(_stop(slot) for slot in group_slots if slot.slot >= command.count)
        return CommandPreview(name, True, effects=gone)
    if isinstance(command, Stop):
        rule = _stop if command.drain else _left_running
        return CommandPreview(name, True, effects=tuple(rule(slot) for slot in slots))
    if isinstance(command, Pause | Unpause | Prune):
        return CommandPreview(name, True)  # a prune's preview is its dry run (it reads the pool)
    if isinstance(command, GpuClear):
        return preview_gpu_clear(snapshot, command.gpu)
    raise AssertionError(f"unhandled command {command!r}")


def _left_running(slot: SlotSnapshot) -> SlotEffect:
    if slot.state in NO_CONTAINER:
        return _effect(slot, Effect.NOTHING)
    return _effect(slot, Effect.LEFT_RUNNING)


def preview_gpu_clear(snapshot: SupervisorSnapshot, gpu: str) -> CommandPreview:
    """What ``gpu clear GPU`` would do: the faults forgotten and the slots released."""
    name = "gpu_clear"
    gates = snapshot.gpu_gates
    problem = gpu_clear_refusal([(g.index, g.uuid) for g in gates] if gates else None, gpu)
    if problem is not None:
        return CommandPreview(name, False, problem)
    targets = [g for g in gates if names_gpu(gpu, g.index, g.uuid)]
    quarantined = [g for g in targets if g.state == "quarantined"]
    if not quarantined:
        return CommandPreview(name, True, nothing_to_clear(g.index for g in targets))
    ids = {str(g.index) for g in quarantined} | {g.uuid for g in quarantined if g.uuid}
    released = tuple(
        _effect(slot, Effect.RELEASE, slot.gate_reason)
        for slot in sorted(snapshot.slots, key=lambda s: (s.group, s.slot))
        if slot.gate == "quarantined" and ("all" in slot.gpus or ids & set(slot.gpus))
    )
    faults = "; ".join(g.reason for g in quarantined)
    return CommandPreview(name, True, f"clears: {faults}", released)


def gpu_clear_words(answer: CommandPreview, gpu: str) -> str:
    """The confirmation text of ``gpu clear`` (the console and the CLI show the same)."""
    lines = [f"Clear GPU {gpu}? It was quarantined for: {answer.message.removeprefix('clears: ')}."]
    if answer.effects:
        names = ", ".join(e.name for e in answer.effects)
        lines.append(f"These agents take jobs again: {names}.")
    else:
        lines.append("No agent waits on it now.")
    lines.append(
        "Clear only after checking the GPU (nvidia-smi -q, the kernel log for Xid lines): a GPU "
        "that still fails is quarantined again at the next sample, but a job may fail first."
    )
    return "\n".join(lines)
