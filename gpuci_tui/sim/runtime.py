"""`SimulatedRuntime`: an in-process `ContainerRuntime` whose containers are threads.

Each "container" runs `run_agent` (agent_program.py), which does what the
busybox emulator (emulator/agent.sh) does, directly against a `SimOrg`: read the
env contract, register with replace semantics, forget the token, long-poll for
exactly one job, run it while heartbeating, report it, go offline, exit 0.

Docker behaviours kept because the supervisor depends on them:

* events ``create``, ``start``, ``die`` (with exit code; ``oom`` first when the
  job ran out of memory, exit 137) and ``destroy`` ``destroy_delay`` seconds
  after ``die`` when ``auto_remove``; a force ``remove`` sends ``die`` then
  ``destroy`` at once;
* a container name stays taken until its ``destroy`` (`ContainerNameConflictError`);
* ``stop`` sends SIGTERM: an idle agent goes offline and exits 143 at once, a
  busy one finishes its job first (exit 0); SIGKILL (137) after ``timeout``;
* `break_event_stream` and ``available = False`` let tests cut the event stream
  (``stream-lost`` / ``stream-restored``) or the whole engine;
* a container's output can be followed as it comes (``docker logs --follow``),
  and a file written into a running one (``put_archive``: the start gate's go);
* an image's labels show on its containers; by default every image carries the
  start gate label, as the emulator image does (``start_gate=False``: none does).
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from gpuci_tui.core.docker.errors import ContainerOperationError
from gpuci_tui.core.errors import (
    ContainerNameConflictError,
    ContainerStartError,
    ImageLabelMissingError,
    RuntimeUnavailableError,
)
from gpuci_tui.core.protocols import ContainerEvent, ContainerInfo, ContainerSpec, ImageConfig
from gpuci_tui.sim.agent_packages import BAKED_AGENT_VERSION
from gpuci_tui.sim.agent_program import run_agent
from gpuci_tui.sim.container import AgentTiming, SimContainer
from gpuci_tui.sim.disk import SimDisk
from gpuci_tui.sim.names import AGENT_VERSION_LABEL, START_GATE_LABEL
from gpuci_tui.sim.org import SimOrg

if TYPE_CHECKING:
    from gpuci_tui.sim.registry import SimImageRegistry

DEFAULT_IMAGE = "gpuci-sim/agent:1"


class SimulatedRuntime:
    """A fast, thread-safe, Docker-like runtime for the supervisor's tests and the demo.

    Args:
        org: The organisation the agents register with.
        images: Images "present locally".
        broken_images: Images whose containers exit 1 at once (crash-loop tests);
            they count as present.
        destroy_delay: Seconds from ``die`` to ``destroy`` for auto-removed containers.
        start_delay: Seconds `start` takes (create + copy + start).
        timing: The agents' pace (boot delay, poll timeout, heartbeat interval…).
        start_gate: Whether images without an entry in ``image_configs`` carry the start
            gate label (their agents then wait for the go file AZP_GO_FILE names).
        clock: Stamps container times and events, as Docker's own clock does; a test may
            share a fake one with the supervisor (waits always use real time).
    """

    def __init__(
        self,
        org: SimOrg,
        *,
        images: Iterable[str] = (DEFAULT_IMAGE,),
        broken_images: Iterable[str] = (),
        destroy_delay: float = 0.05,
        start_delay: float = 0.0,
        timing: AgentTiming | None = None,
        start_gate: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.org = org
        self.start_gate = start_gate
        self.clock = clock
        self.images: set[str] = set(images)
        self.broken_images: set[str] = set(broken_images)
        self.destroy_delay = destroy_delay
        self.start_delay = start_delay
        self.timing = timing or AgentTiming()
        self.available = True
        """False makes every call raise `RuntimeUnavailableError` and cuts the event stream."""
        self.unavailable_message = (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
            "Is the docker daemon running?"
        )
        self._lock = threading.RLock()
        self._containers: dict[str, SimContainer] = {}
        self._history: list[SimContainer] = []
        self._subscribers: list[tuple[dict[str, str], queue.SimpleQueue[ContainerEvent]]] = []
        self._stream_down_until = 0.0
        self._start_failures: list[str] = []
        self.disk = SimDisk(self)
        """The simulated data root (`DockerDisk`): set ``disk.free`` to fill it."""
        self.image_configs: dict[str, ImageConfig] = {}
        """What `image_config` says of an image (a test may change it under a running
        supervisor); a present image without an entry declares nothing."""
        self.registry: SimImageRegistry | None = None
        """Where this engine pulls from (`ImageRegistry`); None: it pulls nothing (the tests'
        default), the demo gives it a `sim.registry.SimImageRegistry`."""

    # ------------------------------------------------------------------ test knobs

    def fail_next_starts(self, count: int = 1, message: str = "") -> None:
        """Make the next ``count`` `start` calls raise `ContainerStartError`."""
        text = message or (
            "Docker could not start the container: could not select device driver "
            '"" with capabilities: [[gpu]]. Install the NVIDIA Container Toolkit.'
        )
        with self._lock:
            self._start_failures.extend([text] * count)

    def break_event_stream(self, duration: float) -> None:
        """Cut the event stream for ``duration`` seconds; events in the gap are lost."""
        with self._lock:
            self._stream_down_until = time.monotonic() + duration

    def history(self) -> list[SimContainer]:
        """Every container ever started, oldest first (live objects: read only)."""
        with self._lock:
            return list(self._history)

    def container(self, container_id_or_name: str) -> SimContainer | None:
        """A current (not yet destroyed) container by id, id prefix or name."""
        with self._lock:
            return self._find(container_id_or_name)

    def kill(self, container_id: str, exit_code: int = 137) -> None:
        """The process dies at once with ``exit_code`` (crash, SIGKILL); no offline call."""
        self._check()
        c = self.container(container_id)
        if c is not None:
            c.terminate(exit_code)

    def close(self) -> None:
        """Kill every running container (test teardown); their events are still emitted."""
        with self._lock:
            running = [c for c in self._containers.values() if c.running]
        for c in running:
            c.terminate(137)

    # ------------------------------------------------------------------ its data root's view

    def image_names(self) -> set[str]:
        """Every local image (``images`` and ``broken_images``)."""
        with self._lock:
            return self.images | self.broken_images

    def images_in_use(self) -> set[str]:
        """The images of the current containers (running or not)."""
        with self._lock:
            return {c.image for c in self._containers.values()}

    def drop_image(self, ref: str) -> bool:
        """Take ``ref`` off the local images; False when it was not there."""
        with self._lock:
            present = ref in self.images or ref in self.broken_images
            self.images.discard(ref)
            self.broken_images.discard(ref)
            return present

    # ------------------------------------------------------------------ protocol

    def ping(self) -> None:
        """Raise RuntimeUnavailableError when ``available`` is False."""
        self._check()

    def image_present(self, image: str) -> bool:
        """Whether ``image`` is in ``images`` or ``broken_images``."""
        self._check()
        with self._lock:
            return image in self.images or image in self.broken_images

    def image_config(self, image: str) -> ImageConfig | None:
        """The entry of ``image_configs``; a present image without one declares the defaults.

        The defaults: the emulators' agent version, and the start gate unless
        ``start_gate`` is False (as the emulator image says of itself).
        """
        self._check()
        with self._lock:
            if image in self.image_configs:
                return self.image_configs[image]
            if image in self.images or image in self.broken_images:
                return ImageConfig(f"sha256:sim-{image}", {}, self._image_labels(image))
            return None

    def list_containers(self, labels: Mapping[str, str]) -> list[ContainerInfo]:
        """Containers not yet destroyed that carry all of ``labels``."""
        self._check()
        with self._lock:
            return [c.info() for c in self._containers.values() if _matches(c.labels, labels)]

    def start(self, spec: ContainerSpec, token: str) -> ContainerInfo:
        """Create, deliver the token file, start.

        Raises:
            RuntimeUnavailableError: ``available`` is False.
            ContainerNameConflictError: the name is still taken.
            ContainerStartError: missing image, an injected failure, or the PAT
                found in the environment or command (it must only travel as a file).
        """
        self._check()
        if self.start_delay:
            time.sleep(self.start_delay)
        if _leaks(token, [*spec.environment.values(), *(spec.command or ())]):
            raise ContainerStartError(
                "Refusing to start: the PAT appears in the container's environment or command. "
                "It must only be delivered as the token file."
            )
        with self._lock:
            if self._start_failures:
                raise ContainerStartError(self._start_failures.pop(0))
            if spec.image not in self.images and spec.image not in self.broken_images:
                raise ContainerStartError(
                    f"The image {spec.image} is not present on this host. Build or load it "
                    "first (the simulated runtime pulls nothing)."
                )
            image_labels = self._image_labels(spec.image)
            for key, value in spec.required_labels.items():
                if image_labels.get(key) != value:
                    raise ImageLabelMissingError(
                        f"The image {spec.image} has no label {key}={value}, which this start "
                        "needs; nothing was created."
                    )
            holder = next((c for c in self._containers.values() if c.name == spec.name), None)
            if holder is not None:
                raise ContainerNameConflictError(
                    f"The container name {spec.name} is still in use by a container being "
                    "removed. Retry in a moment.",
                    holder.info(),
                )
            c = SimContainer(
                id=secrets.token_hex(32),
                spec=spec,
                token=token,
                broken=spec.image in self.broken_images,
                org=self.org,
                on_exit=self._on_exit,
                on_oom=self._on_oom,
                clock=self.clock,
            )
            c.labels = {**image_labels, **c.labels}  # as Docker shows them on the container
            self._containers[c.id] = c
            self._history.append(c)
            self._emit("create", c)
            c.mark_started()
            self._emit("start", c)
        self._launch(c)
        return c.info()

    def stop(self, container_id: str, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL (exit 137) after ``timeout``; blocks like ``docker stop``."""
        self._check()
        c = self.container(container_id)
        if c is None or not c.running:
            return
        c.sigterm()
        if not c.exited.wait(timeout):
            c.terminate(137)

    def remove(self, container_id: str) -> None:
        """Force-remove: kill if running (die 137), then destroy at once."""
        self._check()
        c = self.container(container_id)
        if c is None:
            return
        if c.running:
            c.terminate(137)
        self._destroy(c)

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The container's last output lines ([] when it is gone)."""
        self._check()
        c = self.container(container_id)
        return [] if c is None else c.tail(lines)

    def follow_output(self, container_id: str, stop: threading.Event) -> Iterator[str]:
        """The container's output lines as they come, until it ended or ``stop`` is set."""
        self._check()
        c = self.container(container_id)
        if c is not None:
            yield from c.follow(stop)

    def put_file(self, container_id: str, path: str, content: str) -> None:
        """Write a file into a running container (its agent may be waiting for it)."""
        self._check()
        c = self.container(container_id)
        if c is None or not c.running:
            raise ContainerOperationError(
                f"Docker could not write {path} into {container_id[:12]}: the container is "
                "not running"
            )
        c.put_file(path, content)

    def events(self, labels: Mapping[str, str], stop: threading.Event) -> Iterator[ContainerEvent]:
        """Yield events of containers carrying ``labels`` until ``stop`` is set."""
        q: queue.SimpleQueue[ContainerEvent] = queue.SimpleQueue()
        sub = (dict(labels), q)
        with self._lock:
            self._subscribers.append(sub)
        lost = False
        try:
            while not stop.is_set():
                down = self._stream_down()
                if down != lost:
                    lost = down
                    if lost:  # whatever was queued before the cut still arrives first
                        yield from _drain(q)
                    yield ContainerEvent(
                        "stream-lost" if lost else "stream-restored",
                        time=self.clock(),
                        message="event stream interrupted" if lost else "event stream restored",
                    )
                    continue
                try:
                    event = q.get(timeout=0.02)
                except queue.Empty:
                    continue
                if not lost:
                    yield event
        finally:
            with self._lock:
                self._subscribers.remove(sub)

    # ------------------------------------------------------------------ internals

    def _launch(self, c: SimContainer) -> None:
        """Run the container's agent program (here: in its own thread)."""
        thread = threading.Thread(
            target=run_agent, args=(c, self.org, self.timing), name=f"sim-{c.name}", daemon=True
        )
        c.thread = thread
        thread.start()

    def _destroy_later(self, c: SimContainer) -> None:
        """Destroy an auto-removed container `destroy_delay` seconds after its ``die``."""
        timer = threading.Timer(self.destroy_delay, self._destroy, args=(c,))
        timer.daemon = True
        timer.start()

    def _image_labels(self, image: str) -> dict[str, str]:
        """The labels ``image`` carries (the caller holds the lock)."""
        config = self.image_configs.get(image)
        if config is not None:
            return dict(config.labels)
        # The agent program bakes the emulators' agent, as the emulator image says.
        labels = {AGENT_VERSION_LABEL: BAKED_AGENT_VERSION}
        if self.start_gate:
            labels[START_GATE_LABEL] = "1"
        return labels

    def _check(self) -> None:
        if not self.available:
            raise RuntimeUnavailableError(self.unavailable_message)

    def _stream_down(self) -> bool:
        return not self.available or time.monotonic() < self._stream_down_until

    def _find(self, key: str) -> SimContainer | None:
        if key in self._containers:
            return self._containers[key]
        for c in self._containers.values():
            if c.name == key or (len(key) >= 6 and c.id.startswith(key)):
                return c
        return None

    def _emit(self, action: str, c: SimContainer, exit_code: int | None = None) -> None:
        event = ContainerEvent(
            action=action,
            container_id=c.id,
            name=c.name,
            labels=dict(c.labels),
            exit_code=exit_code,
            time=self.clock(),
        )
        with self._lock:
            if self._stream_down():
                return  # Docker does not replay events a client missed
            for labels, q in self._subscribers:
                if _matches(c.labels, labels):
                    q.put(event)

    def _on_oom(self, c: SimContainer) -> None:
        self._emit("oom", c)

    def _on_exit(self, c: SimContainer) -> None:
        self._emit("die", c, c.exit_code)
        if c.spec.auto_remove:
            self._destroy_later(c)

    def _destroy(self, c: SimContainer) -> None:
        with self._lock:
            if self._containers.pop(c.id, None) is None:
                return
            c.destroyed = True
            self._emit("destroy", c)


def _leaks(token: str, values: list[str]) -> bool:
    # Short test tokens like "tok" would match "/run/azp/token"; real PATs are 52 chars.
    token = token.strip()
    if not token:
        return False
    return any(v == token or (len(token) >= 12 and token in v) for v in values)


def _matches(have: Mapping[str, str], want: Mapping[str, str]) -> bool:
    return all(have.get(k) == v for k, v in want.items())


def _drain(q: queue.SimpleQueue[ContainerEvent]) -> Iterator[ContainerEvent]:
    while True:
        try:
            yield q.get_nowait()
        except queue.Empty:
            return


__all__ = ["DEFAULT_IMAGE", "AgentTiming", "SimContainer", "SimulatedRuntime"]
