"""The PAT store: keyring round trip and the precedence of PAT file, env and keyring."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from keyring.backends import fail

from gpuci_tui.core.secrets import token_store as secrets
from gpuci_tui.core.secrets.token_store import (
    InvalidTokenError,
    KeyringUnavailableError,
    TokenFileError,
    TokenMissingError,
    TokenStore,
)
from tests.core.secrets_helpers import (
    URL,
    ForgetfulKeyring,
    new_pat,
    pat_file,
)
from tests.keyring_fakes import MemoryKeyring

# --------------------------------------------------------------------------- keyring round trip


def test_set_get_delete_with_an_explicit_backend() -> None:
    backend = MemoryKeyring()
    store = TokenStore(backend, environ={})
    pat = new_pat()

    store.set_token(URL + "/", pat)

    assert backend.items == {("gpuci-tui", URL): pat}  # user name = the normalised URL
    assert store.get_token(URL) == pat
    assert store.source_of_token(URL) == "keyring"
    assert store.delete_token(URL) is True
    assert store.delete_token(URL) is False
    assert store.source_of_token(URL) == "none"


def test_default_backend_is_keyrings_choice(default_keyring: Callable[..., None]) -> None:
    backend = MemoryKeyring()
    default_keyring(backend)
    pat = new_pat()
    TokenStore(environ={}).set_token(URL, pat)
    assert backend.items[("gpuci-tui", URL)] == pat


def test_missing_pat_says_how_to_store_one() -> None:
    with pytest.raises(TokenMissingError) as info:
        TokenStore(MemoryKeyring(), environ={}).get_token(URL)
    assert str(info.value) == (
        f'No PAT is stored for {URL}; store one with "gpuci-tui token set" or run "gpuci-tui setup".'
    )


def test_set_token_trims_and_checks_the_pat() -> None:
    backend = MemoryKeyring()
    store = TokenStore(backend, environ={})
    pat = new_pat()
    store.set_token(URL, f"  {pat}\r\n")
    assert backend.items[("gpuci-tui", URL)] == pat
    with pytest.raises(InvalidTokenError) as info:
        store.set_token(URL, f"{pat[:20]} {pat[20:]}")
    assert str(info.value) == (
        "The PAT given has spaces or line breaks inside; copy it again from Azure DevOps (User "
        "settings > Personal access tokens)."
    )
    assert pat[:20] not in str(info.value)
    with pytest.raises(InvalidTokenError, match="is empty"):
        store.set_token(URL, " \n")
    with pytest.raises(InvalidTokenError, match="has characters a PAT never has"):
        store.set_token(URL, pat + "é")


def test_a_write_that_does_not_read_back_is_an_error() -> None:
    with pytest.raises(KeyringUnavailableError, match="accepted the PAT but does not return it"):
        TokenStore(ForgetfulKeyring(), environ={}).set_token(URL, new_pat())


# --------------------------------------------------------------------------- precedence


def test_precedence_file_then_env_then_keyring(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    in_keyring, in_env, in_file = new_pat(), new_pat(), new_pat()
    TokenStore(backend, environ={}).set_token(URL, in_keyring)
    path = pat_file(tmp_path, in_file + "\n")

    both = TokenStore(backend, environ={"GPUCI_PAT_FILE": str(path), "GPUCI_PAT": in_env})
    env_only = TokenStore(backend, environ={"GPUCI_PAT": in_env, "GPUCI_PAT_FILE": ""})
    keyring_only = TokenStore(backend, environ={"GPUCI_PAT": "  "})

    assert (both.get_token(URL), both.source_of_token(URL)) == (in_file, "file")
    assert (env_only.get_token(URL), env_only.source_of_token(URL)) == (in_env, "env")
    assert (keyring_only.get_token(URL), keyring_only.source_of_token(URL)) == (
        in_keyring,
        "keyring",
    )


# (what the environment names, where the PAT comes from): GPUCI_PAT_FILE, then the
# systemd credential gpuci-pat, then GPUCI_PAT, then the keyring.
@pytest.mark.parametrize(
    ("named", "source"),
    [
        ({"file", "credential", "env"}, "file"),
        ({"credential", "env"}, "credential"),
        ({"credential-dir-only", "env"}, "env"),  # a unit with other credentials, no PAT
        ({"credential-dir-only"}, "keyring"),
    ],
)
def test_a_systemd_credential_comes_after_the_pat_file(
    tmp_path: Path, named: set[str], source: str
) -> None:
    backend = MemoryKeyring()
    pats = {name: new_pat() for name in ("file", "credential", "env", "keyring")}
    TokenStore(backend, environ={}).set_token(URL, pats["keyring"])
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "gpuci-client-secret").write_text("not a PAT")
    environ = {"CREDENTIALS_DIRECTORY": str(credentials)}
    if "credential" in named:
        (credentials / "gpuci-pat").write_text(pats["credential"] + "\n")
    if "file" in named:
        environ["GPUCI_PAT_FILE"] = str(pat_file(tmp_path, pats["file"]))
    if "env" in named:
        environ["GPUCI_PAT"] = pats["env"]
    store = TokenStore(backend, environ=environ)
    assert store.get_token(URL) == pats[source]
    assert store.keyring_needed() is (source == "keyring")
    if source in ("file", "credential"):
        assert store.source_of_token(URL) == "file"
        expected = credentials / "gpuci-pat" if source == "credential" else tmp_path / "pat"
        assert store.pat_file() == expected


def test_an_unreadable_credential_names_itself(tmp_path: Path) -> None:
    (tmp_path / "gpuci-pat").mkdir()
    store = TokenStore(MemoryKeyring(), environ={"CREDENTIALS_DIRECTORY": str(tmp_path)})
    with pytest.raises(TokenFileError) as info:
        store.get_token(URL)
    assert str(info.value) == (
        f"The systemd credential gpuci-pat ({tmp_path}/gpuci-pat) is not a regular file; "
        "point it at the PAT file."
    )


def test_environment_overrides_need_no_keyring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pat = new_pat()
    monkeypatch.setenv("GPUCI_PAT", f"\t{pat}\n")
    store = TokenStore(fail.Keyring())
    assert store.get_token(URL) == pat
    monkeypatch.setenv("GPUCI_PAT_FILE", str(pat_file(tmp_path, f"\n{pat}\n\n")))
    assert (store.get_token(URL), store.source_of_token(URL)) == (pat, "file")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "The PAT in GPUCI_PAT_FILE is empty"),
        ("abc def\n", "The PAT in GPUCI_PAT_FILE has spaces or line breaks inside"),
        ("line-one\nline-two\n", "The PAT in GPUCI_PAT_FILE has spaces or line breaks inside"),
    ],
)
def test_bad_pat_file_content(tmp_path: Path, content: str, message: str) -> None:
    store = TokenStore(
        MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(pat_file(tmp_path, content))}
    )
    with pytest.raises(InvalidTokenError, match=message):
        store.get_token(URL)


def test_pat_file_problems(tmp_path: Path) -> None:
    def error(path: Path) -> str:
        with pytest.raises(TokenFileError) as info:
            TokenStore(MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(path)}).get_token(URL)
        return str(info.value)

    assert error(tmp_path / "missing") == (
        f"GPUCI_PAT_FILE names {tmp_path}/missing, which does not exist; create it (the PAT on "
        "one line, chmod 600) or unset GPUCI_PAT_FILE."
    )
    assert error(tmp_path) == (
        f"GPUCI_PAT_FILE names {tmp_path}, which is not a regular file; point it at the PAT file."
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # must not block waiting for a writer
    assert error(fifo).endswith("which is not a regular file; point it at the PAT file.")
    big = tmp_path / "big"
    big.write_bytes(b"x" * (secrets.PAT_FILE_MAX + 1))
    assert error(big).endswith("which is too large to hold a PAT; point it at the PAT file.")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    assert error(binary).endswith("which is not text; it must hold only the PAT.")


def test_pat_file_open_to_others_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pat = new_pat()
    path = pat_file(tmp_path, pat, mode=0o644)
    store = TokenStore(MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(path)})
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.core.secrets.token_store"):
        assert store.get_token(URL) == pat
        assert store.get_token(URL) == pat
    assert [r.getMessage() for r in caplog.records] == [
        f"GPUCI_PAT_FILE {path} is open to group or others (mode 0644); restrict it: chmod 600 {path}"
    ]
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.core.secrets.token_store"):
        store.get_token(URL)
    assert caplog.records == []
