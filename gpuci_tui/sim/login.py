"""`SimLogin`: the simulated ``login.microsoftonline.com``, over TLS on loopback.

msal accepts only an ``https://`` authority, so the Entra endpoints get their
own listener with a self-signed certificate for 127.0.0.1 (`ca_file` is what a
client trusts: msal's ``http_client`` session gets ``verify=ca_file``). It
serves what msal asks for:

* ``GET /{tenant}/v2.0/.well-known/openid-configuration`` (tenant discovery);
* ``POST /{tenant}/oauth2/v2.0/token`` (client credentials: `SimEntra.token_request`);
* ``GET /metadata/identity/oauth2/token`` (the VM metadata service's managed
  identity; msal is pointed here by ``AZURE_POD_IDENTITY_AUTHORITY_HOST``);
* ``GET /arc/metadata/identity/oauth2/token`` (`arc_endpoint`: an Azure Arc-enabled
  server's identity endpoint, which msal uses when ``IDENTITY_ENDPOINT`` and
  ``IMDS_ENDPOINT`` are set). As Arc's ``himds`` does, a first call without credentials
  is answered 401 with ``WWW-Authenticate: Basic realm=<file>``: a one-use secret
  written into `arc_dir`; the caller proves it may read that file by sending its
  content back as ``Authorization: Basic``. msal reads the file from a fixed
  directory (``/var/opt/azcmagent/tokens`` on Linux, owned by root and the ``himds``
  group), so a test points msal's table of those directories at `arc_dir`.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuci_tui.sim.entra import TENANT_ID, SimEntra

ARC_PATH = "/arc/metadata/identity/oauth2/token"
"""Where the simulated Azure Arc identity endpoint listens (any path would do for msal)."""


class _Handler(BaseHTTPRequestHandler):
    server: _LoginHTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as the organisation's handler: no 40-ms delayed-ACK wait

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: tests read `SimEntra.sign_ins` instead."""

    def do_GET(self) -> None:  # noqa: D102, N802
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        segments = [s for s in parts.path.split("/") if s]
        if parts.path == "/metadata/identity/oauth2/token":
            status, body = self.server.entra.managed_identity_request(query, dict(self.headers))
            return self._json(status, body)
        if parts.path == ARC_PATH:
            return self._arc(query)
        if len(segments) == 4 and segments[1:] == ["v2.0", ".well-known", "openid-configuration"]:
            self.server.discovery_reads += 1
            base = f"{self.server.url}/{segments[0]}"
            return self._json(
                200,
                {
                    "token_endpoint": f"{base}/oauth2/v2.0/token",
                    "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                    "issuer": f"{self.server.url}/{TENANT_ID}/v2.0",
                    "jwks_uri": f"{base}/discovery/v2.0/keys",
                },
            )
        return self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:  # noqa: D102, N802
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) == 4 and segments[1:] == ["oauth2", "v2.0", "token"]:
            audience = f"{self.server.url}{parts.path}"
            status, body = self.server.entra.token_request(form, audience)
            return self._json(status, body)
        return self._json(404, {"error": "not_found"})

    def _arc(self, query: dict[str, str]) -> None:
        """Azure Arc's identity endpoint: a file challenge, then the managed identity's token."""
        server = self.server
        scheme, _, given = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic" or not given:
            name = secrets.token_hex(8)
            path = server.arc_dir / f"{name}.key"
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(32))
            server.arc_challenges += 1
            return self._json(
                401,
                {"error": "unauthorized", "error_description": "a challenge file was written"},
                {"WWW-Authenticate": f"Basic realm={path}"},
            )
        answered = [f for f in server.arc_dir.glob("*.key") if f.read_text() == given]
        if not answered:
            return self._json(401, {"error": "invalid_request", "error_description": "bad key"})
        answered[0].unlink()  # one use, as himds's are
        status, body = server.entra.managed_identity_request(query, {"Metadata": "true"})
        if status == 200 and query.get("client_id"):
            body["client_id"] = query["client_id"]  # Arc echoes a user-assigned identity
        return self._json(status, body)

    def _json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _LoginHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, entra: SimEntra, arc_dir: Path) -> None:
        self.entra = entra
        self.url = ""
        self.arc_dir = arc_dir
        self.arc_challenges = 0
        self.discovery_reads = 0
        super().__init__(("127.0.0.1", 0), _Handler)


class SimLogin:
    """Serve a `SimEntra` over HTTPS on 127.0.0.1 (use as a context manager, or start/stop).

    Attributes:
        url: ``https://127.0.0.1:PORT``, the ``[azure] authority`` to configure.
        ca_file: The PEM certificate a client must trust.
        arc_endpoint: Azure Arc's identity endpoint (``IDENTITY_ENDPOINT``).
        arc_dir: Where its challenge files are written (Arc: ``/var/opt/azcmagent/tokens``).
    """

    def __init__(self, entra: SimEntra) -> None:
        self.entra = entra
        self._dir = tempfile.TemporaryDirectory(prefix="gpuci-sim-login-")
        self.ca_file = Path(self._dir.name) / "ca.pem"
        self.arc_dir = Path(self._dir.name) / "azcmagent-tokens"
        self.arc_dir.mkdir(mode=0o700)
        self._httpd = _LoginHTTPServer(entra, self.arc_dir)
        cert_file, key_file = _self_signed(Path(self._dir.name))
        self.ca_file.write_bytes(cert_file.read_bytes())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.url = self._httpd.url = f"https://127.0.0.1:{self._httpd.server_address[1]}"
        self.arc_endpoint = f"{self.url}{ARC_PATH}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="sim-login", daemon=True
        )

    def start(self) -> SimLogin:
        """Serve in a background thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the certificate files."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()
        self._dir.cleanup()

    @property
    def discovery_reads(self) -> int:
        """OpenID metadata reads so far (msal's tenant discovery: one per sign-in)."""
        return self._httpd.discovery_reads

    @property
    def arc_challenges(self) -> int:
        """Challenge files written so far (one per Arc sign-in)."""
        return self._httpd.arc_challenges

    def __enter__(self) -> SimLogin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (written 0600), valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuci-sim-login")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.touch(mode=0o600)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file
