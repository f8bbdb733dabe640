"""One organisation-URL rule: config validation and the client accept and normalise alike."""

from __future__ import annotations

import pytest

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.config.loader import ConfigError, validate_org_url
from gpuci_tui.core.errors import AzureError

PAT = "p" * 52


@pytest.mark.parametrize(
    ("text", "url", "name"),
    [
        ("https://dev.azure.com:443/acme/", "https://dev.azure.com/acme", "acme"),
        (
            "https://acme.visualstudio.com/DefaultCollection",
            "https://acme.visualstudio.com",
            "acme",
        ),
        ("HTTP://LOCALHOST:80/org", "http://localhost/org", "org"),
        ("http://127.0.0.1:8080/org", "http://127.0.0.1:8080/org", "org"),
    ],
)
def test_config_and_client_normalise_the_same_way(text: str, url: str, name: str) -> None:
    client = AzureDevOpsClient(text, PAT)
    assert validate_org_url(text) == client.org_url == url
    assert client.org_name == name


@pytest.mark.parametrize(
    "text",
    [
        "https://dev.azure.com/-acme",
        "https://dev.azure.com/" + "a" * 51,
        "https://acme.visualstudio.com/Project",
        "https://dev.azure.com/acme/project",
    ],
)
def test_config_and_client_refuse_the_same_urls(text: str) -> None:
    with pytest.raises(ConfigError):
        validate_org_url(text)
    with pytest.raises(AzureError):
        AzureDevOpsClient(text, PAT)
