"""``gpuci-tui token set|check|delete``: the PAT in the keyring, never echoed."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING

from gpuci_tui.core.errors import GpuciError

from . import exitcodes
from .common import CliExit, fail, load

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config
    from gpuci_tui.core.secrets.token_store import TokenStore


def run_token(args: argparse.Namespace) -> int:
    """Manage the PAT of the configured organisation."""
    from gpuci_tui.core.secrets.token_store import TokenStore

    try:
        config = load(args)
        if config.azure.auth != "pat":
            from .identity_cmd import run_identity_token

            return run_identity_token(args, config)
        store = TokenStore()
        url = config.azure.url
        if args.action == "set":
            pat = (
                sys.stdin.readline()
                if args.stdin or not sys.stdin.isatty()
                else getpass.getpass("PAT: ")
            )
            store.set_token(url, pat.strip())
            print(f"PAT stored in the keyring for {url}")
        elif args.action == "delete":
            if store.delete_token(url):
                print(f"PAT deleted from the keyring for {url}")
            else:
                print(f"no PAT was stored in the keyring for {url}")
        else:
            return _check(store, config)
        return exitcodes.OK
    except CliExit as exc:
        return fail(exc)
    except GpuciError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.for_error(exc)


def _check(store: TokenStore, config: Config) -> int:
    from gpuci_tui.core.azure.client import AzureDevOpsClient

    url = config.azure.url
    pat = store.get_token(url)
    source = store.source_of_token(url)
    check = AzureDevOpsClient(url, pat).validate_pat(config.azure.pool)
    print(f"PAT from {source}: {check.message}")
    return exitcodes.for_check(check.reason)
