"""``gpuci-tui demo``: the console on the built-in simulated organisation."""

from __future__ import annotations

import argparse
import asyncio
import sys

from gpuci_tui.core.config import Config
from gpuci_tui.core.handle import InProcessHandle, SupervisorHandle
from gpuci_tui.core.protocols import GpuciError

from . import exitcodes


def run_demo(args: argparse.Namespace) -> int:
    """Start the simulation, run the console, then remove everything the demo made."""
    from gpuci_tui.app import make_app
    from gpuci_tui.core.supervisor import Supervisor
    from gpuci_tui.demo import build_demo
    from gpuci_tui.services import Services

    if not 1 <= args.agents <= 32:
        print("gpuci-tui demo: --agents must be from 1 to 32", file=sys.stderr)
        return exitcodes.USAGE
    try:
        env = build_demo(
            agents=args.agents, jobs_per_minute=args.jobs_per_minute, docker=args.docker
        )
    except GpuciError as exc:
        print(f"gpuci-tui demo: {exc}", file=sys.stderr)
        return exitcodes.RUNTIME if args.docker else exitcodes.FAILED
    tasks: set[asyncio.Task[None]] = set()
    supervisors: list[Supervisor] = []

    async def start_supervisor(config: Config) -> SupervisorHandle:
        supervisor = Supervisor(
            config,
            api=env.api,
            runtime=env.runtime,
            tokens=env.tokens,
            mode="in-process",
            extra_labels=env.extra_labels,
        )
        supervisors.append(supervisor)
        env.supervisor_holder[:] = [supervisor]
        tasks.add(asyncio.get_running_loop().create_task(supervisor.run()))
        return InProcessHandle(supervisor)

    services = Services(
        config=env.config,
        config_path=env.workdir / "config.toml",
        gpu=env.gpu,
        runtime=env.runtime,
        token_store=env.tokens,
        azure_factory=lambda url, pat: env.api,  # type: ignore[arg-type,return-value]
        start_supervisor=start_supervisor,
        readonly=bool(getattr(args, "readonly", False)),
        demo=True,
    )
    try:
        make_app(services).run()
    finally:
        env.close()
    return exitcodes.OK
