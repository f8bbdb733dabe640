"""Rules for ``[azure]``'s identity keys: ``auth``, ``tenant_id``, ``client_id``,
``authority`` and ``client_certificate``.

Kept apart from `validate` because they only matter to the credential seam
(`secrets.credentials`), and the cross-rule (what each method needs) reads
several keys at once.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.org_url import is_loopback_host
from gpuci_tui.core.config.validate import as_text

AUTH_METHODS = ("pat", "service-principal", "managed-identity")
_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_DOMAIN = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9-]+)+")


def _checked_text(
    value: object,
    key: str,
    accept: Callable[[str], bool],
    explain: Callable[[str], str],
    tidy: Callable[[str], str] = str,
) -> str:
    """Read a text key and raise `ConfigError` (``key``) when ``accept`` refuses it.

    One rule shape serves every identity key: read as text, tidy, test, say why.

    Args:
        value: The value as written.
        key: The dotted key, for the message and the error.
        accept: Whether the tidied text is acceptable.
        explain: The message for a refused text.
        tidy: What to do to the text before it is tested (and returned).
    """
    text = tidy(as_text(value, key))
    if not accept(text):
        raise ConfigError(explain(text), key=key)
    return text


def _is_iso_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def validate_auth(value: object) -> str:
    """Check ``azure.auth``: one of `AUTH_METHODS`."""
    return _checked_text(
        value,
        "azure.auth",
        lambda method: method in AUTH_METHODS,
        lambda method: f"must be one of {', '.join(repr(m) for m in AUTH_METHODS)}, got {method!r}",
        tidy=str.lower,
    )


def validate_tenant_id(value: object) -> str:
    """Check ``azure.tenant_id``: a GUID or a domain such as ``contoso.onmicrosoft.com``."""
    return _checked_text(
        value,
        "azure.tenant_id",
        lambda tenant: not tenant or bool(_GUID.fullmatch(tenant) or _DOMAIN.fullmatch(tenant)),
        lambda tenant: (
            f"{tenant!r} is not a tenant id: use the Directory (tenant) ID GUID from the app "
            "registration's overview, or the tenant's domain (contoso.onmicrosoft.com)"
        ),
    )


def validate_client_id(value: object) -> str:
    """Check ``azure.client_id``: an application (client) id GUID."""
    return _checked_text(
        value,
        "azure.client_id",
        lambda client: not client or bool(_GUID.fullmatch(client)),
        lambda client: (
            f"{client!r} is not a client id: use the Application (client) ID GUID from the "
            "app registration's (or managed identity's) overview"
        ),
    )


def _is_sign_in_host(raw: str) -> bool:
    parts = urlsplit(raw)
    host = parts.hostname or ""
    secure = parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(host))
    return bool(host and secure and not (parts.path or parts.query or parts.username))


def validate_authority(value: object) -> str:
    """Check ``azure.authority``: an https URL without a path (http only to loopback)."""
    return _checked_text(
        value,
        "azure.authority",
        _is_sign_in_host,
        lambda raw: (
            f"{raw!r} is not a sign-in host: use https://login.microsoftonline.com (the "
            "default), or your cloud's, e.g. https://login.microsoftonline.us"
        ),
        tidy=lambda text: text.rstrip("/"),
    )


def validate_client_certificate(value: object) -> str:
    """Check ``azure.client_certificate``: empty or an absolute path (read at sign-in)."""
    return _checked_text(
        value,
        "azure.client_certificate",
        lambda path: not path or path.startswith("/"),
        lambda path: (
            f"{path!r} must be an absolute path to a PEM file holding the certificate and "
            "its private key"
        ),
    )


def validate_pat_expires(value: object) -> str:
    """Check ``azure.pat_expires``: empty or a date ``YYYY-MM-DD``."""
    return _checked_text(
        value,
        "azure.pat_expires",
        lambda text: not text or _is_iso_date(text),
        lambda text: (
            f'{text!r} is not a date: write the PAT\'s expiry as YYYY-MM-DD, e.g. "2027-03-31"'
        ),
    )


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
