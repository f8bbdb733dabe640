"""The executor: carries out one planned action and answers with an observation.

All the blocking calls (docker-py, requests, the keyring) run in threads.
Every failure becomes an observation with a plain reason; nothing here
changes the engine's state.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping

from gpuci_tui.core.config.loader import Config, config_hash
from gpuci_tui.core.docker.agentspec import (
    GO_FILE,
    LABEL_INSTANCE,
    LABEL_STATE_DIR,
    build_spec,
    gated_of,
    image_gated,
    name_holder,
)
from gpuci_tui.core.engine.agent.steps import GiveGo, GoGiven, ReadAgent
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    CheckAgent,
    ServerFailed,
    SetEnabled,
)
from gpuci_tui.core.engine.steps import (
    Action,
    FetchLogs,
    LogTail,
    Observation,
    RemoveContainer,
    Removed,
    StartAgent,
    Started,
    StartFailed,
    StopAgent,
    Stopped,
    image_used,
)
from gpuci_tui.core.errors import (
    AzureError,
    AzureNotFoundError,
    ContainerNameConflictError,
    GpuciError,
    ImageLabelMissingError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.host.images.puller import ImagePuller
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.packages import AgentPackageMount
from gpuci_tui.core.protocols import Agent, AgentPoolApi, ContainerRuntime, TokenSource
from gpuci_tui.core.secrets.redaction import redact_lines


def owner_labels() -> dict[str, str]:
    """The state directory of this daemon, for the containers it makes (none if unknown)."""
    from gpuci_tui.core.config import paths

    try:
        return {LABEL_STATE_DIR: str(paths.state_dir())}
    except (GpuciError, OSError):
        return {}


class Executor:
    """Does the I/O of the engine's actions."""

    def __init__(
        self,
        config: Config,
        *,
        api: AgentPoolApi,
        runtime: ContainerRuntime,
        tokens: TokenSource,
        pool: PoolObserver,
        clock: Callable[[], float],
        extra_labels: Mapping[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        agent_dir_root: str | None = None,
        pull_refusal: Callable[[], str | None] | None = None,
        puller: ImagePuller | None = None,
        agent_package: Callable[[str], Awaitable[AgentPackageMount | None]] | None = None,
    ) -> None:
        """Bind the outside systems the actions need.

        ``agent_package`` gives a new container of an image the verified newer agent
        package the host caches (None: the image's agent), see `AgentUpdates.mount_for`.

        ``pull_refusal`` says why no pull may start now (the disk watch's hard floor):
        a start that fails for a missing image says so too. ``puller`` applies the
        group's pull policy before each start (None: never pulls).
        """
        self.config = config
        self.specs: dict[str, Config] = {config_hash(config): config}
        """Every agent spec this supervisor has been configured with, by fingerprint: a
        start names the spec it wants (a roll-out's old one too, for its rollback)."""
        self.api = api
        self.runtime = runtime
        self.tokens = tokens
        self.pool = pool
        self.clock = clock
        self.extra_labels = dict(extra_labels or {})
        self.owner_labels = owner_labels()
        """Labels that say whose a container is (not used to find ours: `LABEL_STATE_DIR`)."""
        self.command = command
        self.agent_dir_root = agent_dir_root
        self.pull_refusal = pull_refusal
        self.puller = puller
        self.capabilities: Callable[[Config, int], Mapping[str, str]] | None = None
        """The slot's GPU capabilities, given to its agents as environment (set by assembly)."""
        self.agent_package = agent_package
        self._image_gates: dict[str, bool] = {}
        """Whether each image reference honours the start gate, as last seen."""

    async def run(self, action: Action) -> Observation | None:
        """Carry out ``action``."""
        if isinstance(action, StartAgent):
            return await self._start(action.slot, action.lane, action.spec, action.gated)
        if isinstance(action, StopAgent):
            return await self._stop(action)
        if isinstance(action, RemoveContainer):
            # A container already gone is no error (`remove`); any other failure is
            # retried by the engine: nothing else would free the lane's name.
            try:
                await asyncio.to_thread(self.runtime.remove, action.container_id)
            except Exception as exc:  # noqa: BLE001 - unanswered, the name would stay taken
                error = str(exc) or type(exc).__name__
                return Removed(action.slot, action.lane, action.container_id, error, self.clock())
            return Removed(action.slot, action.lane, action.container_id)
        if isinstance(action, SetEnabled | CheckAgent | ReadAgent):
            return await self._server(action)
        if isinstance(action, GiveGo):
            return await self._go(action)
        if isinstance(action, FetchLogs):
            # Best effort, but always answered: the container is removed after the answer.
            try:
                lines = await asyncio.to_thread(self.runtime.logs_tail, action.container_id, 20)
                # An image may print its token while failing (set -x): never keep it.
                lines = list(redact_lines(lines))
            except Exception:  # noqa: BLE001 - a tail lost must not keep the name taken
                lines = []
            return LogTail(action.slot, action.container_id, tuple(lines))
        raise AssertionError(f"unknown action {action!r}")

    def configure(self, config: Config) -> None:
        """Use ``config`` for what follows; keep the specs of the earlier ones for their lanes."""
        self.config = config
        self.specs[config_hash(config)] = config

    async def _start(
        self, slot: int, lane: Lane, wanted: str = "", gated: bool = False
    ) -> Observation:
        try:
            token = await asyncio.to_thread(self.tokens.get_token, self.config.azure.url)
        except GpuciError as exc:
            return StartFailed(slot, lane, "token", str(exc), self.clock())
        config = self.specs.get(wanted, self.config)
        caps = self.capabilities
        found = await asyncio.to_thread(caps, config, slot) if caps is not None else None
        package = None
        if self.agent_package is not None:
            package = await self.agent_package(config.agents.image)
        spec = build_spec(
            config,
            slot,
            lane,
            extra_labels={**self.owner_labels, **self.extra_labels},
            command=self.command,
            agent_dir_root=self.agent_dir_root,
            capabilities=found,
            agent_package=package,
            # With the gate whenever the image has it (checked again by the start);
            # always when the engine planned the start as gated (it relies on it).
            gate=gated or await self._image_gated(config.agents.image),
        )
        root = self.agent_dir_root
        for host, _target, _mode in spec.extra_mounts:
            if root and host.startswith(root):
                await asyncio.to_thread(os.makedirs, host, 0o755, True)
        if self.puller and (held := await self.puller.before_start(config.agents, slot, lane)):
            return held  # the image is absent and could not be pulled: the lane waits
        try:
            info = await asyncio.to_thread(self.runtime.start, spec, token)
        except ContainerNameConflictError as exc:
            ours = spec.labels.get(LABEL_INSTANCE, "")
            holder = name_holder(exc.holder, ours) if exc.holder is not None else None
            return StartFailed(slot, lane, "conflict", str(exc), self.clock(), holder)
        except ImageLabelMissingError as exc:
            self._image_gates[spec.image] = False
            return StartFailed(slot, lane, "gate", str(exc), self.clock())
        except RuntimeUnavailableError as exc:
            return StartFailed(slot, lane, "engine", str(exc), self.clock())
        except GpuciError as exc:
            reason = await self._no_pull(str(exc), spec.image)
            return StartFailed(slot, lane, "start", reason, self.clock())
        at = info.started_at or self.clock()
        self._image_gates[spec.image] = image_gated(info.labels)  # the image as it ran
        mounted = package.version if package is not None else ""
        return Started(
            slot,
            lane,
            info.id,
            at,
            image_used(info),
            config_hash(config),
            mounted,
            gated_of(info.labels),
        )

    async def _image_gated(self, image: str) -> bool:
        """Whether ``image`` has the start gate: its label, read once, then as each start saw it."""
        if image not in self._image_gates:
            inspect = getattr(self.runtime, "image_config", None)
            try:
                found = await asyncio.to_thread(inspect, image) if inspect is not None else None
            except Exception:  # noqa: BLE001 - unknown: started without the gate, as before
                found = None
            if found is None:
                return False  # absent (to be pulled) or not readable: asked again next time
            self._image_gates[image] = image_gated(found.labels)
        return self._image_gates[image]

    async def _no_pull(self, message: str, image: str) -> str:
        """``message``, plus why no pull starts when the image is missing and the disk is full."""
        refusal = self.pull_refusal() if self.pull_refusal is not None else None
        if refusal is None:
            return message
        try:
            present = await asyncio.to_thread(self.runtime.image_present, image)
        except Exception:  # noqa: BLE001 - the start's own reason is answer enough
            return message
        return message if present else f"{message}; {refusal}"

    async def _stop(self, action: StopAgent) -> Observation:
        timeout = self.config.supervisor.stop_timeout
        try:
            await asyncio.to_thread(self.runtime.stop, action.container_id, timeout)
        except GpuciError as exc:
            return Stopped(action.slot, action.lane, str(exc))
        return Stopped(action.slot, action.lane)

    async def _go(self, action: GiveGo) -> Observation:
        """Put the go file into a gated container (its start.sh then runs the agent)."""
        try:
            await asyncio.to_thread(self.runtime.put_file, action.container_id, GO_FILE, "go\n")
        except Exception as exc:  # noqa: BLE001 - unanswered, the lane would wait forever
            error = str(exc) or type(exc).__name__
            return GoGiven(action.slot, action.lane, action.container_id, self.clock(), error)
        return GoGiven(action.slot, action.lane, action.container_id, self.clock())

    async def _server(self, action: SetEnabled | CheckAgent | ReadAgent) -> Observation:
        pool_id = self.pool.pool_id
        began = self.clock()
        if pool_id is None:
            message = f"the pool '{self.pool.pool_name}' is not resolved yet"
            return ServerFailed(action.slot, action.lane, message, began + 1.0)
        blocked_until = self.pool.blocked_until()
        if blocked_until > began:
            retry_at = self.pool.health.retry_at or began
            message = (
                f"the organisation is backing off (next try in {retry_at - began:.0f} s)"
                if retry_at > began
                else "waiting for the organisation to answer a pool read again"
            )
            return ServerFailed(action.slot, action.lane, message, blocked_until)
        try:
            if isinstance(action, SetEnabled):
                agent = await asyncio.to_thread(
                    self.api.set_agent_enabled, pool_id, action.agent_id, action.enabled
                )
                self.pool.answered()
                return AgentWritten(action.slot, action.lane, agent, self.clock())
            if isinstance(action, ReadAgent):
                found = await asyncio.to_thread(self._agent_named, pool_id, action.name)
            else:
                found = await asyncio.to_thread(self.api.get_agent, pool_id, action.agent_id)
            self.pool.answered()
            return AgentChecked(action.slot, action.lane, found, began)
        except AzureError as exc:
            delay = self.pool.failed(exc)
            gone = isinstance(exc, AzureNotFoundError)
            return ServerFailed(action.slot, action.lane, str(exc), self.clock() + delay, gone)

    def _agent_named(self, pool_id: int, name: str) -> Agent | None:
        """The pool's agent called ``name`` (one read, ``agentName=``), or None."""
        agents = self.api.list_agents(pool_id, agent_name=name)
        return next((agent for agent in agents if agent.name.lower() == name.lower()), None)
