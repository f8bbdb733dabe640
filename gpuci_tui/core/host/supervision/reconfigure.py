"""A supervisor takes a re-read configuration: the host's half of ``reload``.

The rules are the engine's (`engine.rollout`: which slots take the new agent
spec when, the canaries, the rollback; `commands` for the count); here the new
configuration is handed to the parts that read it: the executor keeps every
spec's configuration by fingerprint (a start names the one it wants, the old
one too, for a rollback), the supervisor's own ``config`` carries admission
and the image the CUDA guard checks. The preview runs the same functions on a
copy of the state and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from gpuci_tui.core.command_types import CommandResult, Scale
from gpuci_tui.core.config.loader import Config, config_hash, instance_id
from gpuci_tui.core.engine.commands import apply_command
from gpuci_tui.core.engine.lifecycle import EngineState
from gpuci_tui.core.engine.rollout.progress import base_spec, begin
from gpuci_tui.core.engine.rollout.state import Phase
from gpuci_tui.core.engine.rollout.views import describe, preview_lines
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.standby.auto import depth_of, scheduled
from gpuci_tui.core.host.reporter import Reporter
from gpuci_tui.core.host.supervision.executor import Executor


class Supervisor(Protocol):
    """What a reload reads and sets of a `host.supervisor.Supervisor`."""

    config: Config
    rules: SupervisorConfig
    state: EngineState
    executor: Executor
    reporter: Reporter
    instance: str
    clock: Callable[[], float]


def refusal(supervisor: Supervisor, config: Config) -> str | None:
    """Why ``config`` cannot be taken live by this supervisor (None: it can).

    The organisation, pool and name prefix name the agents themselves (the
    instance id in every label): another value is another set of agents.
    """
    if instance_id(config) != supervisor.instance:
        return (
            "the organisation, pool or name prefix changed: these name the agents, "
            "so they change only with a restart of the daemon"
        )
    return None


def reconfigured(
    supervisor: Supervisor, config: Config, *, canary: int, canary_jobs: int | None
) -> EngineState:
    """The engine state ``config`` makes of the supervisor's (pure: nothing is kept)."""
    state = supervisor.state
    old = supervisor.executor.specs.get(base_spec(state), supervisor.config)
    state, _ = begin(
        state,
        config_hash(config),
        image_from=old.agents.image,
        image_to=config.agents.image,
        canary=canary,
        canary_jobs=canary_jobs,
        at=supervisor.clock(),
    )
    agents = config.agents
    # An operator's scale holds over the file until the file's count changes (or the
    # overrides are reset): a reload of another value does not undo it.
    if state.overrides.scaled_at is None or agents.count != supervisor.config.agents.count:
        if agents.count != state.desired:
            state, _ = apply_command(state, Scale(agents.count))
        state = replace(state, overrides=replace(state.overrides, scaled_at=None))
    depth, auto = depth_of(
        agents.standby, least=agents.standby_min, most=agents.standby_max, cap=agents.max_agents
    )
    if (auto is None) != (state.auto is None) or (auto is None and depth != state.standby):
        state = replace(state, standby=depth, auto=auto)
    # A changed schedule applies live: its count in force now, as the next plan would have it.
    return scheduled(replace(state, schedule=agents.standby_schedule), supervisor.clock())


def apply_reload(
    supervisor: Supervisor, config: Config, *, canary: int, canary_jobs: int | None
) -> CommandResult:
    """Take ``config`` now (see `Supervisor.reconfigure`); the answer says what changed.

    The caller saves the intent (the count may have changed) and wakes the loop.
    """
    problem = refusal(supervisor, config)
    if problem is not None:
        return CommandResult(False, problem)
    before = supervisor.state
    after = reconfigured(supervisor, config, canary=canary, canary_jobs=canary_jobs)
    lines = list(preview_lines(before, after))
    admission = config.agents.gpu_admission != supervisor.config.agents.gpu_admission
    if admission:
        lines.append("GPU admission changes (applies at the next GPU sample)")
    supervisor.executor.configure(config)
    supervisor.config = config
    supervisor.rules = config.supervisor
    supervisor.state = after
    report = supervisor.reporter
    rollout = after.rollout
    if rollout is not None and rollout is not before.rollout:
        kind = "rollout_started" if rollout.phase is not Phase.DONE else "rollout_done"
        report.event(kind, f"roll-out: {describe(after)}")
    message = "; ".join(lines) if lines else "nothing to change"
    report.event("reload", f"reload: {message}")
    report.changed()
    return CommandResult(True, message, tuple(s.number for s in after.slots))


def preview_reload(supervisor: Supervisor, config: Config, *, canary: int) -> tuple[str, ...]:
    """What `apply_reload` would do, in words; nothing changes."""
    problem = refusal(supervisor, config)
    if problem is not None:
        return (f"refused: {problem}",)
    before = supervisor.state
    after = reconfigured(supervisor, config, canary=canary, canary_jobs=None)
    lines = list(preview_lines(before, after))
    if config.agents.gpu_admission != supervisor.config.agents.gpu_admission:
        lines.append("GPU admission changes (applies at the next GPU sample)")
    return tuple(lines) or ("nothing to change",)
