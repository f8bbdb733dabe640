"""The standby schedule (Managed DevOps Pools' semantics) as tables on a fake clock.

Each row: a schedule, an instant (UTC), the count in force and the instant of
the next change. Europe/Berlin's 2026 changes: spring forward on 29 March at
01:00 UTC (02:00 CET -> 03:00 CEST), back on 25 October at 01:00 UTC (03:00
CEST -> 02:00 CET).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpuci_tui.core.engine.standby.schedule import (
    DAYS,
    Entries,
    Scheduled,
    StandbySchedule,
    in_force,
    time_text,
)


def at(year: int, month: int, day: int, hour: int, minute: int, second: int) -> float:
    """An instant given in UTC."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def hm(text: str) -> int:
    hours, minutes = text.split(":")
    return int(hours) * 3600 + int(minutes) * 60


def schedule(zone: str = "Europe/Berlin", **days: dict[str, int]) -> StandbySchedule:
    """A schedule from day name -> {"HH:MM": count}; ``weekdays`` fills Monday to Friday."""
    table: dict[str, Entries] = {}
    for name, entries in days.items():
        parsed = tuple(sorted((hm(t), c) for t, c in entries.items()))
        for day in DAYS[:5] if name == "weekdays" else (name,):
            table[day] = parsed
    return StandbySchedule(zone, tuple(table.get(day, ()) for day in DAYS))


OFFICE = schedule(weekdays={"08:00": 3, "19:00": 1}, saturday={"00:00": 0})
"""The README's example: 3 in office hours, 1 on weekday nights, none at the weekend."""
SPRING = schedule(sunday={"01:00": 1, "02:30": 5, "04:00": 2})
"""An entry inside the hour the clock skips on 29 March 2026."""
AUTUMN = schedule(sunday={"01:00": 1, "02:30": 5, "04:00": 2})
ONE_ENTRY = schedule("UTC", wednesday={"10:00": 2})
WRAP = schedule("UTC", sunday={"22:00": 4}, monday={"06:00": 0})

# name, schedule, now, count, next change (None: never)
ROWS: list[tuple[str, StandbySchedule, float, int, float | None]] = [
    ("Monday before 08:00: Saturday's 0 carried across Sunday (no entries)",
     OFFICE, at(2026, 11, 23, 6, 59, 59), 0, at(2026, 11, 23, 7, 0, 0)),
    ("the exact second of a change: the new count",
     OFFICE, at(2026, 11, 23, 7, 0, 0), 3, at(2026, 11, 23, 18, 0, 0)),
    ("one second before 19:00 local", OFFICE, at(2026, 11, 23, 17, 59, 59), 3,
     at(2026, 11, 23, 18, 0, 0)),
    ("past midnight: Monday's 19:00 count holds into Tuesday",
     OFFICE, at(2026, 11, 23, 23, 30, 0), 1, at(2026, 11, 24, 7, 0, 0)),
    ("Friday night: 1 until Saturday 00:00", OFFICE, at(2026, 11, 27, 22, 0, 0), 1,
     at(2026, 11, 27, 23, 0, 0)),
    ("a day with no entries (Sunday): Saturday's count", OFFICE, at(2026, 11, 29, 12, 0, 0),
     0, at(2026, 11, 30, 7, 0, 0)),
    ("the week wraps: Sunday 22:00's count holds into Monday",
     WRAP, at(2026, 11, 30, 3, 0, 0), 4, at(2026, 11, 30, 6, 0, 0)),
    ("the week wraps: Monday 06:00's 0 holds until Sunday 22:00",
     WRAP, at(2026, 11, 28, 12, 0, 0), 0, at(2026, 11, 29, 22, 0, 0)),
    ("one entry all week: it always holds, no change ever",
     ONE_ENTRY, at(2026, 11, 24, 9, 0, 0), 2, None),
    ("winter: 08:00 Berlin is 07:00 UTC", OFFICE, at(2026, 3, 23, 7, 0, 0), 3,
     at(2026, 3, 23, 18, 0, 0)),
    ("summer: 08:00 Berlin is 06:00 UTC (a second before: still 0)",
     OFFICE, at(2026, 3, 30, 5, 59, 59), 0, at(2026, 3, 30, 6, 0, 0)),
    ("summer: 08:00 Berlin is 06:00 UTC", OFFICE, at(2026, 3, 30, 6, 0, 0), 3,
     at(2026, 3, 30, 17, 0, 0)),
    ("spring forward: 02:30 is skipped; it waits for the jump at 03:00 CEST",
     SPRING, at(2026, 3, 29, 0, 59, 59), 1, at(2026, 3, 29, 1, 0, 0)),
    ("spring forward: the skipped 02:30 applies the second the clock jumps",
     SPRING, at(2026, 3, 29, 1, 0, 0), 5, at(2026, 3, 29, 2, 0, 0)),
    ("fall back: 02:30 applies the first time (00:30 UTC)",
     AUTUMN, at(2026, 10, 25, 0, 30, 0), 5, at(2026, 10, 25, 3, 0, 0)),
    ("fall back: a second before the first 02:30", AUTUMN, at(2026, 10, 25, 0, 29, 59), 1,
     at(2026, 10, 25, 0, 30, 0)),
    ("fall back: the repeated hour changes nothing (02:30 again, 01:30 UTC)",
     AUTUMN, at(2026, 10, 25, 1, 30, 0), 5, at(2026, 10, 25, 3, 0, 0)),
    ("fall back: 08:00 on Monday is 07:00 UTC again", OFFICE, at(2026, 10, 26, 7, 0, 0), 3,
     at(2026, 10, 26, 18, 0, 0)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("plan", "now", "count", "next_at"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_count_in_force(
    plan: StandbySchedule, now: float, count: int, next_at: float | None
) -> None:
    got = in_force(plan, now)
    assert got is not None
    assert (got.count, got.next_at) == (count, next_at)


def test_next_change_skips_entries_that_keep_the_count() -> None:
    plan = schedule("UTC", weekdays={"08:00": 2, "12:00": 2, "19:00": 0})
    got = in_force(plan, at(2026, 11, 23, 9, 0, 0))
    assert got == Scheduled(2, at(2026, 11, 23, 19, 0, 0), 0, "schedule: 2 until 19:00 (UTC)")


def test_labels() -> None:
    monday = in_force(OFFICE, at(2026, 11, 23, 9, 0, 0))
    assert monday is not None and monday.label == "schedule: 3 until 19:00 (Europe/Berlin)"
    friday = in_force(OFFICE, at(2026, 11, 27, 19, 0, 0))
    assert friday is not None and friday.label == "schedule: 1 until Sat 00:00 (Europe/Berlin)"
    steady = in_force(ONE_ENTRY, 0.0)
    assert steady is not None and steady.label == "schedule: 2 (UTC)"


def test_no_entries_no_count() -> None:
    assert in_force(StandbySchedule("UTC"), at(2026, 11, 23, 9, 0, 0)) is None


def test_table_as_written() -> None:
    assert time_text(hm("08:00")) == "08:00" and time_text(hm("08:00") + 5) == "08:00:05"
    assert OFFICE.to_toml()["friday"] == {"08:00": 3, "19:00": 1}
    assert "sunday" not in OFFICE.to_toml()
    assert OFFICE.words() == "Europe/Berlin: mon-fri 08:00=3 19:00=1, sat 00:00=0"
    assert WRAP.words() == "UTC: mon 06:00=0, sun 22:00=4"
