"""``[azure] auth`` and the service principal's keys: what each method needs, worded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from tests.core.config_helpers import base_doc, problems, write

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT = "11111111-2222-4333-8444-555555555555"


def azure(**kw: Any) -> dict[str, Any]:
    doc = base_doc()
    doc["azure"].update(kw)
    return doc


def test_pat_is_the_default_and_is_not_written(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", base_doc()))
    assert (config.azure.auth, config.azure.authority) == (
        "pat",
        "https://login.microsoftonline.com",
    )
    save_config(config, tmp_path / "out.toml")
    assert "auth" not in (tmp_path / "out.toml").read_text()


def test_a_service_principal_round_trips(tmp_path: Path) -> None:
    doc = azure(auth="service-principal", tenant_id=TENANT, client_id=CLIENT)
    config = load_config(write(tmp_path / "c.toml", doc))
    assert (config.azure.auth, config.azure.tenant_id, config.azure.client_id) == (
        "service-principal",
        TENANT,
        CLIENT,
    )
    save_config(config, tmp_path / "out.toml")
    assert load_config(tmp_path / "out.toml").azure == config.azure


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (
            {"auth": "service-principal"},
            [
                'azure.tenant_id: is needed with auth = "service-principal"; copy the '
                "Directory (tenant) ID from the app registration's overview",
                'azure.client_id: is needed with auth = "service-principal"; copy the '
                "Application (client) ID from the app registration's overview",
            ],
        ),
        (
            {"auth": "oauth"},
            [
                "azure.auth: must be one of 'pat', 'service-principal', 'managed-identity', "
                "got 'oauth'"
            ],
        ),
        (
            {"auth": "service-principal", "tenant_id": "not a tenant", "client_id": CLIENT},
            [
                "azure.tenant_id: 'not a tenant' is not a tenant id: use the Directory (tenant) "
                "ID GUID from the app registration's overview, or the tenant's domain "
                "(contoso.onmicrosoft.com)"
            ],
        ),
        (
            {"authority": "http://login.example.com"},
            [
                "azure.authority: 'http://login.example.com' is not a sign-in host: use "
                "https://login.microsoftonline.com (the default), or your cloud's, e.g. "
                "https://login.microsoftonline.us"
            ],
        ),
        (
            {"pat_expires": "31/03/2027"},
            [
                "azure.pat_expires: '31/03/2027' is not a date: write the PAT's expiry as "
                'YYYY-MM-DD, e.g. "2027-03-31"'
            ],
        ),
        (
            {"auth": "managed-identity", "pat_expires": "2027-03-31"},
            ['azure.pat_expires: is only used with auth = "pat"; remove it'],
        ),
        (
            {"client_certificate": "/etc/gpuci/sp.pem"},
            ['azure.client_certificate: is only used with auth = "service-principal"; remove it'],
        ),
    ],
)
def test_auth_problems_are_worded(
    tmp_path: Path, keys: dict[str, Any], expected: list[str]
) -> None:
    assert problems(tmp_path, azure(**keys)) == expected


def test_a_managed_identity_needs_nothing_else(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", azure(auth="managed-identity")))
    assert (config.azure.auth, config.azure.client_id) == ("managed-identity", "")


def test_a_pat_expiry_round_trips(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", azure(pat_expires="2027-03-31")))
    assert config.azure.pat_expires == "2027-03-31"
    save_config(config, tmp_path / "out.toml")
    assert 'pat_expires = "2027-03-31"' in (tmp_path / "out.toml").read_text()
