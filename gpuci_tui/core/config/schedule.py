"""The rules of ``[agents.standby_schedule]``: days, ``"HH:MM"`` times, counts and a time zone.

The table (docs/standby.md, "Standby schedule")::

    [agents.standby_schedule]
    time_zone = "Europe/Berlin"               # IANA name; default UTC
    weekdays = { "08:00" = 3, "19:00" = 1 }   # monday..friday
    saturday = { "00:00" = 0 }

Day keys: ``monday`` .. ``sunday``, and the shorthands ``weekdays`` (Monday to
Friday), ``weekend`` (Saturday, Sunday) and ``every_day``. A more specific key
replaces a shorthand's entries for its days (``friday`` over ``weekdays`` over
``every_day``), it does not merge with them. The evaluation is
`engine.standby_schedule`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpuci_tui.core.config.file import ConfigError, raise_if_any, show
from gpuci_tui.core.config.model import AgentsConfig
from gpuci_tui.core.config.validate import MAX_STANDBY, check_keys
from gpuci_tui.core.engine.standby.schedule import DAYS, Entries, StandbySchedule

__all__ = ["SCHEDULE_KEYS", "check_schedule_limit", "check_standby_bounds", "parse_schedule"]

#: Shorthands for several days, from the broadest (applied first, overridden by narrower keys).
_GROUPS = {"every_day": DAYS, "weekdays": DAYS[:5], "weekend": DAYS[5:]}
#: Every key the table may hold.
SCHEDULE_KEYS = ("time_zone", *_GROUPS, *DAYS)
_TIME = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?")
_EXAMPLE = 'weekdays = { "08:00" = 3, "19:00" = 1 }'


def parse_schedule(value: object, key: str = "agents.standby_schedule") -> StandbySchedule | None:
    """Check a standby schedule table and build it (None stays None: no schedule).

    Every problem is reported, each under its own dotted key
    (``agents.standby_schedule.monday``); counts are checked against the
    deepest standby here, and against ``standby_max`` by `check_schedule_limit`.
    """
    if value is None:
        return None
    if isinstance(value, StandbySchedule):  # a Config built in memory: same rules as the file
        value = value.to_toml()
    if not isinstance(value, Mapping):
        problem = f"must be a table ([{key}]) of days and times, e.g. {_EXAMPLE}; got {show(value)}"
        raise ConfigError(problem, key=key)
    errors = check_keys(value, key, SCHEDULE_KEYS)
    zone = "UTC"
    if "time_zone" in value:
        try:
            zone = _zone(value["time_zone"], f"{key}.time_zone")
        except ConfigError as exc:
            errors.extend(exc.errors)
    days: dict[str, Entries] = {}
    for name in (*_GROUPS, *DAYS):  # broadest first: a narrower key replaces its days
        if name not in value:
            continue
        try:
            entries = _entries(value[name], f"{key}.{name}")
        except ConfigError as exc:
            errors.extend(exc.errors)
            continue
        days.update(dict.fromkeys(_GROUPS.get(name, (name,)), entries))
    if not errors and not any(days.values()):
        problem = f"has no times; give at least one day, e.g. {_EXAMPLE}"
        errors.append(ConfigError(problem, key=key))
    raise_if_any(errors)
    return StandbySchedule(zone, tuple(days.get(name, ()) for name in DAYS))


def check_schedule_limit(where: str, values: Mapping[str, Any]) -> list[ConfigError]:
    """With ``standby = "auto"``, no scheduled count above ``standby_max`` (its lane limit).

    Args:
        where: ``agents`` or ``groups.NAME``.
        values: That table's checked values (absent ones take their defaults).
    """
    schedule = values.get("standby_schedule")
    if not isinstance(schedule, StandbySchedule) or values.get("standby") != "auto":
        return []
    most = values.get("standby_max", AgentsConfig.standby_max)
    errors = []
    for name, entries in zip(DAYS, schedule.days, strict=True):
        over = [count for _, count in entries if count > most]
        if over:
            problem = (
                f'gives {max(over)} standbys, more than standby_max ({most}) allows with standby = "auto"; '
                f"lower the count or raise standby_max"
            )
            errors.append(ConfigError(problem, key=f"{where}.standby_schedule.{name}"))
    return errors


def check_standby_bounds(where: str, values: Mapping[str, Any]) -> list[ConfigError]:
    """With ``standby = "auto"``, ``standby_min`` at most ``standby_max``.

    The engine would quietly keep the larger as both bounds (`standby.auto.depth_of`), so
    the file would not say what runs: refused instead, naming the default when one is unset.

    Args:
        where: ``agents`` or ``groups.NAME``.
        values: That table's checked values (absent ones take their defaults).
    """
    if values.get("standby") != "auto":
        return []
    least = values.get("standby_min", AgentsConfig.standby_min)
    most = values.get("standby_max", AgentsConfig.standby_max)
    if least <= most:
        return []
    said = "" if "standby_max" in values else ", the default"
    problem = (
        f'is {least}, above standby_max ({most}{said}): "auto" keeps standby_min standbys '
        f"while idle and at most standby_max; lower standby_min to {most} or raise standby_max"
    )
    return [ConfigError(problem, key=f"{where}.standby_min")]


def _zone(value: object, key: str) -> str:
    advice = 'use an IANA name such as "Europe/Berlin", "America/New_York" or "UTC"'
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"must be a time zone name; {advice}; got {show(value)}", key=key)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        hint = (
            " (Windows names, as Managed DevOps Pools uses, are not IANA names)"
            if " " in value
            else ""
        )
        raise ConfigError(
            f"is not a known time zone{hint}; {advice}; got {show(value)}", key=key
        ) from None
    return value


def _entries(value: object, key: str) -> Entries:
    if not isinstance(value, Mapping):
        problem = (
            f'must map "HH:MM" times to standby counts, e.g. {{ "08:00" = 3 }}; got {show(value)}'
        )
        raise ConfigError(problem, key=key)
    entries: dict[int, int] = {}
    for text, count in value.items():
        match = _TIME.fullmatch(str(text))
        if match is None:
            problem = f'has the time {show(text)}; write times as "HH:MM", 24-hour, from "00:00" to "23:59"'
            raise ConfigError(problem, key=key)
        hours, minutes, seconds = (int(part or 0) for part in match.groups())
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_STANDBY:
            problem = (
                f"gives {show(count)} standbys at {text}; a count is a whole number "
                f"from 0 to {MAX_STANDBY} (the deepest standby)"
            )
            raise ConfigError(problem, key=key)
        entries[hours * 3600 + minutes * 60 + seconds] = count
    return tuple(sorted(entries.items()))
