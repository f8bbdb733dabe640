"""``gpuci-tui`` / ``gpuci-tui setup``: the console, attached to a daemon that survives SSH.

With a configuration, the console attaches to the running ``gpuci-tui run``
daemon of that configuration; when there is none it starts one detached (its
own session, output to a log file) so that closing the SSH session does not
stop replenishing. ``--foreground`` runs the supervisor inside the console
instead, under the same instance lock as the daemon: with a daemon already
answering it attaches to it, so no pool ever has two supervisors. Quitting the
console never stops a detached daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.config.loader import Config, daemon_instance
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.control.client import ControlClient, ControlError, SocketHandle
from gpuci_tui.core.host.handle import InProcessHandle, SupervisorHandle
from gpuci_tui.core.protocols import GpuSampler, TokenSource

from . import exitcodes
from .common import CliExit, config_path, fail, load, socket_for
from .reach import Reached, daemon_config, daemon_of

if TYPE_CHECKING:
    from textual.app import App

    from gpuci_tui.core.host.assemble import Assembly

DAEMON_START_TIMEOUT = 20.0


def daemon_alive(path: Path) -> bool:
    """Whether a daemon answers on ``path``."""
    try:
        return bool(ControlClient(path, timeout=3.0).hello().get("ok"))
    except ControlError:
        return False


def start_detached_daemon(config_file: Path, config: Config) -> SocketHandle:
    """Start ``gpuci-tui run`` in its own session and wait until its socket answers.

    Raises:
        GpuciError: the daemon exited or did not answer in time (with its last log lines).
    """
    from gpuci_tui.core.config.paths import log_dir

    sock = socket_for(config)
    log_path = log_dir() / f"daemon-{daemon_instance(config)}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(log_path, "ab") as log_file:
        os.chmod(log_path, 0o600)
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(config_file), "run"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,  # survives the SSH session's SIGHUP
            close_fds=True,
        )
    deadline = time.monotonic() + DAEMON_START_TIMEOUT
    while time.monotonic() < deadline:
        if daemon_alive(sock):
            return SocketHandle(sock)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    tail = _tail(log_path, 8)
    raise GpuciError(
        f"the supervisor daemon did not start (log: {log_path}):\n{tail}"
        if tail
        else f"the supervisor daemon did not start; see {log_path}"
    )


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


ATTACHED_NOTICE = (
    "a daemon already supervises this pool: attached to it instead of starting a second supervisor"
)


def in_process_supervisor(
    config: Config, tokens: TokenSource | None = None, gpu: GpuSampler | None = None
) -> SupervisorHandle:
    """A supervisor running inside the console's event loop (``--foreground``).

    Assembled and locked like the daemon's (`gpuci_tui.core.host.assemble.open_assembly`):
    its groups, the job history, the saved intent, the GPU faults and, with
    ``gpu``, GPU accounting, in the instance's own files. ``tokens`` is the
    console's token store: after the wizard unlocked an encrypted file store
    with a passphrase, only that store can read the PAT.

    Raises:
        AlreadyRunningError: another supervisor holds the instance's lock.
        CliExit: no PAT, or no usable Docker engine.
    """
    from gpuci_tui.core.host.assemble import open_assembly
    from gpuci_tui.core.host.instance import DaemonPaths

    from .run_cmd import real_services

    api, runtime, cached = real_services(config, tokens)
    parts = open_assembly(
        config,
        paths=DaemonPaths.for_instance(daemon_instance(config)),
        api=api,
        runtime=runtime,
        tokens=cached,
        mode="in-process",
        gpu=gpu,
    )
    parts.start()
    _IN_PROCESS.append(parts)
    return InProcessHandle(parts.supervisor)


async def foreground_supervisor(
    config: Config,
    tokens: TokenSource | None,
    gpu: GpuSampler | None,
    notify: Callable[[str], None],
) -> SupervisorHandle:
    """``--foreground``: supervise in this process, unless a daemon already does.

    One supervisor per pool, whatever starts it: with a daemon answering on the
    configuration's socket, the console attaches to it (and ``notify`` says so)
    instead of starting a second supervisor of the same agents.

    Raises:
        AlreadyRunningError: the instance's lock is held but no daemon answers
            (one still starting, or another ``--foreground`` console): named in the message.
    """
    from gpuci_tui.core.host.instance import AlreadyRunningError

    sock = socket_for(config)
    if await asyncio.to_thread(daemon_alive, sock):
        notify(ATTACHED_NOTICE)
        return SocketHandle(sock)
    try:
        return in_process_supervisor(config, tokens, gpu)
    except AlreadyRunningError as exc:
        # The lock decides; the socket only says whether there is a daemon to attach to.
        if await asyncio.to_thread(daemon_alive, sock):
            notify(ATTACHED_NOTICE)
            return SocketHandle(sock)
        if exc.holder_mode != "daemon":
            raise AlreadyRunningError(
                f"not starting a second supervisor: {exc}", exc.holder_mode
            ) from None
        raise AlreadyRunningError(
            f"not starting a second supervisor: {exc} No daemon answers on {sock} yet "
            "(it may still be starting: try again in a moment)."
        ) from None


_IN_PROCESS: list[Assembly] = []
"""The in-process supervisors this console started (their locks are held until closed)."""


async def close_in_process() -> None:
    """Stop the in-process supervisors started here and release their locks."""
    while _IN_PROCESS:
        await _IN_PROCESS.pop().close()


def run_console(args: argparse.Namespace, setup: bool) -> int:
    """Open the console (wizard or dashboard)."""
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        print(
            "gpuci-tui: the console needs a terminal; use `gpuci-tui status` in scripts",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    from gpuci_tui.core.secrets.no_core_dumps import forbid_core_dumps

    forbid_core_dumps()  # the wizard and --foreground hold the PAT in memory
    try:
        app = build_console(args, setup)
        run_until_closed(app)
    except CliExit as exc:
        return fail(exc)
    return exitcodes.OK


def build_console(args: argparse.Namespace, setup: bool) -> App[Any]:
    """The console for ``args``: its services, how it starts or attaches to a supervisor.

    A file that does not load opens the console on the configuration the daemon of
    that file runs (`reach`), with the file's problems shown once it is attached.

    Raises:
        CliExit: code 4 when the file does not load and no daemon of it answers.
    """
    from gpuci_tui.app import make_app
    from gpuci_tui.core.config.loader import ConfigError, load_config
    from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
    from gpuci_tui.core.secrets.token_store import TokenStore
    from gpuci_tui.services import Services, SetupClient

    try:
        path = config_path(args)
    except GpuciError as exc:
        raise CliExit(exitcodes.CONFIG, str(exc)) from None
    config: Config | None = None
    broken: Reached | None = None
    if path.exists():
        try:
            config = load_config(path)
        except ConfigError as exc:
            if not setup:
                try:
                    # A daemon of this file runs on what it loaded: open on that, say the problem.
                    broken = daemon_of(args, tell=False)
                    config = daemon_config(broken)
                except CliExit:
                    raise CliExit(
                        exitcodes.CONFIG, f"{exc}\nFix the file, or run `gpuci-tui setup`."
                    ) from None
    foreground = bool(args.foreground)

    def notify(message: str) -> None:
        app.notify(message, title="Supervisor", severity="warning", markup=False)

    async def start_supervisor(cfg: Config) -> SupervisorHandle:
        if broken is not None:
            app.notify(
                broken.notice(),
                title="Configuration file",
                severity="error",
                timeout=60,
                markup=False,
            )
            return SocketHandle(broken.socket)
        if foreground:
            # The App's current services: the wizard may have unlocked another token store.
            now = app.services
            return await foreground_supervisor(cfg, now.token_store, now.gpu, notify)
        sock = socket_for(cfg)
        if await asyncio.to_thread(daemon_alive, sock):
            return SocketHandle(sock)
        return await asyncio.to_thread(start_detached_daemon, path, cfg)

    runtime = None
    try:
        from gpuci_tui.core.docker.runtime import DockerRuntime

        runtime = DockerRuntime()
    except GpuciError:
        runtime = None

    def azure_factory(url: str, pat: str) -> SetupClient:
        from gpuci_tui.core.azure.client import AzureDevOpsClient

        return AzureDevOpsClient(url, pat)

    def container_name(container_id: str) -> str | None:
        info = runtime.inspect(container_id) if runtime is not None else None
        return info.name if info is not None else None

    try:
        from gpuci_tui.core.config.paths import history_db_path

        # The daemon of this host writes it; the history view opens it read-only.
        history_path: Path | None = history_db_path()
    except GpuciError:
        history_path = None  # the view says there is no history; the console still runs
    services = Services(
        config=config,
        force_setup=setup,
        history_path=history_path,
        config_path=path,
        gpu=NvmlSampler(container_name=container_name),
        runtime=runtime,
        token_store=TokenStore(),
        azure_factory=azure_factory,
        start_supervisor=start_supervisor,
        readonly=bool(args.readonly),
    )
    app = make_app(services)
    return app


def run_until_closed(app: App[Any], **run: Any) -> Any:
    """Run the console, then close the supervisors it ran in-process, in the same loop.

    ``--foreground``: quitting stops the supervisor, but the history rows still being
    written, the history itself and the instance's locks are the assembly's to finish
    (`Assembly.close`), which needs the loop the supervisor ran in. ``run``: for tests
    (``headless``, ``auto_pilot``). Returns what the app returned.
    """

    async def console() -> Any:
        try:
            return await app.run_async(**run)
        finally:
            await close_in_process()

    return asyncio.run(console())


def attach(config: Config) -> SupervisorHandle:
    """A handle on the running daemon of ``config`` (raises `CliExit` code 3 without one)."""
    sock = socket_for(config)
    if not daemon_alive(sock):
        raise CliExit(exitcodes.NO_DAEMON, f"no daemon answers at {sock}")
    return SocketHandle(sock)


__all__ = [
    "ATTACHED_NOTICE",
    "build_console",
    "run_until_closed",
    "attach",
    "daemon_alive",
    "foreground_supervisor",
    "in_process_supervisor",
    "load",
    "run_console",
    "start_detached_daemon",
]
