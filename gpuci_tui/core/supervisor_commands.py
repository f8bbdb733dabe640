"""The supervisor's commands (drain, resume, restart, scale, pause, stop) and operator intent.

Split from `supervisor.py` to keep each module about one thing; `CommandsMixin`
only manipulates `SlotRecord`s, the I/O happens in the supervisor's loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .models import (
    Command,
    CommandResult,
    Drain,
    Pause,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from .slots import SlotRecord

if TYPE_CHECKING:
    from .azure_sync import AzureSync

MAX_SLOTS = 64


class CommandsMixin:
    """Command handling for `Supervisor` (which provides the attributes declared here)."""

    records: dict[int, SlotRecord]
    desired: int
    paused: bool
    azure: AzureSync
    _intent: Any

    def _record(self, slot: int, create: bool = True) -> SlotRecord:
        raise NotImplementedError

    def request_stop(self, drain: bool = False) -> None:
        raise NotImplementedError

    def _targets(self, slots: tuple[int, ...] | None) -> tuple[list[SlotRecord], list[int]]:
        if slots is None:
            return sorted(self.records.values(), key=lambda r: r.slot), []
        found = [self.records[s] for s in slots if s in self.records]
        unknown = [s for s in slots if s not in self.records]
        return found, unknown

    def _execute(self, command: Command) -> CommandResult:
        if isinstance(command, Drain | Resume | Restart):
            records, unknown = self._targets(command.slots)
            if unknown:
                valid = ", ".join(str(s) for s in sorted(self.records)) or "none"
                bad = ", ".join(map(str, unknown))
                return CommandResult(False, f"no such slot: {bad} (slots are {valid})")
            if isinstance(command, Drain):
                return self._drain(command.slots)
            if isinstance(command, Resume):
                for rec in records:
                    rec.resume()
                    self.azure.want_enabled(rec)
                return CommandResult(True, f"resumed {_names(records)}", _nums(records))
            return self._restart(records)
        if isinstance(command, Scale):
            return self._scale(command.count)
        if isinstance(command, Pause):
            self.paused = True
            return CommandResult(
                True, "replenishing paused: running agents stay, exited ones are not replaced"
            )
        if isinstance(command, Unpause):
            self.paused = False
            return CommandResult(True, "replenishing resumed")
        if isinstance(command, Stop):
            self.request_stop(command.drain)
            if command.drain:
                return CommandResult(True, "draining every agent, then stopping the supervisor")
            return CommandResult(True, "supervisor stopping; agents left running")
        raise AssertionError(f"unhandled command {command!r}")

    def _drain(self, slots: tuple[int, ...] | None) -> CommandResult:
        records, _ = self._targets(slots)
        busy = 0
        for rec in records:
            rec.drain = True
            rec.restart = False
            if not rec.has_container:
                rec.drained = True
                rec.backoff_until = None
                rec.message = "drained"
            else:
                busy += rec.job is not None
                rec.message = "draining: disabling the agent on the server"
        idle = sum(1 for r in records if r.has_container) - busy
        parts = [f"draining {_names(records)}"]
        if busy:
            parts.append(f"{busy} busy (finish their job first)")
        if idle:
            parts.append(f"{idle} not busy (stopped once disabled and re-checked)")
        return CommandResult(True, "; ".join(parts), _nums(records))

    def _restart(self, records: list[SlotRecord]) -> CommandResult:
        later = now = 0
        for rec in records:
            if rec.parked or rec.drained or rec.backoff_until:
                rec.resume()
                now += 1
            elif rec.has_container:
                rec.restart = True
                if rec.job is not None:
                    later += 1
                    rec.message = "restart after the running job"
                else:
                    now += 1
                    rec.message = "restarting: disabling, re-checking, then replacing"
        text = f"restarting {_names(records)}"
        if later:
            text += f"; {later} busy agent(s) are replaced after their job"
        return CommandResult(True, text, _nums(records))

    def _scale(self, count: int) -> CommandResult:
        if not 1 <= count <= MAX_SLOTS:
            return CommandResult(False, f"scale: count must be from 1 to {MAX_SLOTS}, got {count}")
        old = self.desired
        self.desired = count
        for slot in range(count):
            rec = self._record(slot)
            if rec.retire:
                rec.resume()
        retiring = [rec for rec in self.records.values() if rec.slot >= count]
        for rec in retiring:
            rec.retire = True
        if retiring:
            self._drain(tuple(r.slot for r in retiring))
        return CommandResult(True, f"scaled from {old} to {count} slots", tuple(range(count)))

    def _load_intent(self) -> None:
        if self._intent is None:
            return
        data = self._intent.load() or {}
        count = data.get("count")
        if isinstance(count, int) and 1 <= count <= MAX_SLOTS:
            self.desired = count
        self.paused = bool(data.get("paused", False))
        for slot in data.get("drained", []):
            if isinstance(slot, int) and 0 <= slot < self.desired:
                rec = self._record(slot)
                rec.drain = rec.drained = True
                rec.message = "drained"

    def _save_intent(self) -> None:
        if self._intent is None:
            return
        drained = sorted(r.slot for r in self.records.values() if r.drain and not r.retire)
        self._intent.save({"count": self.desired, "paused": self.paused, "drained": drained})


def _names(records: list[SlotRecord]) -> str:
    if not records:
        return "no slots"
    return ", ".join(r.name for r in records)


def _nums(records: list[SlotRecord]) -> tuple[int, ...]:
    return tuple(r.slot for r in records)
