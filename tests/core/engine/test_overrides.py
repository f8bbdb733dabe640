"""Runtime overrides (`engine.overrides`): recorded with their time, shown beside the file, reset.

Issue 28: a runtime ``scale`` silently won over the file's ``count``; nothing said
why ``status`` showed 1 where the file says 3. Tables over the pure functions:
what each command records, what the snapshot says, what survives a restart (and
what an older intent file meant), and what a reset drops.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from gpuci_tui.core.command_types import Drain, Pause, Resume, Scale, Stop, Unpause
from gpuci_tui.core.engine.commands import (
    apply_command,
    intent_data,
    overrides_in_force,
    reset_overrides,
    restore_intent,
)
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, new_slot
from gpuci_tui.core.engine.overrides import Overrides
from gpuci_tui.core.models import RuntimeOverride
from gpuci_tui.core.wording import override_words

AT = time.mktime((2026, 3, 2, 10, 2, 0, 0, 0, -1))
"""10:02 local time, on a day of its own."""


def fresh(count: int = 3) -> EngineState:
    """The state a group starts with from a file whose count is ``count``."""
    return EngineState("gpu", count, tuple(new_slot("gpu", n) for n in range(count)))


@pytest.mark.parametrize(
    ("commands", "expected"),
    [
        ([Scale(1)], [RuntimeOverride("scale", "", AT, "1", "3")]),
        ([Pause()], [RuntimeOverride("pause", "", AT)]),
        ([Pause(), Unpause()], []),
        ([Drain((2,))], [RuntimeOverride("drain", "", AT, "2")]),
        ([Drain((1, 2)), Resume((1,))], [RuntimeOverride("drain", "", AT, "2")]),
        ([Drain(None)], [RuntimeOverride("drain", "", AT, str(n)) for n in range(3)]),
        # A scale-down retires the slots above the count: they are the scale's, not drains.
        ([Scale(5), Scale(1)], [RuntimeOverride("scale", "", AT, "1", "3")]),
        # A stop that drains leaves every slot drained (kept across the restart); a stop
        # that does not leaves nothing; a refused command records nothing.
        ([Stop(drain=True)], [RuntimeOverride("drain", "", AT, str(n)) for n in range(3)]),
        ([Stop()], []),
        ([Drain((7,))], []),
    ],
)
def test_what_each_command_records_and_the_snapshot_shows(
    commands: list[object], expected: list[RuntimeOverride]
) -> None:
    state = fresh()
    for command in commands:
        state, _ = apply_command(state, command, at=AT)  # type: ignore[arg-type]
    assert list(overrides_in_force(state, file_count=3)) == expected


def test_the_engine_s_own_scale_records_no_override() -> None:
    state, _ = apply_command(fresh(), Scale(5))  # a reload's new count: no time, no override
    assert state.desired == 5 and overrides_in_force(state, file_count=5) == ()


def test_each_override_in_words_beside_the_file() -> None:
    now = AT + 60
    words = [
        override_words(o, now)
        for o in (
            RuntimeOverride("scale", "", AT, "1", "3"),
            RuntimeOverride("scale", "cuda12", AT, "1", "3"),
            RuntimeOverride("pause", "", AT),
            RuntimeOverride("drain", "cuda12", None, "cuda12/2"),
        )
    ]
    assert words == [
        "count 1, scaled at 10:02; the file says 3",
        "group cuda12: count 1, scaled at 10:02; the file says 3",
        "replenishing paused at 10:02; the file keeps every slot filled",
        "slot cuda12/2 drained; the file runs it",
    ]
    yesterday = override_words(RuntimeOverride("pause", "", AT), AT + 86400)
    assert yesterday == "replenishing paused at 2026-03-02 10:02; the file keeps every slot filled"


def test_overrides_survive_a_restart_with_their_times() -> None:
    state = fresh()
    for command, at in ((Scale(1), AT), (Pause(), AT + 1), (Drain((0,)), AT + 2)):
        state, _ = apply_command(state, command, at=at)
    saved = json.loads(json.dumps({**intent_data(state), "saved_at": AT + 9}))
    restored = restore_intent(fresh(), saved)
    assert overrides_in_force(restored, file_count=3) == (
        RuntimeOverride("scale", "", AT, "1", "3"),
        RuntimeOverride("pause", "", AT + 1),
        RuntimeOverride("drain", "", AT + 2, "0"),
    )


def test_a_count_the_file_changed_while_down_is_the_file_s_unless_it_was_a_scale() -> None:
    # The count followed the file (no scale): the file's new count (5) wins at the restart.
    followed = intent_data(fresh(3))
    assert restore_intent(fresh(5), followed).desired == 5
    # It was a scale: it holds over the file, and says since when.
    scaled, _ = apply_command(fresh(3), Scale(2), at=AT)
    restored = restore_intent(fresh(5), intent_data(scaled))
    assert restored.desired == 2
    assert overrides_in_force(restored, file_count=5)[0] == RuntimeOverride(
        "scale", "", AT, "2", "5"
    )


def test_an_older_intent_file_s_overrides_date_from_when_it_was_saved() -> None:
    older = {"count": 1, "paused": True, "drained": [0], "saved_at": AT}
    restored = restore_intent(fresh(3), older)
    assert overrides_in_force(restored, file_count=3) == (
        RuntimeOverride("scale", "", AT, "1", "3"),
        RuntimeOverride("pause", "", AT),
        RuntimeOverride("drain", "", AT, "0"),
    )
    # Its count equal to the file's was no scale.
    assert restore_intent(fresh(3), {"count": 3}).overrides == Overrides()


def test_a_reset_runs_the_file_again() -> None:
    state = fresh()
    for command in (Scale(1), Pause(), Drain((0,))):
        state, _ = apply_command(state, command, at=AT)
    state, result = reset_overrides(state, file_count=3)
    assert result.ok
    assert result.message == (
        "overrides dropped: count 1 -> 3 (the file's); replenishing resumed; resumed gpu-0"
    )
    assert state.desired == 3 and not state.paused
    assert all(s.intent is Intent.RUN for s in state.slots)
    assert overrides_in_force(state, file_count=3) == ()
    _, again = reset_overrides(state, file_count=3)
    assert again.message == "no override in force: the group runs the file"


def test_a_reset_keeps_slots_a_scale_down_retires_retiring() -> None:
    state, _ = apply_command(fresh(), Scale(5), at=AT)
    state = replace(state, overrides=Overrides(scaled_at=AT))
    state, result = reset_overrides(state, file_count=3)
    assert state.desired == 3 and result.message.startswith("overrides dropped: count 5 -> 3")
    assert [s.intent for s in state.slots if s.number >= 3] == [Intent.RETIRE, Intent.RETIRE]
