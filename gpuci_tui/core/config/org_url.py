"""The organisation URL rules, once: what is accepted and how it is normalised.

Config validation (`config_validate.validate_org_url`) and the Azure DevOps
client (`azure_errors.OrgUrl.parse`) both parse with `parse_org_url` and only
word the problem for their audience (a config key, a client error). Rules:

* ``http``/``https`` only; plain ``http`` only to this machine (the simulator),
  so a PAT never crosses a network unencrypted.
* no spaces, credentials, query or fragment; a valid port.
* ``dev.azure.com/ORG``: exactly one path segment, a valid organisation name
  (letters, digits and inner hyphens, at most 50).
* ``ORG.visualstudio.com``: no path, except ``/DefaultCollection``, which is dropped.
* normalised: scheme and host lower case, default port and trailing slashes dropped.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["ORG_NAME", "OrgAddress", "OrgUrlProblem", "is_loopback_host", "parse_org_url"]

#: An Azure DevOps organisation name.
ORG_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,48}[A-Za-z0-9])?")

_DEFAULT_PORTS = {"https": 443, "http": 80}


class OrgUrlProblem(ValueError):
    """Why a URL is not an organisation URL; callers word it for their audience.

    Attributes:
        kind: one of ``empty``, ``spaces``, ``no_scheme``, ``bad_port``,
            ``credentials``, ``not_url``, ``query``, ``insecure_http``,
            ``missing_org``, ``project_page``, ``bad_name``.
        raw: the URL as given (stripped).
        fix: the URL to use instead, where one can be told (else "").
        segment: the offending organisation name (``bad_name``).
    """

    def __init__(self, kind: str, raw: str, fix: str = "", segment: str = "") -> None:
        """A problem of ``kind`` with ``raw``."""
        super().__init__(kind)
        self.kind = kind
        self.raw = raw
        self.fix = fix
        self.segment = segment


@dataclass(frozen=True)
class OrgAddress:
    """A parsed, normalised organisation URL.

    Attributes:
        url: normalised, without a trailing slash.
        scheme: ``https`` or ``http`` (the latter only for loopback hosts).
        host: host name or address, lower case, without brackets.
        netloc: ``host[:port]`` as shown in messages (no default port).
        name: the organisation's name, for messages.
    """

    url: str
    scheme: str
    host: str
    netloc: str
    name: str


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names this machine without going through DNS."""
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_org_url(text: str) -> OrgAddress:
    """Check and normalise an organisation URL.

    Raises:
        OrgUrlProblem: the first rule ``text`` breaks (see the module's docstring).
    """
    raw = text.strip()
    if not raw:
        raise OrgUrlProblem("empty", raw)
    if any(c.isspace() for c in raw):
        raise OrgUrlProblem("spaces", raw)
    if "://" not in raw:
        raise OrgUrlProblem("no_scheme", raw, fix=f"https://{raw.lstrip('/')}")
    scheme, rest = raw.split("://", 1)
    scheme = scheme.lower()
    try:
        parts = urlsplit(raw)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        raise OrgUrlProblem("bad_port", raw) from None
    if parts.username is not None or parts.password is not None:
        raise OrgUrlProblem("credentials", raw)
    if scheme not in _DEFAULT_PORTS or not host:
        raise OrgUrlProblem("not_url", raw)
    if parts.query or parts.fragment or "?" in rest or "#" in rest:
        raise OrgUrlProblem("query", raw)
    if scheme == "http" and not is_loopback_host(host):
        raise OrgUrlProblem("insecure_http", raw, fix=f"https://{rest.rstrip('/')}")
    base, path = f"{scheme}://{host}", parts.path.rstrip("/")
    segments = [s for s in path.split("/") if s]
    if host == "dev.azure.com":
        if not segments:
            raise OrgUrlProblem("missing_org", raw)
        if len(segments) > 1:
            raise OrgUrlProblem("project_page", raw, fix=f"{base}/{segments[0]}")
        if not ORG_NAME.fullmatch(segments[0]):
            raise OrgUrlProblem("bad_name", raw, segment=segments[0])
    elif host.endswith(".visualstudio.com"):
        if path.lower() not in ("", "/defaultcollection"):
            raise OrgUrlProblem("project_page", raw, fix=base)
        path, segments = "", []
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port in (None, _DEFAULT_PORTS[scheme]) else f"{shown}:{port}"
    if segments:
        name = segments[-1]
    elif host.endswith(".visualstudio.com"):
        name = host.split(".", 1)[0]
    else:
        name = host
    return OrgAddress(f"{scheme}://{netloc}{path}", scheme, host, netloc, name)
