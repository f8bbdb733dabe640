"""``gpuci-tui demo``: the whole console against a simulated organisation.

Builds a `SimOrg` served over real HTTP on 127.0.0.1 (so the real Azure DevOps
client is what talks to it), a job feeder that keeps jobs arriving, synthetic
GPUs, and either the in-process `SimulatedRuntime` (pulling from a simulated
registry, `sim.registry`) or (``--docker``) real emulator containers on the
local engine (`demo_docker`), labelled as demo containers. Everything lives in
the demo's own instance, a temporary folder (`demo_instance`) that also holds
its configuration file; `DemoEnvironment.close` stops what was started and
removes what was made, folder included. It touches no real organisation, no
keyring entry and no existing configuration. How it runs (a real daemon, the
console on its socket, signals): `demo_run`.
"""

from __future__ import annotations

import os
import secrets
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker.agentspec import LABEL_DEMO, instance_labels
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.protocols import ContainerRuntime, GpuSampler, TokenSource
from gpuci_tui.demo_instance import DemoInstance, DemoNotes
from gpuci_tui.demo_past import SEEDED_RUNS, seed_history
from gpuci_tui.demo_runtime import agents_engine, quietly, remove_containers

if TYPE_CHECKING:
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.host.assemble import Assembly
    from gpuci_tui.core.host.handle import SupervisorHandle
    from gpuci_tui.core.host.instance import DaemonPaths
    from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
    from gpuci_tui.core.models import SlotSnapshot
    from gpuci_tui.demo_auth import DemoIdentity
    from gpuci_tui.services import Services, StartSupervisor
    from gpuci_tui.sim.jobs import JobFeeder
    from gpuci_tui.sim.leftovers import Backdate
    from gpuci_tui.sim.org import SimOrg
    from gpuci_tui.sim.server import SimServer

DEMO_POOL = "gpu-demo"
DEMO_PREFIX = "demo-gpu"
DEMO_GPU_MODEL = "h100"
"""The demo's synthetic GPUs (`sim.gpu_synthetic.MODELS`): H100s, whatever the host has."""
OLD_PREFIX = "demo-old"
"""The name prefix this demo host had "before": its offline leftovers are stale."""
__all__ = ["DEMO_POOL", "DEMO_PREFIX", "OLD_PREFIX", "SEEDED_RUNS", "DemoEnvironment", "build_demo"]


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
    instance: DemoInstance
    """The demo's folder: its configuration file, and every file it makes."""
    cleanup: ExitStack
    """Undoes what `build_demo` started and made, last first (`close`)."""
    docker: bool = False
    extra_labels: dict[str, str] = field(default_factory=dict)
    supervisor_holder: list[GroupSupervisor] = field(default_factory=list)
    """The demo's supervisor, once started (read by the synthetic GPUs)."""
    identity: DemoIdentity | None = None
    """``--auth service-principal``: the demo's signed-in application (else the PAT)."""
    assembly: Assembly | None = None
    """What `services`' ``start_supervisor`` started (it holds the demo instance's lock)."""
    pull_note: str = ""
    """Why ``gpuci-tui image pull`` pulls nothing for this demo (`DemoNotes.pull`)."""

    @property
    def workdir(self) -> Path:
        """The demo's folder (`DemoInstance.root`)."""
        return self.instance.root

    @property
    def history_path(self) -> Path:
        """The job history of `services` (in the demo's folder, never the user's)."""
        return self.workdir / "history.sqlite3"

    def notes(self) -> DemoNotes:
        """What the demo's marker says to the commands given its configuration."""
        extra = {}
        if self.identity is not None and self.identity.ca_file is not None:
            # The simulated tenant signs in over TLS with a certificate of its own.
            extra["REQUESTS_CA_BUNDLE"] = str(self.identity.ca_file)
        gpus = "" if self.docker else f"{DEMO_GPU_MODEL}:{self.gpu.host_info().gpu_count}"
        return DemoNotes(pid=os.getpid(), pull=self.pull_note, environment=extra, gpus=gpus)

    def store_secrets(self) -> None:
        """Put the demo's PAT (and client secret) in the demo's keyring (`demo_keyring`),
        where ``token check`` and the console's wizard on the demo's instance find them.

        Only once this process uses the demo's instance (`DemoInstance.enter`).
        """
        from gpuci_tui.core.secrets.entra_secrets import CLIENT_SECRET, EntraSecretStore
        from gpuci_tui.demo_keyring import DemoKeyring

        url = self.config.azure.url
        store = EntraSecretStore(DemoKeyring())
        store.set_token(url, self.tokens.get_token(url))
        if self.identity is not None and self.identity.secret:
            store.set_secret(url, CLIENT_SECRET, self.config.azure.client_id, self.identity.secret)

    @property
    def daemon_tokens(self) -> TokenSource:
        """What the demo's agents register with: the PAT, or the signed-in application."""
        return self.tokens if self.identity is None else self.identity.credential

    def seed(self, path: Path) -> None:
        """Write the demo's past jobs (`seed_history`) into the history at ``path``."""
        from gpuci_tui.core.config.loader import instance_id
        from gpuci_tui.core.store.history import JobHistory

        history = JobHistory(path)
        try:
            seed_history(history, instance_id(self.config), time.time(), prefix=DEMO_PREFIX)
        finally:
            history.close()

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
        """`Services` whose supervisor starts inside the console, for tests and screenshots.

        ``gpuci-tui demo`` runs a real daemon instead (`demo_run`). Like it (the same
        `open_assembly`, on the demo's own files), the supervisor samples the GPUs into
        per-job accounting and writes each finished job to a history, so busy rows show
        GPU use and the history view (``h``) has content.
        """
        from gpuci_tui.core.host.assemble import open_assembly
        from gpuci_tui.core.host.handle import InProcessHandle

        self.seed(self.history_path)

        async def start_supervisor(config: Config) -> SupervisorHandle:
            parts = open_assembly(
                config,
                paths=self.paths,
                api=self.api,
                runtime=self.runtime,
                tokens=self.daemon_tokens,
                mode="in-process",
                gpu=self.gpu,
                sample_interval=1.0,
                extra_labels=self.extra_labels,
            )
            self.supervisor_holder[:] = [parts.supervisor]
            self.assembly = parts
            parts.start()
            return InProcessHandle(parts.supervisor)

        return self.console_services(start_supervisor, self.history_path, readonly=readonly)

    def console_services(
        self, start: StartSupervisor, history: Path, *, readonly: bool = False
    ) -> Services:
        """The console's `Services` on this demo: ``start`` gives it its supervisor.

        The console pulls (``i``) through the demo's runtime, as a console on a
        host pulls through its Docker engine (`screens.image_pull`).
        """
        from gpuci_tui.services import Services

        return Services(
            config=self.config,
            config_path=self.instance.config_path,
            gpu=self.gpu,
            runtime=self.runtime,
            token_store=self.tokens,
            azure_factory=lambda url, pat: self.api,
            start_supervisor=start,
            readonly=readonly,
            demo=True,
            history_path=history,
            history_interval=3.0,
        )

    @property
    def supervisor(self) -> GroupSupervisor | None:
        """The demo's supervisor once the console started it, else None."""
        return self.supervisor_holder[0] if self.supervisor_holder else None

    def close(self) -> None:
        """Stop what the demo started and remove what it made, its folder last; idempotent.

        The job feeder, the agents (threads of the simulated runtime, or the
        ``--docker`` containers), the organisation's server, the demo tenant's
        sign-in, the ``--docker`` registry and image tag, then the folder.
        """
        try:
            self.cleanup.close()
        finally:
            self.instance.remove()


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
    instance: DemoInstance | None = None,
    foreign_agents: int = 0,
) -> DemoEnvironment:
    """Start the simulated organisation and everything around it, in ``instance``.

    ``startup`` is how long the simulated agents take to register and to open
    their session (default: the real agent's ~6 s and ~3 s), so the demo shows
    what hot standby hides. ``auth = "service-principal"`` signs in as a demo
    application of the simulated tenant instead of with a PAT (`demo_auth`).
    ``instance``: the demo's folder (default: a new one); its configuration file
    is written there. Whatever fails on the way is undone before the error rises.
    ``foreign_agents``: agents of other hosts in the pool (`sim.foreign`), to see what
    a shared pool of a large organisation costs.
    """
    instance = instance or DemoInstance.create()
    with ExitStack() as cleanup:
        cleanup.callback(instance.remove)
        env = _build(
            cleanup, instance, agents, jobs_per_minute, docker, seed, startup, auth, foreign_agents
        )
        env.cleanup = cleanup.pop_all()
        return env


def _build(
    cleanup: ExitStack,
    instance: DemoInstance,
    agents: int,
    jobs_per_minute: float | None,
    docker: bool,
    seed: int | None,
    startup: tuple[float, float] | None,
    auth: str,
    foreign_agents: int,
) -> DemoEnvironment:
    """`build_demo`'s work: each part started is registered in ``cleanup`` at once."""
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.config.loader import load_config, save_config
    from gpuci_tui.sim.foreign import add_foreign_agents
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
    add_foreign_agents(org, pool_id, foreign_agents)
    server = SimServer(org)
    server.start()
    cleanup.callback(quietly(server.stop))
    extra = {LABEL_DEMO: "1"}
    engine = agents_engine(org, server.port, instance.root, docker, cleanup)
    runtime = engine.runtime
    config = Config(
        azure=AzureConfig(url=server.org_url, pool=DEMO_POOL),
        agents=AgentsConfig(
            count=agents,
            image=engine.image,
            name_prefix=DEMO_PREFIX,
            network=engine.network,
            gpus=engine.gpus,
        ),
        supervisor=SupervisorConfig(poll_interval=2.0, backoff_base=1.0, backoff_max=10.0),
    )
    if docker:
        # Removed after the feeder stopped (`cleanup` runs the last registered first).
        labels = instance_labels(config, extra)
        cleanup.callback(quietly(lambda: remove_containers(runtime, labels)))
    _seed_leftovers(org, backdate, config, token)
    identity = None
    if auth == "service-principal":
        from gpuci_tui.demo_auth import service_principal

        identity = service_principal(org, config.azure)
        cleanup.callback(quietly(identity.close))
        config = replace(config, azure=identity.azure)
    # A file like any instance's: `reload` reads it again, other shells name it (--config).
    save_config(config, instance.config_path)
    config = load_config(instance.config_path)
    api = AzureDevOpsClient(server.org_url, token if identity is None else identity.credential)
    cleanup.callback(quietly(api.close))
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
    cleanup.callback(quietly(feeder.stop))  # before the agents go: no job queued for none
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
        gpus=max(1, min(agents, 8)), seed=seed, busy=busy, owner=owner, model=DEMO_GPU_MODEL
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
        instance=instance,
        cleanup=cleanup,
        docker=docker,
        extra_labels=extra,
        supervisor_holder=holder,
        identity=identity,
        pull_note=engine.pull_note,
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
