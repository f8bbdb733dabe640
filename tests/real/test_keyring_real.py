"""The PAT against real keyrings: gnome-keyring's Secret Service, and the encrypted file store.

pytest itself usually runs without a D-Bus session, so each Secret Service test
starts its own: a child Python runs under ``dbus-run-session -- scripts/kr-session.sh``
with HOME and the XDG directories in a temporary directory, performs a list of
TokenStore actions and reports the results as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config import paths
from gpuci_tui.core.secrets.token_store import (
    KeyringLockedError,
    KeyringUnavailableError,
    TokenStore,
    WrongPassphraseError,
    diagnose_keyring,
    open_cryptfile,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.keyring_real

ROOT = Path(__file__).resolve().parents[2]
KR_SESSION = ROOT / "scripts" / "kr-session.sh"
URL = "https://dev.azure.com/acme"
TOOLS = {
    "dbus-run-session": "dbus",
    "dbus-send": "dbus",
    "gnome-keyring-daemon": "gnome-keyring",
    "secret-tool": "libsecret-tools",
}

CHILD = r"""
import dataclasses, json, subprocess, sys
from gpuci_tui.core.secrets.token_store import TokenStore, diagnose_keyring

url, actions = sys.argv[1], json.loads(sys.argv[2])
store, results = TokenStore(), []
for name, *args in actions:
    try:
        if name == "status":
            value = dataclasses.asdict(diagnose_keyring())
        elif name == "secret-tool":
            found = subprocess.run(["secret-tool", "search", "--all", "service", "gpuci-tui"],
                                   capture_output=True, text=True, timeout=30)
            value = found.stdout + found.stderr
        else:
            value = getattr(store, name + "_token" if name != "source" else "source_of_token")(
                url, *args)
        results.append({"ok": value})
    except Exception as exc:
        results.append({"error": type(exc).__name__, "message": str(exc)})
print(json.dumps(results))
"""


def new_pat() -> str:
    return (uuid.uuid4().hex + uuid.uuid4().hex)[:52]


@pytest.fixture(scope="module")
def keyring_tools() -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        pytest.fail(
            "A real Secret Service is required for this test and is missing: "
            f"apt-get install {' '.join(missing)} (scripts/test.sh installs them).",
            pytrace=False,
        )


def in_keyring_session(home: Path, password: str, *actions: list[Any]) -> list[dict[str, Any]]:
    """Run TokenStore ``actions`` in a fresh D-Bus session with gnome-keyring unlocked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "XDG_"))}
    env.update(HOME=str(home), KEYRING_TEST_PASSWORD=password)
    for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_CONFIG_HOME", "config"),
                     ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")):  # fmt: skip
        env[var] = str(home / sub)
    command = ["dbus-run-session", "--", str(KR_SESSION), sys.executable, "-c", CHILD]
    # A session of its own: on a timeout the whole process group goes, not only
    # dbus-run-session (its bus and keyring daemons would otherwise outlive the test).
    with subprocess.Popen(
        [*command, URL, json.dumps(actions)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    ) as proc:  # fmt: skip
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"the keyring session did not finish within 60 s:\n{stderr}")
    assert proc.returncode == 0, f"session failed ({proc.returncode}):\n{stderr}"
    # kr-session.sh waits for its daemon; a D-Bus-activated helper may take a moment longer.
    wait_until(lambda: not daemons_of(home), 5, "no keyring process outliving its D-Bus session")
    results: list[dict[str, Any]] = json.loads(stdout.strip().splitlines()[-1])
    return results


def daemons_of(home: Path) -> list[int]:
    """PIDs of processes still running with HOME=home (a leaked keyring daemon)."""
    marker = f"HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


# --------------------------------------------------------------------------- Secret Service


@pytest.mark.usefixtures("keyring_tools")
def test_secret_service_round_trip(tmp_path: Path) -> None:
    pat = new_pat()
    status, stored, got, source, search, deleted, after, missing = in_keyring_session(
        tmp_path, "test",
        ["status"], ["set", pat], ["get"], ["source"], ["secret-tool"], ["delete"], ["source"],
        ["get"],
    )  # fmt: skip

    assert status["ok"]["kind"] == "secret-service" and status["ok"]["usable"], status
    assert stored == {"ok": None}
    assert got == {"ok": pat}
    assert source == {"ok": "keyring"}
    assert "attribute.service = gpuci-tui" in search["ok"]
    assert f"attribute.username = {URL}" in search["ok"]
    assert (deleted, after) == ({"ok": True}, {"ok": "none"})
    assert missing["error"] == "TokenMissingError"


@pytest.mark.usefixtures("keyring_tools")
def test_pat_persists_and_a_wrong_unlock_password_means_locked(tmp_path: Path) -> None:
    pat = new_pat()
    assert in_keyring_session(tmp_path, "right", ["set", pat]) == [{"ok": None}]

    status, locked = in_keyring_session(tmp_path, "wrong", ["status"], ["get"])

    assert (status["ok"]["kind"], status["ok"]["usable"]) == ("locked", False)
    assert status["ok"]["message"] == "The keyring is locked: Failed to unlock the collection!"
    assert locked == {
        "error": "KeyringLockedError",
        "message": "Cannot read the PAT from the keyring: it is locked (Failed to unlock the "
        "collection!). Unlock it, or use the encrypted file store or GPUCI_PAT_FILE.",
    }
    assert in_keyring_session(tmp_path, "right", ["get"]) == [{"ok": pat}]


def test_kr_session_needs_a_dbus_session(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    done = subprocess.run(
        [str(KR_SESSION), "true"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "no D-Bus session; run it as: dbus-run-session --" in done.stderr


# --------------------------------------------------------------------------- encrypted file store


def test_cryptfile_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "store" / "pat-store.cfg"
    pat = new_pat()

    TokenStore(open_cryptfile("correct horse", path, fast_kdf=True), environ={}).set_token(URL, pat)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert pat.encode() not in path.read_bytes()
    reopened = open_cryptfile("correct horse", path, fast_kdf=True)
    status = diagnose_keyring(reopened)
    assert (status.usable, status.kind) == (True, "cryptfile")
    store = TokenStore(reopened, environ={})
    assert (store.get_token(URL), store.source_of_token(URL)) == (pat, "keyring")
    assert store.delete_token(URL) is True


def test_cryptfile_default_location(tmp_path: Path) -> None:
    TokenStore(open_cryptfile("pw", fast_kdf=True), environ={}).set_token(URL, new_pat())
    assert paths.cryptfile_path().is_file()
    assert paths.cryptfile_path().parent == Path(os.environ["XDG_DATA_HOME"]) / "gpuci-tui"


def test_cryptfile_wrong_passphrase(tmp_path: Path) -> None:
    path = tmp_path / "pat-store.cfg"
    TokenStore(open_cryptfile("right", path, fast_kdf=True), environ={}).set_token(URL, new_pat())
    with pytest.raises(WrongPassphraseError) as info:
        open_cryptfile("wrong", path, fast_kdf=True)
    assert str(info.value) == (
        f"Wrong passphrase for the encrypted PAT store {path}. Try again; if it is lost, move the "
        "file away and store the PAT again."
    )
    assert isinstance(info.value, KeyringLockedError)
    with pytest.raises(KeyringLockedError, match="The passphrase is empty"):
        open_cryptfile("  ", path, fast_kdf=True)


@pytest.mark.parametrize(
    ("good", "bad"),
    [("eyJzYWx0", "bm90IGpz"),  # the reference entry is no longer JSON
     ("AES128.GCM", "AES128.XYZ")],  # an encryption scheme this library cannot read
)  # fmt: skip
def test_damaged_cryptfile(tmp_path: Path, good: str, bad: str) -> None:
    path = tmp_path / "pat-store.cfg"
    open_cryptfile("pw", path, fast_kdf=True)
    text = path.read_text()
    assert good in text
    path.write_text(text.replace(good, bad, 1))
    with pytest.raises(KeyringUnavailableError) as info:
        open_cryptfile("pw", path, fast_kdf=True)
    assert not isinstance(info.value, WrongPassphraseError)
    assert str(info.value).startswith(f"The encrypted PAT store {path} is damaged (")
    assert str(info.value).endswith("move it away and store the PAT again.")
