"""The PAT on a headless host: the real binary in a real terminal (tmux), no D-Bus session.

Each pane runs with a clean environment of its own (HOME and XDG directories in
the test's folder, no ``DBUS_SESSION_BUS_ADDRESS``, no PAT variable), as an SSH
login on a GPU box has. ``token set`` creates the encrypted file store (its new
passphrase asked twice), ``token check`` asks for it once and checks the PAT
against the simulated organisation. The same runs through a real SSH login
(sshd on 127.0.0.1, ``ssh -tt``); with a real gnome-keyring on a private D-Bus
(``dbus-run-session`` + scripts/kr-session.sh) the Secret Service takes the PAT
and no passphrase is asked.

The binary has no test switch for the store's cost: a ``sitecustomize`` on the
panes' PYTHONPATH lowers keyrings.cryptfile's Argon2 settings (test-infra.md
§1c: 2 ms a key instead of about 0.5 s, some 20 s a test on two busy cores).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.model import AgentsConfig, AzureConfig, Config
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.real.rig import wait_for
from tests.real.test_keyring_real import KR_SESSION, TOOLS, daemons_of
from tests.real.test_setup_tmux import Screens, login_home
from tests.real.test_tmux_demo import BINARY

pytestmark = pytest.mark.tmux

PASSPHRASE = "correct horse battery"
STORE = "data/gpuci-tui/pat-store.cfg"


class Org:
    """The simulated organisation that ``token check`` asks, with one valid PAT."""

    def __init__(self) -> None:
        self.org = SimOrg("simorg")
        self.org.add_pool("gpu")
        self.pat = (uuid.uuid4().hex + uuid.uuid4().hex)[:52]
        self.org.add_pat(self.pat)
        self.server = SimServer(self.org).start()


@pytest.fixture
def org() -> Iterator[Org]:
    o = Org()
    yield o
    o.server.stop()


@pytest.fixture
def home(tmp_path: Path, org: Org) -> Path:
    """A login's home: XDG directories and a configuration naming the simulated pool."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    assert BINARY.exists(), f"console script missing: {BINARY}"
    home = tmp_path / "h"
    login_home(home)
    azure = AzureConfig(url=org.server.org_url, pool="gpu")
    agents = AgentsConfig(count=1, image="acme/agent:1", name_prefix="hl", gpus="none")
    save_config(Config(azure=azure, agents=agents), home / "config" / "gpuci-tui" / "config.toml")
    return home


CHEAP_KDF = """\
from keyrings.cryptfile.cryptfile import ArgonAESEncryption

ArgonAESEncryption.time_cost, ArgonAESEncryption.memory_cost = 1, 1024
"""


def login_env(home: Path) -> dict[str, str]:
    """What a login without a desktop session has: no D-Bus, no PAT variable."""
    path = f"{BINARY.parent}:/usr/local/bin:/usr/bin:/bin"
    shim = home / "cheap-kdf"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(CHEAP_KDF)
    env = {"PATH": path, **login_home(home), "TERM": "xterm-256color"}
    return env | {"PYTHONPATH": str(shim)}


def commands(home: Path, *lines: str) -> Path:
    """A script running each of ``lines`` and printing its exit code."""
    script = home / f"session-{uuid.uuid4().hex[:6]}.sh"
    body = "".join(f"{line}\necho EXIT=$?\n" for line in lines)
    script.write_text(f"#!/bin/sh\n{body}")
    script.chmod(0o700)
    return script


def pane(command: str, env: dict[str, str]) -> str:
    """``command`` with exactly ``env`` (the test process's D-Bus and PAT variables stay out).

    The pane stays open afterwards, so its last screen can be read; ``command`` itself
    ends (a keyring session stops its daemon, an SSH login closes).
    """
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    inner = shlex.quote(f"{command}; echo SESSION-DONE; sleep 600")
    return f"env -i {assignments} sh -c {inner}"


@contextlib.contextmanager
def terminal(command: str) -> Iterator[Screens]:
    tmux = Screens(command, 100, 40)
    try:
        yield tmux
    finally:
        tmux.kill()


def flat(screen: str) -> str:
    return "".join(screen.splitlines())


def type_secret(tmux: Screens, prompt: str, secret: str) -> None:
    """Wait for ``prompt``, then type ``secret`` and Enter, as a person would."""
    tmux.wait(lambda s: prompt in s, 60, f"the prompt {prompt!r}")
    tmux.type(secret)
    tmux.keys("Enter")


def set_then_check(tmux: Screens, org: Org) -> str:
    """Drive ``token set`` (a new store) then ``token check`` (asks once); the final screen."""
    tmux.wait(lambda s: "new encrypted file store" in s, 60, "the new store announced")
    type_secret(tmux, "New passphrase:", PASSPHRASE)
    type_secret(tmux, "Repeat the passphrase:", PASSPHRASE)
    type_secret(tmux, "PAT:", org.pat)
    tmux.wait(lambda s: "EXIT=" in s, 60, "token set to end")
    type_secret(tmux, "Passphrase of the encrypted PAT store", PASSPHRASE)
    return tmux.wait(lambda s: "SESSION-DONE" in s, 60, "token check to end")


def assert_headless_flow(tmux: Screens, screen: str, home: Path, org: Org) -> None:
    text = flat(screen)
    assert screen.count("EXIT=0") == 2, screen
    assert f"PAT stored in the encrypted file store {home / STORE}" in text
    assert f"PAT from the encrypted file store {home / STORE}" in text
    # Twice for the new store, once for the check: no other prompt.
    assert screen.count("New passphrase:") == 1 and screen.count("Repeat the passphrase:") == 1
    assert screen.count("Passphrase of the encrypted PAT store") == 1
    assert not any(PASSPHRASE in seen or org.pat in seen for seen in tmux.seen), "echoed"
    assert (home / STORE).stat().st_mode & 0o077 == 0
    assert org.pat not in (home / STORE).read_text(), "the PAT is stored in plain text"


def test_token_set_then_check_in_a_terminal_without_dbus(home: Path, org: Org) -> None:
    script = commands(home, "gpuci-tui token set", "gpuci-tui token check")
    with terminal(pane(f"sh {shlex.quote(str(script))}", login_env(home))) as tmux:
        screen = set_then_check(tmux, org)
        assert_headless_flow(tmux, screen, home, org)

    # The same store without a terminal (a service): how a service gets the PAT, exit 5.
    env = {**login_env(home), "GPUCI_CONFIG": str(home / "config" / "gpuci-tui" / "config.toml")}
    done = subprocess.run(
        [str(BINARY), "token", "check"],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        start_new_session=True,  # no controlling terminal, as under systemd
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    assert f"the encrypted file store ({home / STORE}) is locked" in done.stderr
    for fix in ("LoadCredential=gpuci-pat:", "$CREDENTIALS_DIRECTORY/gpuci-pat", "GPUCI_PAT_FILE"):
        assert fix in done.stderr
    assert "token" not in done.stderr.split("A service gets the PAT")[1]

    # The systemd credential a unit would give it: no passphrase, no terminal.
    credentials = home / "credentials"
    credentials.mkdir(mode=0o700)
    (credentials / "gpuci-pat").write_text(org.pat + "\n")
    (credentials / "gpuci-pat").chmod(0o400)
    done = subprocess.run(
        [str(BINARY), "token", "check"],
        env={**env, "CREDENTIALS_DIRECTORY": str(credentials)},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"PAT from {credentials / 'gpuci-pat'}: "), done.stdout


@pytest.mark.sshd
def test_the_same_over_a_real_ssh_login(home: Path, org: Org, tmp_path: Path) -> None:
    from tests.fleet.sshlab import _greets, free_port, sshd_binary

    lab = Path(tmp_path / "ssh")
    lab.mkdir()
    for key in ("client_key", "host_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(lab / key)],
            check=True, timeout=30,
        )  # fmt: skip
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    port = free_port()
    env = login_env(home)
    passed = " ".join(f"{k}={v}" for k, v in env.items() if k.startswith("XDG_"))
    (lab / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {lab / 'host_key'}\n"
        f"AuthorizedKeysFile {lab / 'client_key.pub'}\nPidFile none\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nX11Forwarding no\n"
        f"SetEnv {passed}\n"
    )
    host_key = (lab / "host_key.pub").read_text().split()[:2]
    (lab / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
    sshd = subprocess.Popen(
        [sshd_binary(), "-D", "-e", "-f", str(lab / "sshd_config")],
        stdout=subprocess.DEVNULL, stderr=(lab / "sshd.log").open("wb"), stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: sshd.poll() is not None or _greets(port), 15, "sshd")
        assert sshd.poll() is None, (lab / "sshd.log").read_text()
        remote = commands(home, "gpuci-tui token set", "gpuci-tui token check")
        ssh = (
            f"ssh -tt -i {lab / 'client_key'} -o IdentitiesOnly=yes -o BatchMode=yes "
            f"-o UserKnownHostsFile={lab / 'known_hosts'} -o StrictHostKeyChecking=yes -p {port} "
            f"{getpass.getuser()}@127.0.0.1 "
            + shlex.quote(
                f"env | grep -c DBUS_SESSION_BUS_ADDRESS; PATH={env['PATH']} "
                f"PYTHONPATH={env['PYTHONPATH']} sh {remote}"
            )
        )
        local = {"PATH": env["PATH"], "HOME": str(home), "TERM": "xterm-256color"}
        with terminal(pane(ssh, local)) as tmux:
            tmux.wait(lambda s: s.lstrip().startswith("0"), 30, "the SSH login (no D-Bus)")
            screen = set_then_check(tmux, org)
            assert_headless_flow(tmux, screen, home, org)
    finally:
        sshd.kill()
        sshd.wait(10)


@pytest.mark.keyring_real
def test_with_a_real_secret_service_no_passphrase_is_asked(home: Path, org: Org) -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        pytest.fail(f"Required and missing: apt-get install {' '.join(missing)}", pytrace=False)
    script = commands(home, "gpuci-tui token set", "gpuci-tui token check")
    env = {**login_env(home), "KEYRING_TEST_PASSWORD": "test"}
    session = f"dbus-run-session -- {shlex.quote(str(KR_SESSION))} sh {shlex.quote(str(script))}"
    with terminal(pane(session, env)) as tmux:
        type_secret(tmux, "PAT:", org.pat)
        screen = tmux.wait(lambda s: "SESSION-DONE" in s, 60, "set and check to end")
        assert not any(org.pat in seen for seen in tmux.seen), "the PAT was echoed"
    # The pane's own shell had this HOME too; once it is gone, nothing may be left.
    wait_for(lambda: not daemons_of(home), 10, "no process of the session left")
    text = flat(screen)
    assert screen.count("EXIT=0") == 2, screen
    assert f"PAT stored in the keyring for {org.server.org_url}" in text
    assert "PAT from the keyring: " in text
    assert "assphrase" not in screen, "a passphrase was asked with a Secret Service"
    assert not (home / STORE).exists()
