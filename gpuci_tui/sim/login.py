"""`SimLogin`: the simulated ``login.microsoftonline.com``, over TLS on loopback.

msal accepts only an ``https://`` authority, so the Entra endpoints get their
own listener with a self-signed certificate for 127.0.0.1 (`ca_file` is what a
client trusts: msal's ``http_client`` session gets ``verify=ca_file``). It
serves what msal asks for:

* ``GET /{tenant}/v2.0/.well-known/openid-configuration`` (tenant discovery);
* ``POST /{tenant}/oauth2/v2.0/token`` (client credentials: `SimEntra.token_request`);
* ``GET /metadata/identity/oauth2/token`` (the VM metadata service's managed
  identity; msal is pointed here by ``AZURE_POD_IDENTITY_AUTHORITY_HOST``).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuci_tui.sim.entra import TENANT_ID, SimEntra


class _Handler(BaseHTTPRequestHandler):
    server: _LoginHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: tests read `SimEntra.sign_ins` instead."""

    def do_GET(self) -> None:  # noqa: D102, N802
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        segments = [s for s in parts.path.split("/") if s]
        if parts.path == "/metadata/identity/oauth2/token":
            status, body = self.server.entra.managed_identity_request(query, dict(self.headers))
            return self._json(status, body)
        if len(segments) == 4 and segments[1:] == ["v2.0", ".well-known", "openid-configuration"]:
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

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _LoginHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, entra: SimEntra) -> None:
        self.entra = entra
        self.url = ""
        super().__init__(("127.0.0.1", 0), _Handler)


class SimLogin:
    """Serve a `SimEntra` over HTTPS on 127.0.0.1 (use as a context manager, or start/stop).

    Attributes:
        url: ``https://127.0.0.1:PORT``, the ``[azure] authority`` to configure.
        ca_file: The PEM certificate a client must trust.
    """

    def __init__(self, entra: SimEntra) -> None:
        self.entra = entra
        self._dir = tempfile.TemporaryDirectory(prefix="gpuci-sim-login-")
        self.ca_file = Path(self._dir.name) / "ca.pem"
        self._httpd = _LoginHTTPServer(entra)
        cert_file, key_file = _self_signed(Path(self._dir.name))
        self.ca_file.write_bytes(cert_file.read_bytes())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.url = self._httpd.url = f"https://127.0.0.1:{self._httpd.server_address[1]}"
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
