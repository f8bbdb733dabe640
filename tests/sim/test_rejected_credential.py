"""A credential the organisation refused is not handed to agent containers until it is
accepted again or replaced: starts wait (the engine's token pause) instead of failing
one after another."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.errors import AzureAuthError
from gpuci_tui.core.secrets.credentials import PatCredential
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

OLD = "simPAT-old-0123456789abcdefghijklmnopqrstuvwxyzABCDE"
NEW = "simPAT-new-0123456789abcdefghijklmnopqrstuvwxyzABCDE"


@pytest.fixture
def server() -> Iterator[SimServer]:
    org = SimOrg("simorg")
    org.add_pat(OLD)
    org.add_pool("gpu")
    with SimServer(org) as s:
        yield s


def test_a_revoked_pat_waits_for_a_new_one(server: SimServer) -> None:
    current = {"pat": OLD}
    cred = PatCredential(lambda: current["pat"])
    client = AzureDevOpsClient(server.org_url, cred, max_retries=0)
    client.list_pools()
    assert cred.get_token(server.org_url) == OLD

    server.org.revoke_pat(OLD)
    with pytest.raises(AzureAuthError, match="wrong, expired or revoked"):
        client.list_pools()
    with pytest.raises(AzureAuthError, match="Agents are not started until"):
        cred.get_token(server.org_url)

    # A new PAT stored: handed out at once, before any request proves it.
    server.org.add_pat(NEW)
    current["pat"] = NEW
    assert cred.get_token(server.org_url) == NEW
    client.list_pools()

    # The organisation accepting again (a refusal that was not for good) clears it too.
    cred.note_rejected(NEW)
    with pytest.raises(AzureAuthError):
        cred.get_token(server.org_url)
    client.list_pools()
    assert cred.get_token(server.org_url) == NEW
