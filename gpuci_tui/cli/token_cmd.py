"""``gpuci-tui token set|check|delete``: the PAT in the keyring, never echoed.

Without a Secret Service the keyring is gpuci-tui's encrypted file store, whose
passphrase is asked on the terminal (`unlock`): twice when ``set`` creates it,
once for every later command.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING

from gpuci_tui.core.errors import GpuciError

from . import exitcodes
from .common import CliExit, fail, load
from .unlock import NoEncryptedStore, command_store, keyring_name

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config
    from gpuci_tui.core.secrets.token_store import TokenStore


def run_token(args: argparse.Namespace) -> int:
    """Manage the PAT of the configured organisation."""
    try:
        config = load(args)
        if config.azure.auth != "pat":
            from .identity_cmd import run_identity_token

            return run_identity_token(args, config)
        url = config.azure.url
        if args.action == "set":
            # The keyring first: a store that cannot be opened fails before the PAT is typed.
            store = command_store(config.azure, writes=True)
            pat = (
                sys.stdin.readline()
                if args.stdin or not sys.stdin.isatty()
                else getpass.getpass("PAT: ")
            )
            store.set_token(url, pat.strip())
            print(f"PAT stored in {keyring_name(store)} for {url}")
        elif args.action == "delete":
            try:
                store = command_store(config.azure, writes=True, creating=False)
            except NoEncryptedStore:
                print(f"no PAT was stored for {url}")
                return exitcodes.OK
            if store.delete_token(url):
                print(f"PAT deleted from {keyring_name(store)} for {url}")
            else:
                print(f"no PAT was stored in {keyring_name(store)} for {url}")
        else:
            return _check(command_store(config.azure), config)
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
    where = {"file": str(store.pat_file()), "keyring": keyring_name(store)}.get(source, source)
    check = AzureDevOpsClient(url, pat).validate_pat(config.azure.pool)
    print(f"PAT from {where}: {check.message}")
    return exitcodes.for_check(check.reason)
