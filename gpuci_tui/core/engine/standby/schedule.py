"""A standby schedule with Managed DevOps Pools' "manual" semantics, evaluated on the engine's clock.

Managed DevOps Pools' manual standby predictions give a time zone and, per
weekday, ``"time": count`` entries: a count holds from its time until the next
entry, which may be later that day or on any following day, so it carries over
midnight and across days without entries, and the week wraps (Sunday's last
entry holds into Monday). gpuci-tui keeps those semantics with IANA zone names
(``[agents.standby_schedule]``, parsed by `config.schedule`).

Times are the zone's wall-clock times, so a change stays at 08:00 local across
daylight saving. A time the clock skips (spring forward: 02:30 in Berlin on the
last Sunday of March) takes effect the moment the clock jumps past it; a time
the clock shows twice (autumn) takes effect the first time, once.

Pure: the time is the engine's (epoch seconds); `zoneinfo` maps it to the zone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["DAYS", "Scheduled", "StandbySchedule", "in_force", "time_text"]

#: Day names, Monday first (`datetime.weekday` order).
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

#: Local days looked at around now: a week back (every weekday's entries are past)
#: and more than a week ahead (every weekday's next entries are ahead).
_BACK, _SPAN = 7, 16

Entries = tuple[tuple[int, int], ...]
"""One day's entries: (second of the local day, standby count), in time order."""


@dataclass(frozen=True)
class StandbySchedule:
    """``[agents.standby_schedule]``: standby lanes per slot by weekday and time of day."""

    time_zone: str = "UTC"
    """IANA zone name the times are read in, e.g. ``Europe/Berlin``."""
    days: tuple[Entries, ...] = ((),) * 7
    """Per weekday, Monday first: the entries that start on that day."""

    def to_toml(self) -> dict[str, object]:
        """The table as the file writes it: the zone and one map per day with entries."""
        table: dict[str, object] = {"time_zone": self.time_zone}
        for name, entries in zip(DAYS, self.days, strict=True):
            if entries:
                table[name] = {time_text(second): count for second, count in entries}
        return table

    def words(self) -> str:
        """Short, one line: ``Europe/Berlin: mon-fri 08:00=3 19:00=1, sat 00:00=0``."""
        parts: list[str] = []
        first = 0
        while first < len(DAYS):
            last = first
            while last + 1 < len(DAYS) and self.days[last + 1] == self.days[first]:
                last += 1  # consecutive days alike are written once
            if self.days[first]:
                name = DAYS[first][:3] + (f"-{DAYS[last][:3]}" if last > first else "")
                times = " ".join(f"{time_text(s)}={c}" for s, c in self.days[first])
                parts.append(f"{name} {times}")
            first = last + 1
        return f"{self.time_zone}: {', '.join(parts)}"


@dataclass(frozen=True)
class Scheduled:
    """The schedule as evaluated at one time."""

    count: int
    """Standby lanes per slot in force."""
    next_at: float | None = None
    """When the count next changes (epoch seconds); None: it never does."""
    next_count: int | None = None
    """The count from ``next_at`` on."""
    label: str = ""
    """For people: ``schedule: 3 until 19:00 (Europe/Berlin)``."""


def time_text(second: int) -> str:
    """A second of the day as ``HH:MM`` (``HH:MM:SS`` when it has seconds)."""
    hours, rest = divmod(second, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def in_force(schedule: StandbySchedule, now: float) -> Scheduled | None:
    """The count ``schedule`` gives at ``now``, and its next change; None with no entries.

    An entry takes effect at the exact second its time is reached (``now``
    equal to it counts).
    """
    zone = ZoneInfo(schedule.time_zone)
    today = datetime.fromtimestamp(now, zone).date()
    changes = _changes(schedule, zone, today - timedelta(days=_BACK))
    if not changes:
        return None
    count = 0
    for at, value in changes:
        if at > now:
            break
        count = value  # the week back holds every weekday's entries: one is always past
    upcoming = next(((at, value) for at, value in changes if at > now and value != count), None)
    if upcoming is None:
        return Scheduled(count, label=f"schedule: {count} ({schedule.time_zone})")
    at, value = upcoming
    local = datetime.fromtimestamp(at, zone)
    when = time_text(local.hour * 3600 + local.minute * 60 + local.second)
    if local.date() != today:
        when = f"{DAYS[local.weekday()][:3].capitalize()} {when}"
    label = f"schedule: {count} until {when} ({schedule.time_zone})"
    return Scheduled(count, at, value, label)


@functools.lru_cache(maxsize=8)
def _changes(
    schedule: StandbySchedule, zone: ZoneInfo, first: date
) -> tuple[tuple[float, int], ...]:
    """(instant, count) of every entry on the local days from ``first``, in time order.

    Two entries the clock skips land on the same instant; the stable sort keeps
    them in written order, so the later one wins, as it would have on the clock.
    Kept for the last few days asked (the planner asks on every plan, and the
    answer changes once a day).
    """
    out: list[tuple[float, int]] = []
    for offset in range(_SPAN):
        day = first + timedelta(days=offset)
        out.extend(
            (_instant(zone, day, second), count) for second, count in schedule.days[day.weekday()]
        )
    out.sort(key=lambda change: change[0])
    return tuple(out)


def _instant(zone: ZoneInfo, day: date, second: int) -> float:
    """The first instant at which the zone's clock reads ``second`` into ``day`` or later."""
    naive = datetime(day.year, day.month, day.day) + timedelta(seconds=second)
    # fold=0: of the two instants an autumn hour shows a time at, the first.
    first = naive.replace(tzinfo=zone).timestamp()
    if _wall(first, zone) == naive:
        return first
    # Skipped by the clock: fold=0 reads it with the offset before the jump (too late),
    # fold=1 with the one after (too early); the jump lies between, found to the second.
    low, high = int(naive.replace(tzinfo=zone, fold=1).timestamp()), int(first)
    while high - low > 1:
        mid = (low + high) // 2
        if _wall(mid, zone) >= naive:
            high = mid
        else:
            low = mid
    return float(high)


def _wall(at: float, zone: ZoneInfo) -> datetime:
    """The zone's wall-clock reading at ``at``, without the zone."""
    return datetime.fromtimestamp(at, zone).replace(tzinfo=None)
