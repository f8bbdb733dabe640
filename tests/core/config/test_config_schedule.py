"""``[agents.standby_schedule]``: days, "HH:MM" times, counts and a zone; refusals; saved and read back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from gpuci_tui.core.engine.standby.schedule import StandbySchedule
from tests.core.config_helpers import base_doc, problems, write

OFFICE = {
    "time_zone": "Europe/Berlin",
    "weekdays": {"08:00": 3, "19:00": 1},
    "saturday": {"00:00": 0},
}
WORKDAY = ((8 * 3600, 3), (19 * 3600, 1))


def doc_with(schedule: object, **agents: Any) -> dict[str, Any]:
    doc = base_doc()
    doc["agents"].update(agents, standby_schedule=schedule)
    return doc


def loaded(tmp_path: Path, schedule: object, **agents: Any) -> StandbySchedule | None:
    return load_config(
        write(tmp_path / "config.toml", doc_with(schedule, **agents))
    ).agents.standby_schedule


def test_the_readme_example(tmp_path: Path) -> None:
    assert loaded(tmp_path, OFFICE) == StandbySchedule(
        "Europe/Berlin", (WORKDAY,) * 5 + (((0, 0),), ())
    )


def test_no_schedule_by_default(tmp_path: Path) -> None:
    assert load_config(write(tmp_path / "config.toml", base_doc())).agents.standby_schedule is None


def test_a_named_day_replaces_what_a_shorthand_gives_it(tmp_path: Path) -> None:
    schedule = {
        "every_day": {"00:00": 1},
        "weekend": {"10:00": 0},
        "weekdays": {"08:00": 3, "19:00": 1},
        "friday": {"08:00": 2, "16:00:30": 0},
    }
    got = loaded(tmp_path, schedule)
    assert got is not None and got.time_zone == "UTC"
    assert (
        got.days
        == (WORKDAY,) * 4 + (((8 * 3600, 2), (16 * 3600 + 30, 0)),) + (((10 * 3600, 0),),) * 2
    )


def test_every_day_alone_holds_all_week(tmp_path: Path) -> None:
    got = loaded(tmp_path, {"every_day": {"07:30": 2}})
    assert got is not None and got.days == (((7 * 3600 + 1800, 2),),) * 7


def test_saved_and_read_back(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "in.toml", doc_with(OFFICE, standby="auto")))
    save_config(config, tmp_path / "out.toml")
    again = load_config(tmp_path / "out.toml")
    assert again.agents.standby_schedule == config.agents.standby_schedule
    assert "[agents.standby_schedule]" in (tmp_path / "out.toml").read_text()
    # Built in memory (the wizard): the same rules as the file.
    bad = replace(config.agents.standby_schedule, time_zone="Mars/Olympus")  # type: ignore[type-var]
    with pytest.raises(Exception, match="is not a known time zone"):
        save_config(
            replace(config, agents=replace(config.agents, standby_schedule=bad)),
            tmp_path / "x.toml",
        )


ZONE_ADVICE = 'use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"'

REFUSALS: list[tuple[str, object, dict[str, Any], str]] = [
    ("unknown day", {"mondays": {"08:00": 1}}, {},
     'agents.standby_schedule.mondays: unknown key; did you mean "monday"? allowed: time_zone, '
     "every_day, weekdays, weekend, monday, tuesday, wednesday, thursday, friday, saturday, sunday"),
    ("hour without a leading zero", {"monday": {"8:00": 1}}, {},
     'agents.standby_schedule.monday: has the time "8:00"; write times as "HH:MM", 24-hour, '
     'from "00:00" to "23:59"'),
    ("24:00", {"monday": {"24:00": 1}}, {},
     'agents.standby_schedule.monday: has the time "24:00"; write times as "HH:MM", 24-hour, '
     'from "00:00" to "23:59"'),
    ("count above the deepest standby", {"monday": {"08:00": 8}}, {},
     "agents.standby_schedule.monday: gives 8 standbys at 08:00; a count is a whole number from "
     "0 to 7 (the deepest standby)"),
    ("count true", {"monday": {"08:00": True}}, {},
     "agents.standby_schedule.monday: gives true standbys at 08:00; a count is a whole number "
     "from 0 to 7 (the deepest standby)"),
    ("a day that is not a table", {"monday": 3}, {},
     'agents.standby_schedule.monday: must map "HH:MM" times to standby counts, e.g. '
     '{ "08:00" = 3 }; got 3'),
    ("unknown zone", {"time_zone": "Berlin", "monday": {"08:00": 1}}, {},
     f'agents.standby_schedule.time_zone: is not a known time zone; {ZONE_ADVICE}; got "Berlin"'),
    ("a Windows zone name", {"time_zone": "W. Europe Standard Time", "monday": {"08:00": 1}}, {},
     "agents.standby_schedule.time_zone: is not a known time zone (Windows names, as Managed "
     f'DevOps Pools uses, are not IANA names); {ZONE_ADVICE}; got "W. Europe Standard Time"'),
    ("a path as zone", {"time_zone": "../../etc/passwd", "monday": {"08:00": 1}}, {},
     "agents.standby_schedule.time_zone: is not a known time zone; "
     f'{ZONE_ADVICE}; got "../../etc/passwd"'),
    ("no times", {"time_zone": "UTC"}, {},
     'agents.standby_schedule: has no times; give at least one day, e.g. weekdays = { "08:00" = 3, '
     '"19:00" = 1 }'),
    ("not a table", "weekdays 8-19", {},
     "agents.standby_schedule: must be a table ([agents.standby_schedule]) of days and times, e.g. "
     'weekdays = { "08:00" = 3, "19:00" = 1 }; got "weekdays 8-19"'),
    ("above standby_max with auto", {"weekdays": {"08:00": 4}}, {"standby": "auto"},
     'agents.standby_schedule.monday: gives 4 standbys, more than standby_max (3) allows with '
     'standby = "auto"; lower the count or raise standby_max'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schedule", "agents", "expected"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_refusals_say_what_to_do(
    tmp_path: Path, schedule: object, agents: dict[str, Any], expected: str
) -> None:
    assert problems(tmp_path, doc_with(schedule, **agents))[0] == expected


def test_every_problem_is_listed(tmp_path: Path) -> None:
    schedule = {"time_zone": "Nowhere", "monday": {"25:00": 1}, "funday": {"08:00": 1}}
    assert [line.split(":")[0] for line in problems(tmp_path, doc_with(schedule))] == [
        "agents.standby_schedule.funday",
        "agents.standby_schedule.time_zone",
        "agents.standby_schedule.monday",
    ]


def test_a_group_is_checked_under_its_own_name(tmp_path: Path) -> None:
    doc = base_doc()
    doc["groups"] = {
        "big": {"standby": "auto", "standby_max": 2, "standby_schedule": {"sunday": {"12:00": 3}}}
    }
    assert problems(tmp_path, doc) == [
        "groups.big.standby_schedule.sunday: gives 3 standbys, more than standby_max (2) allows "
        'with standby = "auto"; lower the count or raise standby_max'
    ]
