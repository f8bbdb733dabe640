"""A roll-out kept across a daemon restart (`commands.intent_data`, `host.rollout_intent`).

Tables on the engine's record (saved, restored, dropped when the file names another
spec) and on the old spec's configuration the host saves beside it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.config.loader import Config, config_hash
from gpuci_tui.core.config.model import AgentsConfig, AzureConfig, VolumeConfig
from gpuci_tui.core.engine.commands import intent_data, restore_intent
from gpuci_tui.core.engine.lifecycle import EngineState, new_slot
from gpuci_tui.core.engine.rollout.progress import begin, roll_back
from gpuci_tui.core.engine.rollout.state import Phase, Rollout, rollout_data, rollout_from
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.host.supervision.rollout_intent import (
    load_intent,
    save_data,
    spec_config,
    spec_values,
)

OLD = Config(
    azure=AzureConfig(url="https://dev.azure.com/org", pool="gpu"),
    agents=AgentsConfig(
        count=3, image="ci:v1", name_prefix="h", gpus="list", gpu_ids=("0", "1"),
        volumes=(VolumeConfig("/data", "/mnt/data", "DATA"),), mem_limit="8g",
    ),
)  # fmt: skip
NEW = replace(OLD, agents=replace(OLD.agents, image="ci:v2"))


def state(config: Config = NEW) -> EngineState:
    slots = tuple(new_slot("h", n) for n in range(3))
    return EngineState("h", 3, slots, spec=config_hash(config))


def canarying() -> EngineState:
    before = replace(state(), spec=config_hash(OLD))
    after, rollout = begin(before, config_hash(NEW), image_from="ci:v1", image_to="ci:v2",
                           canary=1, canary_jobs=2, at=5.0)  # fmt: skip
    assert rollout is not None and rollout.phase is Phase.CANARY
    return replace(after, rollout=replace(rollout, successes=1, failures=((0, 1),)))


def saved(engine: EngineState) -> dict[str, Any]:
    """What the intent file holds (through JSON, as on disk)."""
    data: dict[str, Any] = json.loads(json.dumps(save_data(engine, {config_hash(OLD): OLD})))
    return data


# ----------------------------------------------------------------------------- the engine's record


def test_the_record_round_trips_through_json() -> None:
    rollout = canarying().rollout
    assert rollout is not None
    assert rollout_from(json.loads(json.dumps(rollout_data(rollout)))) == rollout


RESTORE: list[tuple[str, Config, bool]] = [
    ("the file still names the new spec: kept", NEW, True),
    ("the file went back to the old spec while down: dropped", OLD, False),
    ("the file names a third spec: dropped (a new change)",
     replace(OLD, agents=replace(OLD.agents, image="ci:v3")), False),
]  # fmt: skip


@pytest.mark.parametrize(("file", "kept"), [r[1:] for r in RESTORE], ids=[r[0] for r in RESTORE])
def test_restore_keeps_the_roll_out_only_while_the_file_names_its_spec(
    file: Config, kept: bool
) -> None:
    data = intent_data(canarying())
    restored = restore_intent(state(file), json.loads(json.dumps(data)))
    assert (restored.rollout == canarying().rollout) is kept
    assert (restored.rollout is None) is not kept


@pytest.mark.parametrize(
    "bad",
    [None, "x", {}, {"from_spec": "a"}, {**rollout_data(Rollout("a", "b", "i", "j", Phase.CANARY)),
     "phase": "sideways"}, {**rollout_data(Rollout("a", "b", "i", "j", Phase.CANARY)),
     "canary": [True]}, {**rollout_data(Rollout("a", "b", "i", "j", Phase.CANARY)), "to_spec": ""}],
)  # fmt: skip
def test_a_malformed_record_is_ignored_never_fatal(bad: object) -> None:
    assert rollout_from(bad) is None
    assert restore_intent(state(), {"count": 3, "rollout": bad}).rollout is None


# ----------------------------------------------------------------------------- the host's half


class Sup:
    """The part of a supervisor `load_intent` reads and sets."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.state = state(config)
        self.reporter = Broadcaster(lambda: 0.0)
        self.specs: dict[str, Config] = {config_hash(config): config}


def test_the_old_spec_s_values_build_the_same_spec_over_the_file_s_configuration() -> None:
    values = json.loads(json.dumps(spec_values(OLD)))
    rebuilt = spec_config(replace(NEW, agents=replace(NEW.agents, count=5)), values)
    assert rebuilt is not None and config_hash(rebuilt) == config_hash(OLD)
    assert rebuilt.agents.count == 5  # what is not the spec comes from the file
    assert spec_config(NEW, {"image": "x"}) is None


def test_a_canary_roll_out_is_kept_across_a_restart_with_its_old_spec() -> None:
    sup = Sup(NEW)
    load_intent(sup, saved(canarying()), sup.specs)
    assert sup.state.rollout == canarying().rollout
    # The slots that are not canaries keep the old spec, which the executor can start.
    assert sup.state.target_spec(1) == config_hash(OLD)
    assert sup.specs[config_hash(OLD)].agents.image == "ci:v1"
    (event,) = [e for e in sup.reporter.events if e.kind == "rollout_restored"]
    assert "canary slots 0: 1/2 jobs" in event.message and "the canaries go on" in event.message


def test_a_rolled_back_change_stays_rolled_back_and_says_so() -> None:
    engine = canarying()
    assert engine.rollout is not None
    engine, _ = roll_back(engine, engine.rollout, "slot 0 crash-looped on ci:v2")
    sup = Sup(NEW)
    load_intent(sup, saved(engine), sup.specs)
    assert sup.state.rollout is not None and sup.state.rollout.phase is Phase.ROLLED_BACK
    assert {sup.state.target_spec(n) for n in range(3)} == {config_hash(OLD)}
    (event,) = [e for e in sup.reporter.events if e.kind == "rollout_restored"]
    assert "rolled back to ci:v1: slot 0 crash-looped on ci:v2" in event.message
    assert "stays rolled back until the configuration changes it" in event.message


def test_without_the_old_spec_s_configuration_the_roll_out_is_dropped_with_an_event() -> None:
    data = saved(canarying())
    del data["rollout"]["from_agents"]
    sup = Sup(NEW)
    load_intent(sup, data, sup.specs)
    assert sup.state.rollout is None and sup.state.desired == 3
    assert [e.kind for e in sup.reporter.events] == ["rollout_dropped"]
