"""Rules for ``[azure]``'s identity keys: ``auth``, ``tenant_id``, ``client_id``,
``authority`` and ``client_certificate``.

Kept apart from `validate` because they only matter to the credential seam
(`secrets.credentials`), and the cross-rule (what each method needs) reads
several keys at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.org_url import is_loopback_host
from gpuci_tui.core.config.validate import as_text

AUTH_METHODS = ("pat", "service-principal", "managed-identity")
_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_DOMAIN = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9-]+)+")


def validate_auth(value: object) -> str:
    """Check ``azure.auth``: one of `AUTH_METHODS`."""
    method = as_text(value, "azure.auth").lower()
    if method not in AUTH_METHODS:
        raise ConfigError(
            f"must be one of {', '.join(repr(m) for m in AUTH_METHODS)}, got {method!r}",
            key="azure.auth",
        )
    return method


def validate_tenant_id(value: object) -> str:
    """Check ``azure.tenant_id``: a GUID or a domain such as ``contoso.onmicrosoft.com``."""
    tenant = as_text(value, "azure.tenant_id")
    if tenant and not (_GUID.fullmatch(tenant) or _DOMAIN.fullmatch(tenant)):
        raise ConfigError(
            f"{tenant!r} is not a tenant id: use the Directory (tenant) ID GUID from the app "
            "registration's overview, or the tenant's domain (contoso.onmicrosoft.com)",
            key="azure.tenant_id",
        )
    return tenant


def validate_client_id(value: object) -> str:
    """Check ``azure.client_id``: an application (client) id GUID."""
    client = as_text(value, "azure.client_id")
    if client and not _GUID.fullmatch(client):
        raise ConfigError(
            f"{client!r} is not a client id: use the Application (client) ID GUID from the "
            "app registration's (or managed identity's) overview",
            key="azure.client_id",
        )
    return client


def validate_authority(value: object) -> str:
    """Check ``azure.authority``: an https URL without a path (http only to loopback)."""
    raw = as_text(value, "azure.authority").rstrip("/")
    parts = urlsplit(raw)
    host = parts.hostname or ""
    secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(host))
    if not host or not secure or parts.path or parts.query or parts.username:
        raise ConfigError(
            f"{raw!r} is not a sign-in host: use https://login.microsoftonline.com (the "
            "default), or your cloud's, e.g. https://login.microsoftonline.us",
            key="azure.authority",
        )
    return raw


def validate_client_certificate(value: object) -> str:
    """Check ``azure.client_certificate``: empty or an absolute path (read at sign-in)."""
    path = as_text(value, "azure.client_certificate")
    if path and not path.startswith("/"):
        raise ConfigError(
            f"{path!r} must be an absolute path to a PEM file holding the certificate and "
            "its private key",
            key="azure.client_certificate",
        )
    return path


def validate_pat_expires(value: object) -> str:
    """Check ``azure.pat_expires``: empty or a date ``YYYY-MM-DD``."""
    import datetime

    text = as_text(value, "azure.pat_expires")
    if text:
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            raise ConfigError(
                f'{text!r} is not a date: write the PAT\'s expiry as YYYY-MM-DD, e.g. "2027-03-31"',
                key="azure.pat_expires",
            ) from None
    return text


def check_auth_table(values: Mapping[str, Any], raw: Mapping[str, Any]) -> list[ConfigError]:
    """What each method needs: a service principal needs its tenant and client ids.

    Args:
        values: The checked ``[azure]`` values.
        raw: The table as written (a key given but invalid is already reported).
    """
    errors = []
    method = values.get("auth", "pat")
    if method == "service-principal":
        for key, where in (
            ("tenant_id", "Directory (tenant) ID"),
            ("client_id", "Application (client) ID"),
        ):
            if not values.get(key) and key not in raw:
                errors.append(
                    ConfigError(
                        f'is needed with auth = "service-principal"; copy the {where} from '
                        "the app registration's overview",
                        key=f"azure.{key}",
                    )
                )
    if method != "pat" and values.get("pat_expires"):
        errors.append(
            ConfigError('is only used with auth = "pat"; remove it', key="azure.pat_expires")
        )
    if method != "service-principal" and values.get("client_certificate"):
        errors.append(
            ConfigError(
                'is only used with auth = "service-principal"; remove it',
                key="azure.client_certificate",
            )
        )
    return errors
