"""A real `gpuci-tui run` process on the real Docker engine, against a `SimServer`.

Shared by tests/real/test_daemon_docker.py and the fault drills (tests/drills).
Agent containers are the busybox emulator image (host network, reaching the
simulated organisation on 127.0.0.1); the PAT reaches the daemon through
GPUCI_PAT_FILE and the containers only as a token file.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_LANE, LABEL_SLOT, instance_id
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.host.control.client import ControlError, request
from tests.waiting import What, wait_until

PAT = "it-pat-" + uuid.uuid4().hex + uuid.uuid4().hex[:12]

#: The rig's agents take time to start, like the real one (registration, then session),
#: scaled down so the drills stay short; the benchmarks use the full ~6 s + ~3 s.
STARTUP = (1.0, 0.5)

#: Container states that occupy a slot (an exited one waits for the supervisor to remove it
#: after reading its tail, harmlessly: it runs nothing).
LIVE_STATES = frozenset({"created", "running", "restarting", "paused"})


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, what: What = "") -> Any:
    """`tests.waiting.wait_until` with the rig's longer default deadline (agents take seconds)."""
    return wait_until(pred, timeout, what)


@dataclass
class Rig:
    """One simulated organisation, one configuration and the daemons started for it."""

    org: Any
    pool_id: int
    server: Any
    config: Config
    config_path: Path
    client: Any
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]]

    @property
    def instance(self) -> str:
        """The supervisor instance id (the label value of its containers)."""
        return instance_id(self.config)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``gpuci-tui --config … ARGS`` as a separate process."""
        return subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(self.config_path), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def start_daemon(
        self,
        module: str = "gpuci_tui.cli.main",
        files_limit: int | tuple[int, int] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``gpuci-tui run`` and wait until its control socket answers.

        ``module``: the entry point run with ``python -m`` (a drill's own launcher).
        ``files_limit``: the daemon's limit on open files (a service manager's
        ``LimitNOFILE=``), one figure for soft and hard or ``(soft, hard)``.
        """
        log = open(self.config_path.parent / f"daemon-{len(self.procs)}.log", "wb")  # noqa: SIM115

        def limit() -> None:
            if files_limit is not None:
                pair = files_limit if isinstance(files_limit, tuple) else (files_limit,) * 2
                resource.setrlimit(resource.RLIMIT_NOFILE, pair)

        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--config", str(self.config_path), "run"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=limit if files_limit is not None else None,  # noqa: PLW1509
        )
        self.procs.append(proc)
        wait_for(lambda: self.snap() is not None or proc.poll() is not None, 20, "daemon socket")
        assert proc.poll() is None, self.daemon_log()
        return proc

    def daemon_log(self) -> str:
        """Everything the daemons of this rig wrote."""
        return "\n".join(
            p.read_text(errors="replace")
            for p in sorted(self.config_path.parent.glob("daemon-*.log"))
        )

    def status(self) -> dict[str, Any] | None:
        """``gpuci-tui status --json`` through the real CLI (None when no daemon answers)."""
        out = self.cli("status", "--json", timeout=20)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def snap(self) -> dict[str, Any] | None:
        """The same snapshot straight from the control socket (cheap enough to poll)."""
        try:
            reply = request(socket_path(self.instance), {"op": "status"}, timeout=10)
        except ControlError:
            return None
        return reply.get("snapshot") if reply.get("ok") else None

    def containers(self) -> list[Any]:
        """This instance's running containers (sparse: no inspect races with a removal)."""
        return self.client.containers.list(
            sparse=True, filters={"label": f"{LABEL_INSTANCE}={self.instance}", "status": "running"}
        )

    def container_ids(self) -> set[str]:
        """Ids of `containers`."""
        return {c.id for c in self.containers()}

    def slot(self, number: int) -> dict[str, Any]:
        """One slot of the current snapshot."""
        snap = self.snap() or {}
        return next(s for s in snap.get("slots", []) if s["slot"] == number)

    def states(self) -> list[str]:
        """Slot states, in slot order."""
        snap = self.snap() or {}
        return [s["state"] for s in snap.get("slots", [])]

    @property
    def standby(self) -> bool:
        """Hot standby is on: two agents (containers) per slot."""
        return self.config.agents.standby

    @property
    def lanes(self) -> int:
        """Agent containers per running slot."""
        return 2 if self.standby else 1

    def all_idle(self, count: int | None = None) -> bool:
        """Every slot holds an idle agent (and its ready standby), and Docker agrees."""
        snap = self.snap() or {}
        slots = snap.get("slots", [])
        want = count if count is not None else self.config.agents.count
        if [s["state"] for s in slots] != ["idle"] * want:
            return False
        if self.standby and any(s["standby"] != "ready" for s in slots):
            return False
        return len(self.containers()) == want * (2 if self.standby else 1)

    def busy_slots(self) -> list[int]:
        """Slots the supervisor shows as busy."""
        snap = self.snap() or {}
        return [s["slot"] for s in snap.get("slots", []) if s["state"] == "busy"]


def make_rig(
    tmp_path: Path,
    docker_client: Any,
    image: str,
    *,
    count: int = 2,
    heartbeat_timeout: float = 5.0,
    agents: dict[str, Any] | None = None,
    startup: tuple[float, float] = STARTUP,
    **supervisor: Any,
) -> Iterator[Rig]:
    """Yield a `Rig` (organisation served, config and PAT file written, no daemon yet).

    ``startup``: the agents' (registration, session) delays, the drills' short ones by
    default. Afterwards every daemon is stopped, every container of the instance
    removed and the server stopped.
    """
    from gpuci_tui.sim.org import SimOrg
    from gpuci_tui.sim.records import AgentStartup
    from gpuci_tui.sim.server import SimServer

    org = SimOrg("it-org", heartbeat_timeout=heartbeat_timeout, startup=AgentStartup(*startup))
    org.add_pat(PAT)
    pool_id = org.add_pool("gpu")
    server = SimServer(org)
    server.start()
    config = Config(
        azure=AzureConfig(url=server.url, pool="gpu"),
        agents=AgentsConfig(
            **{
                "count": count,
                "image": image,
                "name_prefix": f"it{uuid.uuid4().hex[:6]}",
                "network": "host",
                "gpus": "none",
                **(agents or {}),
            }
        ),
        supervisor=SupervisorConfig(
            **{
                "poll_interval": 0.5,
                "backoff_base": 0.3,
                "backoff_max": 2.0,
                "park_after": 3,
                "stop_timeout": 5.0,
                **supervisor,
            }
        ),
    )
    config_path = tmp_path / "config.toml"
    save_config(config, config_path)
    pat_file = tmp_path / "pat"
    pat_file.write_text(PAT + "\n")
    pat_file.chmod(0o600)
    env = dict(os.environ, GPUCI_PAT_FILE=str(pat_file))
    rig = Rig(org, pool_id, server, config, config_path, docker_client, env, [])
    try:
        yield rig
    finally:
        for proc in rig.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        with contextlib.suppress(Exception):  # the engine itself may be the casualty
            for c in docker_client.containers.list(
                all=True, sparse=True, filters={"label": f"{LABEL_INSTANCE}={rig.instance}"}
            ):
                with contextlib.suppress(Exception):  # already gone
                    c.remove(force=True)
        server.stop()


@dataclass
class SlotSampler:
    """Samples the engine's container list in the background: never two live per lane.

    Every ``interval`` it lists the instance's containers (one sparse API call)
    and records, per slot label, the ids in a live state. Two live containers
    for one lane of a slot (its agent name) at once is a violation;
    `assert_no_duplicates` reports them. With hot standby a slot has two lanes.
    Listing errors (e.g. while dockerd restarts) are counted, not raised.
    """

    client: Any
    instance: str
    interval: float = 0.1
    samples: int = 0
    errors: int = 0
    violations: list[tuple[float, str, list[str]]] = field(default_factory=list)
    seen: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> SlotSampler:
        self._thread = threading.Thread(target=self._run, name="slot-sampler", daemon=True)
        self._thread.start()
        # A sampler that never sampled proves nothing: wait for the first one.
        wait_for(lambda: self.samples > 0 or self.errors > 0, 10, "first container sample")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        flt = {"label": f"{LABEL_INSTANCE}={self.instance}"}
        while not self._stop.is_set():
            try:
                listed = self.client.api.containers(all=True, filters=flt)
            except Exception:  # noqa: BLE001 - engine down or restarting: keep sampling
                self.errors += 1
            else:
                per_slot: dict[str, list[str]] = defaultdict(list)
                for c in listed:
                    labels = c.get("Labels") or {}
                    slot = labels.get(LABEL_SLOT, "?")
                    self.seen[slot].add(c["Id"])
                    if c.get("State") in LIVE_STATES:
                        per_slot[f"{slot}/{labels.get(LABEL_LANE, 'a')}"].append(c["Id"][:12])
                for slot, ids in per_slot.items():
                    if len(ids) > 1:
                        self.violations.append((time.time(), slot, ids))
                self.samples += 1
            self._stop.wait(self.interval)

    def assert_no_duplicates(self, min_samples: int = 20) -> None:
        """Fail if any sample saw two live containers for one slot (or too few samples)."""
        assert self.samples >= min_samples, f"only {self.samples} samples taken"
        assert not self.violations, f"two live containers for one lane: {self.violations[:5]}"


def assert_jobs_clean(
    org: Any, job_ids: list[int], *, allowed_lost: frozenset[int] = frozenset()
) -> None:
    """Every job succeeded, was handed out exactly once and nothing was abandoned or canceled.

    ``allowed_lost``: jobs a drill accepts losing for a reason outside the manager
    (documented by the drill), which must then be ``abandoned``, never ``canceled``.
    """
    for job_id in job_ids:
        job = org.job(job_id)
        if job_id in allowed_lost:
            assert job.result in ("succeeded", "abandoned"), (job_id, job.result, job.note)
            assert job.assign_count <= 1, (job_id, job.assign_count)
            continue
        assert job.result == "succeeded", f"job {job_id}: {job.result} ({job.note})"
        assert job.assign_count == 1, f"job {job_id} handed out {job.assign_count} times"
        assert "abandon" not in job.note, f"job {job_id}: {job.note}"
    assert_one_job_per_slot_at_a_time(org, job_ids)


def slot_of_agent(name: str) -> int:
    """The slot number in an agent name: ``{prefix}-{slot}`` or ``{prefix}-{slot}-b``."""
    return int(name.removesuffix("-b").rsplit("-", 1)[1])


def assert_one_job_per_slot_at_a_time(org: Any, job_ids: list[int]) -> None:
    """No two of the jobs ran at once on the agents (both lanes) of one slot."""
    spans: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for job_id in job_ids:
        job = org.job(job_id)
        if job.agent_name and job.assign_time:
            end = job.finish_time if job.finish_time is not None else float("inf")
            spans[slot_of_agent(job.agent_name)].append((job.assign_time, end, job_id))
    for slot, items in spans.items():
        items.sort()
        for (_, end, first), (start, _, second) in zip(items, items[1:], strict=False):
            assert start >= end, f"slot {slot}: job {second} started while {first} ran"


@dataclass
class EventRecorder:
    """Follows the engine's container events for one instance live, from a thread.

    Live, not by replaying history with ``since``/``until``: the engine keeps
    only its last 256 events, which other tests on a busy engine roll over in
    seconds.
    """

    client: Any
    instance: str
    actions: tuple[str, ...] = ("start", "die")
    events: list[dict[str, Any]] = field(default_factory=list)
    _stream: Any = None
    _thread: threading.Thread | None = None

    def __enter__(self) -> EventRecorder:
        self._stream = self.client.events(
            decode=True,
            filters={
                "type": "container",
                "event": list(self.actions),
                "label": f"{LABEL_INSTANCE}={self.instance}",
            },
        )
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # closed by __exit__
            for event in self._stream:
                self.events.append(event)

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()
        if self._thread is not None:
            self._thread.join(5)

    def times(self, action: str) -> dict[str, list[float]]:
        """Event times (Unix seconds) of ``action`` per slot label, in order."""
        per_slot: dict[str, list[float]] = defaultdict(list)
        for event in list(self.events):
            if event.get("Action") == action:
                attrs = (event.get("Actor") or {}).get("Attributes") or {}
                per_slot[attrs.get(LABEL_SLOT, "?")].append(event["timeNano"] / 1e9)
        return dict(per_slot)
