"""``gpuci-tui demo``: the whole console against a simulated organisation.

Builds a `SimOrg` served over real HTTP on 127.0.0.1 (so the real Azure DevOps
client is what talks to it), a job feeder that keeps jobs arriving, synthetic
GPUs, and either the in-process `SimulatedRuntime` or (``--docker``) real
emulator containers on the local engine, labelled as demo containers and all
removed when the demo ends. It touches no real organisation, no keyring entry
and no existing configuration.
"""

from __future__ import annotations

import random
import secrets
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker.agentspec import LABEL_DEMO, instance_labels
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.protocols import ContainerRuntime, GpuSampler

if TYPE_CHECKING:
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.host.assemble import Assembly
    from gpuci_tui.core.host.handle import SupervisorHandle
    from gpuci_tui.core.host.instance import DaemonPaths
    from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
    from gpuci_tui.core.models import SlotSnapshot
    from gpuci_tui.core.store.history import JobHistory
    from gpuci_tui.demo_auth import DemoIdentity
    from gpuci_tui.services import Services
    from gpuci_tui.sim.jobs import JobFeeder
    from gpuci_tui.sim.leftovers import Backdate
    from gpuci_tui.sim.org import SimOrg
    from gpuci_tui.sim.server import SimServer

DEMO_POOL = "gpu-demo"
DEMO_PREFIX = "demo-gpu"
OLD_PREFIX = "demo-old"
"""The name prefix this demo host had "before": its offline leftovers are stale."""
SEEDED_RUNS = 60
"""Past jobs written to the demo's history at start, so the history view has trends at once."""


class MemoryTokens:
    """A `TokenSource` that holds the demo's generated PAT in memory only."""

    def __init__(self, token: str) -> None:
        self._token = token

    def get_token(self, org_url: str) -> str:
        """The demo PAT."""
        return self._token

    def set_token(self, org_url: str, pat: str) -> None:
        """Replace the PAT (the wizard in demo mode)."""
        self._token = pat.strip()

    def source_of_token(self, org_url: str) -> str:
        """Where the PAT comes from."""
        return "demo (memory)"


@dataclass
class DemoEnvironment:
    """Everything the demo started; `close` stops it and removes what it made."""

    config: Config
    org: SimOrg
    server: SimServer
    feeder: JobFeeder
    runtime: ContainerRuntime
    gpu: GpuSampler
    tokens: MemoryTokens
    api: AzureDevOpsClient
    docker: bool = False
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpuci-demo-")))
    extra_labels: dict[str, str] = field(default_factory=dict)
    supervisor_holder: list[GroupSupervisor] = field(default_factory=list)
    identity: DemoIdentity | None = None
    """``--auth service-principal``: the demo's signed-in application (else the PAT)."""
    """The demo's supervisor, once started (read by the synthetic GPUs)."""
    assembly: Assembly | None = None
    """What `services`' ``start_supervisor`` started (it holds the demo instance's lock)."""

    @property
    def history_path(self) -> Path:
        """The demo's own job history (in its temporary directory, never the user's)."""
        return self.workdir / "history.sqlite3"

    @property
    def paths(self) -> DaemonPaths:
        """The demo instance's files: all in its temporary directory, so its lock,
        intent and GPU faults never meet those of a real instance (nor of another demo).
        """
        from gpuci_tui.core.host.instance import DaemonPaths

        return DaemonPaths(
            socket=self.workdir / "control.sock",
            lock=self.workdir / "instance.lock",
            intent=self.workdir / "instance.intent.json",
            history=self.history_path,
            agents=self.workdir / "agents",
        )

    def services(self, *, readonly: bool = False) -> Services:
        """The console's `Services` for this demo; the supervisor starts in-process on mount.

        Like a daemon (the same `open_assembly`, on the demo's own instance), the demo
        samples the GPUs into per-job accounting and writes each finished job to a
        history, so busy rows show GPU use and the history view (``h``) has content.
        """
        from gpuci_tui.core.config.loader import instance_id
        from gpuci_tui.core.host.assemble import open_assembly
        from gpuci_tui.core.host.handle import InProcessHandle
        from gpuci_tui.core.store.history import JobHistory
        from gpuci_tui.services import Services

        history = JobHistory(self.history_path)
        try:
            seed_history(history, instance_id(self.config), time.time())
        finally:
            history.close()

        async def start_supervisor(config: Config) -> SupervisorHandle:
            parts = open_assembly(
                config,
                paths=self.paths,
                api=self.api,
                runtime=self.runtime,
                tokens=self.tokens if self.identity is None else self.identity.credential,
                mode="in-process",
                gpu=self.gpu,
                sample_interval=1.0,
                extra_labels=self.extra_labels,
            )
            self.supervisor_holder[:] = [parts.supervisor]
            self.assembly = parts
            parts.start()
            return InProcessHandle(parts.supervisor)

        return Services(
            config=self.config,
            config_path=self.workdir / "config.toml",
            gpu=self.gpu,
            runtime=self.runtime,
            token_store=self.tokens,
            azure_factory=lambda url, pat: self.api,
            start_supervisor=start_supervisor,
            readonly=readonly,
            demo=True,
            history_path=self.history_path,
            history_interval=3.0,
        )

    @property
    def supervisor(self) -> GroupSupervisor | None:
        """The demo's supervisor once the console started it, else None."""
        return self.supervisor_holder[0] if self.supervisor_holder else None

    def close(self) -> None:
        """Stop the feeder and the server; remove demo containers (``--docker``)."""
        with suppress(Exception):
            self.feeder.stop()
        if self.docker:
            labels = instance_labels(self.config, self.extra_labels)
            for info in self.runtime.list_containers(labels):
                with suppress(Exception):
                    self.runtime.remove(info.id)
        with suppress(Exception):
            self.server.stop()
        if self.identity is not None:
            with suppress(Exception):
                self.identity.close()


DEMO_JOB_SECONDS = (8.0, 40.0)
"""How long a demo job runs, drawn uniformly."""
DEMO_LOAD = 0.8
"""Offered load as a share of what the agents can take: busy, with a short queue at times."""
ROUTED_DEMANDS = (
    "gpu.product -equals NVIDIA-H100-80GB-HBM3",
    "gpu.product -equals NVIDIA-A100-80GB-PCIe",
)
"""Two jobs the demo queues at start: one its (H100) agents meet, one that waits for an A100."""


def demo_job_rate(agents: int) -> float:
    """Jobs per minute that keep ``agents`` agents about `DEMO_LOAD` busy.

    A higher rate than the agents can take makes the queue grow until the
    feeder's bound, and the demo then shows a pool that never catches up.
    """
    mean_seconds = sum(DEMO_JOB_SECONDS) / 2
    return DEMO_LOAD * agents * 60.0 / mean_seconds


def build_demo(
    *,
    agents: int = 4,
    jobs_per_minute: float | None = None,
    docker: bool = False,
    seed: int | None = None,
    startup: tuple[float, float] | None = None,
    auth: str = "pat",
) -> DemoEnvironment:
    """Start the simulated organisation and everything around it.

    ``startup`` is how long the simulated agents take to register and to open
    their session (default: the real agent's ~6 s and ~3 s), so the demo shows
    what hot standby hides. ``auth = "service-principal"`` signs in as a demo
    application of the simulated tenant instead of with a PAT (`demo_auth`).
    """
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.sim.gpu_synthetic import SyntheticSampler
    from gpuci_tui.sim.jobs import JobFeeder
    from gpuci_tui.sim.leftovers import Backdate
    from gpuci_tui.sim.org import SimOrg
    from gpuci_tui.sim.records import REALISTIC_STARTUP, AgentStartup
    from gpuci_tui.sim.server import SimServer

    token = secrets.token_urlsafe(39)
    pace = AgentStartup(*startup) if startup is not None else REALISTIC_STARTUP
    backdate = Backdate()  # turned back only while `_seed_leftovers` registers the past
    org = SimOrg("demo-org", startup=pace, clock=backdate)
    org.add_pat(token)
    pool_id = org.add_pool(DEMO_POOL)
    server = SimServer(org)
    server.start()
    runtime: ContainerRuntime
    extra = {LABEL_DEMO: "1"}
    if docker:
        import docker as docker_sdk

        from gpuci_tui.core.docker.runtime import DockerRuntime
        from gpuci_tui.sim.image import build_emulator_image

        docker_runtime = DockerRuntime()
        docker_runtime.ping()  # a plain message when the engine is unusable
        client = docker_sdk.from_env()
        try:
            image = build_emulator_image(client)
        finally:
            client.close()
        runtime = docker_runtime
        network = "host"  # the simulated organisation listens on 127.0.0.1 only
        # The GPUs are synthetic: a real container cannot be given them.
        gpus = "none"
    else:
        from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime

        runtime = SimulatedRuntime(org)
        image = DEFAULT_IMAGE
        network = "bridge"
        gpus = "per-agent"
    config = Config(
        azure=AzureConfig(url=server.org_url, pool=DEMO_POOL),
        agents=AgentsConfig(
            count=agents, image=image, name_prefix=DEMO_PREFIX, network=network, gpus=gpus
        ),
        supervisor=SupervisorConfig(poll_interval=2.0, backoff_base=1.0, backoff_max=10.0),
    )
    _seed_leftovers(org, backdate, config, token)
    identity = None
    if auth == "service-principal":
        from gpuci_tui.demo_auth import service_principal

        identity = service_principal(org, config.azure)
        config = replace(config, azure=identity.azure)
    api = AzureDevOpsClient(server.org_url, token if identity is None else identity.credential)
    feeder = JobFeeder(
        org,
        pool_id,
        rate_per_min=jobs_per_minute if jobs_per_minute is not None else demo_job_rate(agents),
        duration=DEMO_JOB_SECONDS,
        seed=seed,
        fail_share=0.05,
        max_queued=2 * agents,
    )
    feeder.start()
    # GPU routing: the agents advertise their synthetic H100 (gpu.product and the rest), so
    # a job demanding one runs and a job demanding an A100 waits, its reason in the pool panel.
    for demand in ROUTED_DEMANDS:
        org.queue_job(pool_id, "cuda-kernels - PR", duration=DEMO_JOB_SECONDS[0], demands=(demand,))
    holder: list[GroupSupervisor] = []

    def slot_snapshot(index: int) -> SlotSnapshot | None:
        return holder[0].snapshot().slot(index) if holder else None

    def busy(index: int) -> bool:
        slot = slot_snapshot(index)
        return slot is not None and slot.state == "busy"

    def owner(index: int) -> tuple[str, str] | None:
        slot = slot_snapshot(index)
        if slot is None or slot.container_id is None or slot.state != "busy":
            return None
        return slot.container_id, slot.name

    # With gpus = "per-agent", slot i owns GPU i: busy agents make their GPU work.
    gpu = SyntheticSampler(
        gpus=max(1, min(agents, 8)), seed=seed, busy=busy, owner=owner, model="h100"
    )
    env = DemoEnvironment(
        config=config,
        org=org,
        server=server,
        feeder=feeder,
        runtime=runtime,
        gpu=gpu,
        tokens=MemoryTokens(token),
        api=api,
        docker=docker,
        extra_labels=extra,
        supervisor_holder=holder,
        identity=identity,
    )
    return env


def _seed_leftovers(org: SimOrg, backdate: Backdate, config: Config, token: str) -> None:
    """Offline registrations of an earlier prefix of this host and of another host (see `sim.leftovers`)."""
    from dataclasses import replace

    from gpuci_tui.core.config.loader import instance_id
    from gpuci_tui.core.docker.agentspec import host_marker
    from gpuci_tui.sim.leftovers import seed_leftovers

    old = replace(config, agents=replace(config.agents, name_prefix=OLD_PREFIX))
    seed_leftovers(
        org, backdate, DEMO_POOL, token,
        old_prefix=OLD_PREFIX, old_instance=instance_id(old), host=host_marker(),
    )  # fmt: skip


def seed_history(history: JobHistory, instance: str, now: float, seed: int = 7) -> None:
    """Write `SEEDED_RUNS` past jobs of the simulated pipelines (the last few hours).

    Each pipeline has its own typical memory and duration with some noise, and
    'train - main' creeps up over its last runs, so the trend view shows what
    a regression looks like.
    """
    from gpuci_tui.core.store.history import JobRecord
    from gpuci_tui.sim.container import sim_image_id
    from gpuci_tui.sim.jobs import PIPELINES
    from gpuci_tui.sim.runtime import DEFAULT_IMAGE

    rng = random.Random(seed)
    typical = {name: (8.0 + 12.0 * i, 300.0 + 240.0 * i) for i, name in enumerate(PIPELINES)}
    for n in range(SEEDED_RUNS):
        pipeline = PIPELINES[n % len(PIPELINES)]
        memory_gib, seconds = typical[pipeline]
        if pipeline == "train - main":
            memory_gib += max(0, n - SEEDED_RUNS // 2) * 0.6  # the regression to spot
        ended = now - (SEEDED_RUNS - n) * 240.0
        failed = rng.random() < 0.08
        duration = seconds * rng.uniform(0.85, 1.15)
        # The GPU facts draw from their own generator: the rest of the seeded history stays.
        gpu = random.Random(seed * 10_000 + n)
        hot = gpu.random() < 0.15  # now and then a job that heats its GPU into slowing down
        throttle: tuple[tuple[str, float], ...] = (
            ("sw_power_cap", duration * gpu.uniform(0, 0.3)),
        )
        throttle += (("sw_thermal", duration * gpu.uniform(0.02, 0.1)),) if hot else ()
        history.add(
            JobRecord(
                instance=instance, slot=n % 4, agent=f"{DEMO_PREFIX}-{n % 4}",
                request_id=100_000 + n, pipeline=pipeline, run=f"demo.{n + 1}",
                started_at=ended - duration - 5, ended_at=ended,
                exit_code=1 if failed else 0, oom=False, reason="job finished",
                result="failed" if failed else "succeeded", queue_wait_s=rng.uniform(0, 20),
                duration_s=duration, gpus=(n % 4,), gpu_samples=int(duration),
                peak_gpu_memory_mib=memory_gib * rng.uniform(0.95, 1.05) * 1024,
                mean_util_pct=rng.uniform(55, 95), peak_util_pct=rng.uniform(90, 100),
                image=DEFAULT_IMAGE, image_id=sim_image_id(DEFAULT_IMAGE),
                energy_j=duration * gpu.uniform(250, 650), throttle_s=throttle, ecc_corrected=0,
                ecc_uncorrected=0, peak_temp_c=gpu.uniform(84, 89) if hot else gpu.uniform(55, 75),
            )
        )  # fmt: skip
