"""The identity gpuci-tui signs in with, checked live; a service principal's secret stored.

``check-config`` calls `live_check` for a service principal or managed identity
(and for a PAT with ``--live``): it acquires a token and checks the pool's
permissions, so a wrong secret or a missing pool role shows up before the
daemon starts. ``token set|check|delete`` call `run_identity_token` when
``[azure] auth`` is not ``pat``.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING

from . import exitcodes

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore


def live_check(config: Config, store: EntraSecretStore | None = None) -> int:
    """Sign in as ``[azure] auth`` says and check the pool; print one line; exit code."""
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.secrets.entra_msal import make_credential

    from .unlock import command_store

    store = store or command_store(config.azure)
    url = config.azure.url
    credential = make_credential(config.azure, lambda: store.get_token(url), store=store)
    with AzureDevOpsClient(url, credential, max_retries=1) as client:
        check = client.validate_pat(config.azure.pool)
    print(f"  identity: {credential.describe()}")
    print(f"  {'OK' if check.ok else 'PROBLEM'}: {check.message}")
    return exitcodes.for_check(check.reason)


def run_identity_token(args: argparse.Namespace, config: Config) -> int:
    """``token set|check|delete`` for a service principal (its secret or key passphrase)."""
    from gpuci_tui.core.secrets.entra_secrets import CERT_PASSPHRASE, CLIENT_SECRET, keyring_user
    from gpuci_tui.core.secrets.token_store import SERVICE

    from .unlock import NoEncryptedStore, command_store, keyring_name

    azure = config.azure
    if args.action == "check":
        return live_check(config, command_store(azure))
    if azure.auth == "managed-identity":
        print("a managed identity has no secret to store: Azure gives the host its tokens")
        return exitcodes.OK
    what = CERT_PASSPHRASE if azure.client_certificate else CLIENT_SECRET
    label = "certificate passphrase" if azure.client_certificate else "client secret"
    try:
        store = command_store(azure, writes=True, creating=args.action == "set")
    except NoEncryptedStore:
        print(f"no {label} was stored for {azure.client_id}")
        return exitcodes.OK
    if args.action == "set":
        value = (
            sys.stdin.readline()
            if args.stdin or not sys.stdin.isatty()
            else getpass.getpass(f"{label.capitalize()} of {azure.client_id}: ")
        )
        store.set_secret(azure.url, what, azure.client_id, value)
        print(f"{label} stored in {keyring_name(store)} for {azure.client_id}")
        return exitcodes.OK
    user = keyring_user(azure.url, what, azure.client_id)
    if store.backend.get_password(SERVICE, user) is None:
        print(f"no {label} was stored in {keyring_name(store)} for {azure.client_id}")
    else:
        store.backend.delete_password(SERVICE, user)
        print(f"{label} deleted from {keyring_name(store)} for {azure.client_id}")
    return exitcodes.OK
