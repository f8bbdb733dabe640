"""Exit codes that scripts can rely on (documented in docs/troubleshooting.md, "Exit codes and log output", and ``--help``).

Each code means one thing: `for_error` and `for_check` are the one place an error
or a sign-in check becomes a code, so "could not reach Azure DevOps" is never
reported as "the credentials are wrong".
"""

from __future__ import annotations

OK = 0
FAILED = 1
"""The command ran and was refused or failed (e.g. unknown slot)."""
USAGE = 2
"""Bad arguments (argparse)."""
NO_DAEMON = 3
"""No daemon is running for this configuration, or it did not answer."""
CONFIG = 4
"""The configuration file is missing or invalid (or names a pool the organisation lacks)."""
CREDENTIALS = 5
"""No usable credentials (keyring absent/locked, PAT file unreadable, PAT or identity refused)."""
ALREADY_RUNNING = 6
"""``run``: another daemon supervises the same agents."""
RUNTIME = 7
"""The container engine is unusable (socket missing, permission denied)."""
UNREACHABLE = 8
"""Azure DevOps (or the sign-in service) could not be reached (DNS, connection, TLS,
timeout), answered with a server error, or asked to wait (rate limit): nothing says the
credentials are wrong; try again later."""
INTERRUPTED = 130
"""Ctrl-C."""
OUTPUT_CLOSED = 141
"""The reader of standard output went away (``status --json | head``): 128 + SIGPIPE, as
other Unix tools that are killed by SIGPIPE report it, but without a traceback."""

MEANINGS: dict[int, str] = {
    OK: "ok",
    FAILED: "refused/failed",
    USAGE: "usage",
    NO_DAEMON: "no daemon",
    CONFIG: "configuration",
    CREDENTIALS: "credentials",
    ALREADY_RUNNING: "already running",
    RUNTIME: "container engine unusable",
    UNREACHABLE: "Azure DevOps unreachable",
    INTERRUPTED: "interrupted",
    OUTPUT_CLOSED: "output closed (SIGPIPE)",
}
"""Every code in a few words, in the order ``--help`` lists them."""


def for_error(exc: BaseException) -> int:
    """The exit code of a command that ended on ``exc`` (`FAILED` for anything unnamed)."""
    from gpuci_tui.core.config.file import ConfigError
    from gpuci_tui.core.config.paths import PathError
    from gpuci_tui.core.errors import (
        AzureAuthError,
        AzureRateLimitError,
        AzureScopeError,
        AzureServerError,
        AzureUnreachableError,
        RuntimeUnavailableError,
    )
    from gpuci_tui.core.host.control.client import ControlError
    from gpuci_tui.core.host.instance import AlreadyRunningError
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretError
    from gpuci_tui.core.secrets.token_store import (
        InvalidTokenError,
        KeyringUnavailableError,
        TokenFileError,
        TokenMissingError,
    )

    table: tuple[tuple[tuple[type[BaseException], ...], int], ...] = (
        ((ConfigError, PathError), CONFIG),
        ((AzureUnreachableError, AzureRateLimitError, AzureServerError), UNREACHABLE),
        (
            (
                AzureAuthError,
                AzureScopeError,
                KeyringUnavailableError,
                TokenMissingError,
                InvalidTokenError,
                TokenFileError,
                EntraSecretError,
            ),
            CREDENTIALS,
        ),
        ((RuntimeUnavailableError,), RUNTIME),
        ((AlreadyRunningError,), ALREADY_RUNNING),
        ((ControlError,), NO_DAEMON),
        ((KeyboardInterrupt,), INTERRUPTED),
    )
    return next((code for kinds, code in table if isinstance(exc, kinds)), FAILED)


_CHECKS = {
    "ok": OK,
    "unreachable": UNREACHABLE,
    "rate_limited": UNREACHABLE,
    "pool_not_found": CONFIG,
    "pool_ambiguous": CONFIG,
}


def for_check(reason: str) -> int:
    """The exit code of a sign-in check (`PatCheck.reason`): an unreachable organisation
    is `UNREACHABLE`, a pool the file names but the organisation lacks is `CONFIG`, every
    other refusal (bad PAT, no scope, no pool role, a refused identity) `CREDENTIALS`.
    """
    return _CHECKS.get(reason, CREDENTIALS)
