"""``gpuci-tui run``: build the real services and serve the supervisor."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable

from gpuci_tui.core.agentspec import instance_id
from gpuci_tui.core.config import Config
from gpuci_tui.core.protocols import GpuciError, RuntimeUnavailableError, TokenSource

from . import exitcodes
from .common import CliExit, fail, load

TOKEN_CACHE_SECONDS = 60.0


def cached_token(tokens: TokenSource, org_url: str) -> Callable[[], str]:
    """A token getter that asks the keyring at most once a minute (hot swap still works)."""
    lock = threading.Lock()
    state: dict[str, object] = {"at": 0.0, "value": ""}

    def get() -> str:
        with lock:
            now = time.monotonic()
            if not state["value"] or now - float(state["at"]) > TOKEN_CACHE_SECONDS:  # type: ignore[arg-type]
                state["value"] = tokens.get_token(org_url)
                state["at"] = now
            return str(state["value"])

    return get


def setup_logging(level: str) -> None:
    """Log to stderr (journald under systemd) with every known secret redacted."""
    from gpuci_tui.core.secrets import SecretRedactor

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretRedactor())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def real_services(config: Config) -> tuple[object, object, TokenSource]:
    """Azure client, Docker runtime and token store for ``config`` (checked up front)."""
    from gpuci_tui.core.azure import AzureDevOpsClient
    from gpuci_tui.core.runtime import DockerRuntime
    from gpuci_tui.core.secrets import TokenStore

    tokens = TokenStore()
    try:
        tokens.get_token(config.azure.url)
    except GpuciError as exc:
        raise CliExit(exitcodes.CREDENTIALS, str(exc)) from None
    runtime = DockerRuntime()
    try:
        runtime.ping()
    except RuntimeUnavailableError as exc:
        raise CliExit(exitcodes.RUNTIME, str(exc)) from None
    api = AzureDevOpsClient(config.azure.url, cached_token(tokens, config.azure.url))
    return api, runtime, tokens


def run_daemon(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM or `gpuci-tui stop`."""
    from gpuci_tui.core.daemon import AlreadyRunningError, DaemonPaths, serve

    try:
        setup_logging(args.log_level)
        config = load(args)
        api, runtime, tokens = real_services(config)
        paths = DaemonPaths.for_instance(instance_id(config))
        return asyncio.run(
            serve(config, api=api, runtime=runtime, tokens=tokens, paths=paths)  # type: ignore[arg-type]
        )
    except CliExit as exc:
        return fail(exc)
    except AlreadyRunningError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.ALREADY_RUNNING
    except GpuciError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.FAILED
