"""Everything the console needs from the outside world, handed to it in one object.

The console never reaches for Docker, NVML, the keyring or Azure DevOps itself:
the CLI (real implementations), the demo (simulations) and the tests (fakes)
build a `Services` and pass it to `gpuci_tui.app.make_app`. That keeps the UI
testable with deterministic fakes and keeps every blocking client in one place.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.fleet.link import Fleet
from gpuci_tui.core.host.handle import SupervisorHandle
from gpuci_tui.core.protocols import ContainerRuntime, GpuSampler, PatCheck, Pool

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

    from gpuci_tui.core.secrets.token_store import KeyringStatus


class TokenStoreLike(Protocol):
    """The part of `gpuci_tui.core.secrets.token_store.TokenStore` the console uses."""

    def get_token(self, org_url: str) -> str:
        """Return the PAT for ``org_url`` or raise `GpuciError` with advice."""
        ...

    def set_token(self, org_url: str, pat: str) -> None:
        """Store the PAT; raise `GpuciError` when the keyring is unusable."""
        ...

    def source_of_token(self, org_url: str) -> str:
        """``file``, ``env``, ``keyring`` or ``none``."""
        ...


class SetupClient(Protocol):
    """The part of the Azure DevOps client the setup wizard uses (blocking)."""

    def validate_pat(self, pool_name: str | None) -> PatCheck:
        """Check the PAT (and the pool when given); never raises for expected failures."""
        ...

    def list_pools(self) -> Sequence[Pool]:
        """The organisation's agent pools with their sizes."""
        ...


AzureFactory = Callable[[str, str], SetupClient]
"""``(org_url, pat) -> client``."""

StartSupervisor = Callable[[Config], Awaitable[SupervisorHandle]]
"""Starts (or attaches to) a supervisor for a freshly saved configuration."""


@dataclass(kw_only=True, frozen=True)
class Services:
    """The console's injected dependencies.

    Attributes are read by the App and its screens only; nothing here is
    created by the console itself. Frozen: what changes at run time (the
    configuration the wizard saved, the token store it unlocked, the attached
    supervisor) comes back as a new `Services` built by the App
    (`dataclasses.replace`), never as a change to one a screen already holds.
    """

    config: Config | None
    """The loaded configuration; None starts the setup wizard."""
    config_path: Path
    """Where the wizard saves the configuration."""
    gpu: GpuSampler
    """Samples the host's GPUs (blocking: always called from a thread worker)."""
    handle: SupervisorHandle | None = None
    """The running supervisor; None until the wizard has saved a config and
    `start_supervisor` returned one (or when attaching failed)."""
    runtime: ContainerRuntime | None = None
    """For the log view and the wizard's image check; None disables both."""
    token_store: TokenStoreLike | None = None
    """Where the wizard stores the PAT (`gpuci_tui.core.secrets.token_store.TokenStore`)."""
    azure_factory: AzureFactory | None = None
    """Builds an Azure DevOps client for the wizard's PAT and pool checks."""
    start_supervisor: StartSupervisor | None = None
    """Called with the saved config once the wizard finishes (or at start when
    a config exists but no handle was given)."""
    force_setup: bool = False
    """Show the setup wizard even though ``config`` is given (``gpuci-tui setup`` on an
    existing file): the wizard starts from the current values."""
    readonly: bool = False
    """``--readonly``: every action refuses; the console only watches."""
    demo: bool = False
    """Running against the simulated organisation (shows a DEMO badge)."""
    clock: Callable[[], float] = time.time
    """Wall clock (Unix seconds) for ages, uptimes and countdowns; frozen in tests."""
    gpu_interval: float = 1.0
    """Seconds between GPU samples (the next sample is scheduled after the
    previous one finished, so a slow driver never stacks calls up)."""
    log_interval: float = 1.0
    """Seconds between log polls while the log view is open."""
    keyring_diagnose: Callable[[], KeyringStatus] | None = None
    """Override for `gpuci_tui.core.secrets.token_store.diagnose_keyring` (tests)."""
    open_cryptfile: Callable[[str], KeyringBackend] | None = None
    """Override for `gpuci_tui.core.secrets.token_store.open_cryptfile` (tests); receives the
    passphrase and returns a keyring backend (or raises `GpuciError`)."""
    token_store_factory: Callable[[KeyringBackend], TokenStoreLike] | None = None
    """Builds a token store on an explicit keyring backend (default:
    ``gpuci_tui.core.secrets.token_store.TokenStore(backend=...)``)."""
    hostname: str | None = None
    """Default agent name prefix in the wizard (default: this host's name)."""
    history_path: Path | None = None
    """The job history file the history view reads (read-only; it may not exist yet).
    None: this console has no history to show (e.g. the daemon runs on another host)."""
    history_interval: float = 5.0
    """Seconds between re-reads of the history while its view is open."""
    fleet: Fleet | None = None
    """The fleet console (``--host`` / ``[fleet]``): the hosts and their handles; the
    overview replaces the dashboard, and ``handle``/``config`` are not used."""
