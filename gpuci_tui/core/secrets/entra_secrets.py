"""Where a service principal's secret or certificate is kept, exactly as the PAT is.

* The client secret: ``GPUCI_CLIENT_SECRET_FILE`` (a 0600 file), the systemd
  credential ``gpuci-client-secret`` (``$CREDENTIALS_DIRECTORY``),
  ``GPUCI_CLIENT_SECRET``, then the OS keyring (service
  ``gpuci-tui``, user ``URL#client-secret:CLIENT_ID``), with the PAT's keyring
  rules (no plaintext backend, no prompting backend: `TokenStore`).
* The certificate: always a PEM file (``[azure] client_certificate``) holding
  the certificate and its private key, readable by this user only. Keyrings
  limit an entry's size (the Windows credential store to 2.5 KB, some Secret
  Service setups less), and a 4096-bit key with its chain does not fit, so the
  file is the one place, as for ``ssh`` keys. Its optional passphrase is kept
  like the secret (``GPUCI_CERT_PASSPHRASE_FILE``, the credential
  ``gpuci-cert-passphrase``, ``GPUCI_CERT_PASSPHRASE``, keyring user ``URL#certificate-passphrase:CLIENT_ID``).

Each value handed out is registered with the redactor first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.config.validate import validate_org_url
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.secrets.pat_file import secret_file
from gpuci_tui.core.secrets.redaction import register_secret, register_secrets
from gpuci_tui.core.secrets.token_store import SERVICE, TokenStore

log = logging.getLogger(__name__)
FILE_MAX = 64 * 1024
CLIENT_SECRET = "client-secret"
CERT_PASSPHRASE = "certificate-passphrase"
_ENV = {
    CLIENT_SECRET: ("GPUCI_CLIENT_SECRET_FILE", "GPUCI_CLIENT_SECRET"),
    CERT_PASSPHRASE: ("GPUCI_CERT_PASSPHRASE_FILE", "GPUCI_CERT_PASSPHRASE"),
}
_CREDENTIAL = {CLIENT_SECRET: "gpuci-client-secret", CERT_PASSPHRASE: "gpuci-cert-passphrase"}
"""The systemd credential (``$CREDENTIALS_DIRECTORY/NAME``) that may hold each secret."""


class EntraSecretError(GpuciError):
    """A client secret or certificate is missing, unreadable or malformed."""


@dataclass(frozen=True)
class CertificateCredential:
    """A certificate for msal's ``client_credential`` (PEM texts, never logged)."""

    private_key: str
    public_certificate: str
    passphrase: str | None
    sha256_thumbprint: str
    """Hex, as the app registration's Certificates page shows it (SHA-256 column)."""

    def __repr__(self) -> str:
        return f"CertificateCredential(thumbprint={self.sha256_thumbprint[:12]}…)"

    def for_msal(self) -> dict[str, str]:
        """The dict msal's ``ConfidentialClientApplication`` takes."""
        found = {"private_key": self.private_key, "public_certificate": self.public_certificate}
        if self.passphrase:
            found["passphrase"] = self.passphrase
        return found


def keyring_user(org_url: str, what: str, client_id: str) -> str:
    """The keyring user name under which ``what`` of ``client_id`` is kept."""
    return f"{validate_org_url(org_url)}#{what}:{client_id.lower()}"


class EntraSecretStore(TokenStore):
    """The PAT's store, reading and writing a service principal's secrets too."""

    def get_secret(self, org_url: str, what: str, client_id: str) -> str | None:
        """``what`` (`CLIENT_SECRET` | `CERT_PASSPHRASE`) from its file, variable or keyring.

        Returns:
            The value, or None when none is stored.

        Raises:
            EntraSecretError: the file named by the variable is unusable.
            KeyringUnavailableError: (and subclasses) the keyring cannot be used.
        """
        env_var = _ENV[what][1]
        found = secret_file(self._environ, _ENV[what][0], _CREDENTIAL[what])
        if found is not None:
            value = read_private_file(found.path, found.named_by, strict=False).strip()
        elif self._environ.get(env_var, "").strip():
            value = self._environ[env_var].strip()
        else:
            user = keyring_user(org_url, what, client_id)
            stored = self._call(f"read the {what} from", lambda b: b.get_password(SERVICE, user))
            if stored is None:
                return None
            value = stored.strip()
        register_secret(value)
        return value or None

    def secret_keyring_needed(self, what: str) -> bool:
        """Whether `get_secret` of ``what`` asks the keyring (no file or variable gives it)."""
        file_var, env_var = _ENV[what]
        named = secret_file(self._environ, file_var, _CREDENTIAL[what])
        return named is None and not self._environ.get(env_var, "").strip()

    def set_secret(self, org_url: str, what: str, client_id: str, value: str) -> None:
        """Store ``value`` in the keyring (as `TokenStore.set_token` does the PAT)."""
        user = keyring_user(org_url, what, client_id)
        clean = value.strip()
        if not clean:
            raise EntraSecretError(f"The {what} is empty; copy it again from the app registration.")
        register_secret(clean)
        self._call(f"store the {what} in", lambda b: b.set_password(SERVICE, user, clean))


def read_private_file(path: Path, what: str, *, strict: bool = True) -> str:
    """A small text file that should be readable by this user only.

    Args:
        path: The file.
        what: What names it, for messages (a variable or a config key).
        strict: Refuse a file open to group or others (a private key); otherwise
            only warn, as for ``GPUCI_PAT_FILE``.

    Raises:
        EntraSecretError: missing, not a regular file, too large, not text, or
            (``strict``) readable by group or others.
    """
    where = f"{what} names {path}, which"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise EntraSecretError(f"{where} cannot be read ({exc.strerror}).") from None
    try:
        info = os.fstat(fd)
        data = os.read(fd, FILE_MAX + 1) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode) or len(data) > FILE_MAX:
        raise EntraSecretError(f"{where} is not a small regular file.")
    if stat.S_IMODE(info.st_mode) & 0o077 and not strict:
        log.warning(
            "%s %s is open to group or others (mode %04o); restrict it: chmod 600 %s",
            what,
            path,
            stat.S_IMODE(info.st_mode),
            path,
        )
    elif stat.S_IMODE(info.st_mode) & 0o077:
        raise EntraSecretError(
            f"{where} is open to group or others (mode {stat.S_IMODE(info.st_mode):04o}): "
            f"anyone there could sign in as the service principal. Run: chmod 600 {path}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise EntraSecretError(f"{where} is not text (PEM expected).") from None


def load_certificate(
    path: str, passphrase: str | None | Callable[[], str | None]
) -> CertificateCredential:
    """Read the PEM file of ``[azure] client_certificate``.

    Args:
        path: The PEM file (key and certificate).
        passphrase: The key's passphrase, or where to get it: only asked for
            when the key is encrypted (an unencrypted key needs no keyring).

    Raises:
        EntraSecretError: the file is unusable, lacks the key or the certificate,
            or the passphrase does not open the key.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    text = read_private_file(Path(path), "azure.client_certificate")
    blocks = _pem_blocks(text)
    key = next((b for b in blocks if "PRIVATE KEY" in b.splitlines()[0]), None)
    cert = next((b for b in blocks if "CERTIFICATE" in b.splitlines()[0]), None)
    if key is None or cert is None:
        missing = "private key" if key is None else "certificate"
        raise EntraSecretError(
            f"azure.client_certificate {path} has no {missing}: it must hold both, e.g. "
            "cat key.pem cert.pem > gpuci-sp.pem"
        )
    if callable(passphrase):
        passphrase = passphrase() if "ENCRYPTED" in key else None
    # Log lines are single lines: each line of the key's body is redacted on its own.
    register_secrets(key.splitlines()[1:-1])
    try:
        serialization.load_pem_private_key(
            key.encode(), passphrase.encode() if passphrase else None
        )
        der = x509.load_pem_x509_certificate(cert.encode()).public_bytes(serialization.Encoding.DER)
    except (ValueError, TypeError) as exc:
        hint = (
            "the passphrase is wrong or missing (GPUCI_CERT_PASSPHRASE_FILE, or the keyring)"
            if "password" in str(exc).lower() or "decrypt" in str(exc).lower()
            else "it is not a valid PEM key and certificate"
        )
        raise EntraSecretError(f"azure.client_certificate {path}: {hint}.") from None
    return CertificateCredential(key, cert, passphrase, hashlib.sha256(der).hexdigest())


def _pem_blocks(text: str) -> list[str]:
    blocks, current = [], list[str]()
    for line in text.splitlines():
        if line.startswith("-----BEGIN "):
            current = [line]
        elif current:
            current.append(line)
            if line.startswith("-----END "):
                blocks.append("\n".join(current) + "\n")
                current = []
    return blocks
