"""A roll-out kept across a daemon restart: the specs' configurations beside the engine's record.

The engine keeps the roll-out's record with the group's intent (`commands.intent_data`,
`restore_intent`); a start names the spec it wants, and the executor must know that
spec's configuration. After a restart only the file's configuration is known, which is
the roll-out's *new* spec (`commands.restored_rollout` drops a roll-out the file no
longer names). The *old* spec, which the canaries' peers and a rolled-back group keep
running, is saved here as the agent values that make a spec (`config_hash`) and built
again over the file's configuration at start; a spec that no longer builds the same
fingerprint drops the roll-out (the slots then follow the file, as without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from gpuci_tui.core.config.loader import Config, config_hash
from gpuci_tui.core.config.model import VolumeConfig
from gpuci_tui.core.engine.commands import intent_data, restore_intent
from gpuci_tui.core.engine.lifecycle import EngineState
from gpuci_tui.core.engine.rollout.state import Phase
from gpuci_tui.core.engine.rollout.views import describe
from gpuci_tui.core.host.reporter import Reporter

__all__ = ["load_intent", "save_data"]

#: The agent values a spec is made of (`config_hash`), saved for the roll-out's old spec.
SPEC_FIELDS = ("image", "network", "gpus", "oom_score_adj", "mem_limit", "docker_socket")


class Intended(Protocol):
    """What `load_intent` reads and sets of a `host.supervisor.Supervisor`."""

    config: Config
    state: EngineState
    reporter: Reporter


def save_data(state: EngineState, specs: Mapping[str, Config]) -> dict[str, Any]:
    """`intent_data`, with the agent values of the roll-out's old spec when known."""
    data = intent_data(state)
    rollout = state.rollout
    old = specs.get(rollout.from_spec) if rollout is not None else None
    if old is not None:
        data["rollout"]["from_agents"] = spec_values(old)
    return data


def spec_values(config: Config) -> dict[str, Any]:
    """The agent values that make ``config``'s spec, as JSON data."""
    agents = config.agents
    values: dict[str, Any] = {name: getattr(agents, name) for name in SPEC_FIELDS}
    values["gpu_ids"] = list(agents.gpu_ids)
    values["volumes"] = [[v.host, v.container, v.env] for v in agents.volumes]
    return values


def spec_config(config: Config, values: object) -> Config | None:
    """``config`` with the saved spec values; None when they are malformed."""
    if not isinstance(values, dict):
        return None
    try:
        agents = replace(
            config.agents,
            **{name: values[name] for name in SPEC_FIELDS},
            gpu_ids=tuple(str(g) for g in values["gpu_ids"]),
            volumes=tuple(VolumeConfig(str(h), str(c), e) for h, c, e in values["volumes"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return replace(config, agents=agents)


def load_intent(sup: Intended, data: Mapping[str, Any], specs: dict[str, Config]) -> None:
    """Restore the saved intent; a roll-out only with its old spec's configuration.

    ``specs``: the executor's configuration of each spec, by fingerprint (the old
    spec's is added to it).
    """
    state = restore_intent(sup.state, dict(data))
    rollout = state.rollout
    if rollout is None:
        sup.state = state
        return
    saved = data.get("rollout")
    old = spec_config(sup.config, saved.get("from_agents") if isinstance(saved, dict) else None)
    if old is None or config_hash(old) != rollout.from_spec:
        sup.reporter.event(
            "rollout_dropped",
            f"the roll-out to {rollout.image_to} could not be restored after the restart "
            f"(the configuration of {rollout.image_from} is not known): every slot takes "
            f"{rollout.image_to}",
        )
        sup.state = replace(state, rollout=None)
        return
    specs[rollout.from_spec] = old
    sup.state = state
    then = {
        Phase.ROLLED_BACK: f": {rollout.image_to} stays rolled back until the configuration "
        "changes it",
        Phase.CANARY: ": the canaries go on",
        Phase.ROLLING: ": the other slots follow",
        Phase.DONE: "",
    }[rollout.phase]
    sup.reporter.event(
        "rollout_restored", f"roll-out kept across the restart: {describe(state)}{then}"
    )
