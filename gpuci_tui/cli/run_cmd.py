"""``gpuci-tui run``: build the real services and serve the supervisor."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from gpuci_tui.core.config.loader import Config, daemon_instance
from gpuci_tui.core.errors import GpuciError, RuntimeUnavailableError
from gpuci_tui.core.protocols import TokenSource

if TYPE_CHECKING:
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.docker.runtime import DockerRuntime
    from gpuci_tui.core.secrets.credentials import Credential

from . import exitcodes
from .common import CliExit, fail, load

TOKEN_CACHE_SECONDS = 60.0


class CachedToken:
    """Asks the token source at most once a minute, so a PAT swapped in the keyring is
    picked up, but keeps the last good PAT when the source goes away (a detached
    daemon outlives the SSH login whose D-Bus session held the keyring).
    """

    def __init__(self, tokens: TokenSource, org_url: str) -> None:
        self._tokens = tokens
        self._url = org_url
        self._lock = threading.Lock()
        self._value = ""
        self._at = 0.0

    def __call__(self) -> str:
        """The PAT: asked afresh once a minute, else the last good one."""
        with self._lock:
            now = time.monotonic()
            if not self._value or now - self._at > TOKEN_CACHE_SECONDS:
                try:
                    self._value = self._tokens.get_token(self._url)
                except GpuciError:
                    if not self._value:
                        raise
                self._at = now
            return self._value

    def get_token(self, org_url: str) -> str:
        """`TokenSource` face, for the supervisor's container starts."""
        return self()


def cached_token(tokens: TokenSource, org_url: str) -> CachedToken:
    """See `CachedToken`."""
    return CachedToken(tokens, org_url)


def setup_logging(level: str, handler: logging.Handler | None = None) -> None:
    """Log to stderr (journald under systemd), or to ``handler``, with every known secret
    redacted.
    """
    from gpuci_tui.core.secrets.token_store import SecretRedactor

    handler = handler or logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretRedactor())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def real_services(
    config: Config, tokens: TokenSource | None = None
) -> tuple[AzureDevOpsClient, DockerRuntime, Credential]:
    """Azure client, Docker runtime and credential for ``config`` (checked up front).

    The credential is the one ``[azure] auth`` names; it is also the supervisor's
    token source (what a container registers with).

    Raises:
        CliExit: no PAT can be read (credentials) or the Docker engine is unusable (runtime).
    """
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.docker.runtime import DockerRuntime
    from gpuci_tui.core.secrets.entra_msal import make_credential
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore
    from gpuci_tui.core.secrets.token_store import TokenStore

    from .unlock import command_store

    # Without a Secret Service: the encrypted file store, its passphrase asked on the terminal.
    tokens = tokens or command_store(config.azure)
    if config.azure.auth == "pat":
        # An Entra sign-in is not tried here: one that fails for a while (network,
        # Entra) is retried by the supervisor rather than ending the daemon.
        try:
            tokens.get_token(config.azure.url)
        except GpuciError as exc:
            raise CliExit(exitcodes.CREDENTIALS, str(exc)) from None
    runtime = DockerRuntime()
    try:
        runtime.ping()
    except RuntimeUnavailableError as exc:
        raise CliExit(exitcodes.RUNTIME, str(exc)) from None
    # The client secret is read from the keyring the PAT would be (e.g. the
    # encrypted file store the console unlocked).
    sp = config.azure.auth == "service-principal" and isinstance(tokens, TokenStore)
    store = EntraSecretStore(tokens.backend) if sp and isinstance(tokens, TokenStore) else None
    credential = make_credential(config.azure, cached_token(tokens, config.azure.url), store=store)
    api = AzureDevOpsClient(config.azure.url, credential)
    return api, runtime, credential


def raise_file_limit() -> Callable[[], None]:
    """Lift the soft limit on open files to the hard one; returns what logs the figures.

    Logged once the daemon is about to serve, so a run that stops on its
    configuration prints only why.
    """
    from gpuci_tui.core.host.control.serving import raise_nofile_limit

    before, after, hard = raise_nofile_limit()
    return partial(
        logging.getLogger("gpuci_tui.daemon").info,
        "open files limit: %s (soft, was %s; hard %s)",
        _limit(after),
        _limit(before),
        _limit(hard),
    )


def _limit(value: int) -> str:
    import resource

    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def run_daemon(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM or `gpuci-tui stop`."""
    from gpuci_tui.core.host.daemon import AlreadyRunningError, DaemonPaths, serve
    from gpuci_tui.core.secrets.no_core_dumps import forbid_core_dumps

    try:
        setup_logging(args.log_level)
        forbid_core_dumps()  # before the PAT is read: no core file or ptrace may hold it
        report_file_limit = raise_file_limit()
        from gpuci_tui.core.host.memory import limit_arenas

        limit_arenas()  # before any thread starts: see core/host/memory.py
        # An image the driver cannot run is a warning here: its group's slots are held.
        config = load(args, check_gpus=True, cuda_fatal=False)
        api, runtime, tokens = real_services(config)
        paths = DaemonPaths.for_instance(daemon_instance(config))
        from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler

        # No NVIDIA driver is "no GPU", not an error: the sampler then reports none.
        gpu = NvmlSampler()
        report_file_limit()
        return asyncio.run(
            serve(config, api=api, runtime=runtime, tokens=tokens, paths=paths, gpu=gpu)
        )
    except CliExit as exc:
        return fail(exc)
    except AlreadyRunningError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.ALREADY_RUNNING
    except GpuciError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.FAILED
