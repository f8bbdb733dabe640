"""The real ``gpuci-tui setup`` in a real 80x24 terminal (tmux), signing in as a service principal.

Keys only, as an operator types them: the organisation's URL, "Service principal",
tenant, client id, a wrong secret (Entra's refusal on screen, nothing stored), the
right one, the pool, the image, the agents, Save and start. Around it: the simulated
organisation and Entra sign-in (HTTPS with its own CA), and a real Secret Service
(gnome-keyring on a private D-Bus, scripts/kr-session.sh) that the console stores the
client secret in. ``--foreground`` keeps the supervisor the wizard starts inside the
console (no detached daemon to outlive the test); its one agent is the emulator image,
which registers with the service principal's token the supervisor signs in for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.sim.login import SimLogin
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.real.rig import wait_for
from tests.real.test_keyring_real import KR_SESSION, TOOLS, daemons_of
from tests.real.test_tmux_demo import BINARY, Tmux

pytestmark = [pytest.mark.tmux, pytest.mark.keyring_real, pytest.mark.docker]

SECRET = "Q~tmux.secret-0123456789abcdefghijklmnopq"
WRONG = "Q~wrong.secret-0123456789abcdefghijklmnop"
CLIENT = "11111111-2222-4333-8444-555555555555"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
POOL = "gpu-a100"

READBACK = r"""
import json, subprocess, sys
from gpuci_tui.core.secrets.entra_secrets import CLIENT_SECRET, EntraSecretStore
url, client = sys.argv[1], sys.argv[2]
found = subprocess.run(["secret-tool", "search", "--all", "service", "gpuci-tui"],
                       capture_output=True, text=True, timeout=30)
print(json.dumps({"secret": EntraSecretStore(environ={}).get_secret(url, CLIENT_SECRET, client),
                  "search": found.stdout + found.stderr}))
"""


class Screens(Tmux):
    """`Tmux` that keeps every screen it read, to prove the secret never showed."""

    def __init__(self, command: str, width: int, height: int) -> None:
        self.seen: list[str] = []
        super().__init__(command, width, height)

    def screen(self) -> str:
        text = super().screen()
        self.seen.append(text)
        return text

    def type(self, text: str) -> None:
        """Type ``text`` literally (no key names)."""
        self._run("send-keys", "-t", "t", "-l", text)

    def wait_text(self, *texts: str, timeout: float = 30.0) -> str:
        """Wait until every one of ``texts`` is on screen (words may wrap across lines)."""
        return self.wait(lambda s: all(t in flat(s) for t in texts), timeout, " + ".join(texts))

    focus_colour = ""
    """The SGR code of a focused field's border, learnt from the first screen (`learn_focus`)."""

    def learn_focus(self) -> None:
        """Learn the focused border's colour from a screen with one field, which has the focus."""

        def learnt(_: str) -> bool:
            for line in self._run("capture-pane", "-e", "-p", "-t", "t").splitlines():
                if "▊▔" in SGR.sub("", line):
                    colours = [c for c in SGR.findall(line) if c.startswith("38;")]
                    self.focus_colour = colours[0] if colours else ""
                    return bool(colours)
            return False

        self.wait(learnt, 30, "a field")

    def focused(self) -> str:
        """The text line of the field drawn with the focused border ('' if none is on screen)."""
        lines = self._run("capture-pane", "-e", "-p", "-t", "t").splitlines()
        plain = [SGR.sub("", line) for line in lines]
        for row, line in enumerate(lines):
            if f"\x1b[{self.focus_colour}m" not in line:
                continue
            # Its top border, or its bottom one when scrolling left the top above the view.
            if "▊▔" in plain[row] and row + 1 < len(plain):
                return plain[row + 1]
            if "▊▁" in plain[row] and row > 0:
                return plain[row - 1]
        return ""

    def wait_focus(self, text: str, timeout: float = 30.0) -> str:
        """Wait until the focused field shows ``text`` (its value or its placeholder); its line.

        Textual hands a key to the widget focused when the key arrives, and Tab moves the
        focus only once it has passed through the old widget: text typed before that lands
        in the old field. A person looks where the highlight is before typing; so does the
        test.
        """
        self.wait(lambda _: text in self.focused(), timeout, f"the focus on {text!r}")
        return self.focused()

    def fill(self, text: str, shown: str | None = None) -> None:
        """Type ``text`` into the focused input and wait until it shows (``shown``: as masked)."""
        self.type(text)
        self.wait_focus(text if shown is None else shown)

    def clear(self, placeholder: str) -> None:
        """Empty the focused input (End, then delete all left of it): its placeholder shows.

        Those keys are bindings, which Textual applies only once the key has passed through
        the field: text typed before they are applied would be deleted too.
        """
        self.keys("End", "C-u")
        if placeholder:
            self.wait_focus(placeholder)
        else:
            self.wait(lambda _: self.focused().strip("▊▎ ") == "", 30, "the field empty")


SGR = re.compile("\x1b\\[([0-9;]*)m")


def flat(screen: str) -> str:
    """The screen's words on one line: a long line wraps at 80 columns wherever a space is."""
    return " ".join(screen.replace("│", " ").replace("▎", " ").split())


class Org:
    """The simulated organisation (one pool) and its Entra tenant with the service principal."""

    def __init__(self) -> None:
        self.org = SimOrg("simorg")
        self.org.add_pool(POOL)
        self.org.entra.add_app("gpuci-lab", client_id=CLIENT, secret=SECRET)
        self.server = SimServer(self.org).start()
        self.login = SimLogin(self.org.entra).start()

    def stop(self) -> None:
        self.login.stop()
        self.server.stop()


@pytest.fixture
def org() -> Iterator[Org]:
    o = Org()
    yield o
    o.stop()


@pytest.fixture(scope="module")
def terminal_tools() -> None:
    missing = sorted(
        {pkg for tool, pkg in {**TOOLS, "tmux": "tmux"}.items() if not shutil.which(tool)}
    )
    if missing:
        pytest.fail(
            f"Required and missing: apt-get install {' '.join(missing)} (scripts/test.sh installs "
            "them).",
            pytrace=False,
        )
    assert BINARY.exists(), f"console script missing: {BINARY}"


LOGIN_DIRS = {
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_STATE_HOME": "state",
    "XDG_CACHE_HOME": "cache",
    "XDG_RUNTIME_DIR": "run",
}


def login_home(home: Path) -> dict[str, str]:
    """HOME and the XDG directories of a login under ``home`` (created, 0700)."""
    for sub in LOGIN_DIRS.values():
        (home / sub).mkdir(parents=True, mode=0o700, exist_ok=True)
    return {"HOME": str(home)} | {var: str(home / sub) for var, sub in LOGIN_DIRS.items()}


def session_script(tmp_path: Path, home: Path, org: Org, config: Path) -> Path:
    """The pane's command: a D-Bus session with gnome-keyring, the wizard, then a read-back.

    The bus address is written out so that the test can ask the live keyring (secret-tool)
    while the wizard runs; after the console exits, the project's own reader reads the
    secret back in the same session, as the daemon would on this host.
    """
    env = {
        **login_home(home),
        "REQUESTS_CA_BUNDLE": str(org.login.ca_file),
        "TERM": "xterm-256color",
        "KEYRING_TEST_PASSWORD": "test",
    }
    inner = tmp_path / "inner.sh"
    q = shlex.quote
    inner.write_text(
        "#!/bin/sh\n"
        f'printf %s "$DBUS_SESSION_BUS_ADDRESS" > {q(str(tmp_path / "bus"))}\n'
        f"{q(str(BINARY))} --config {q(str(config))} --foreground setup\n"
        f"echo $? > {q(str(tmp_path / 'exit-code'))}\n"
        f"{q(sys.executable)} -c {q(READBACK)} {q(org.server.org_url)} {CLIENT} "
        f"> {q(str(tmp_path / 'readback.json'))} 2>&1\n"
    )
    outer = tmp_path / "pane.sh"
    exports = "".join(f"export {k}={q(v)}\n" for k, v in env.items())
    outer.write_text(
        "#!/bin/sh\n"
        # The test process's own values would size the app wrongly or reach another bus.
        "unset COLUMNS LINES DBUS_SESSION_BUS_ADDRESS GPUCI_CONFIG GPUCI_PAT GPUCI_PAT_FILE "
        "PYTHON_KEYRING_BACKEND GPUCI_CLIENT_SECRET GPUCI_CLIENT_SECRET_FILE\n"
        f"{exports}"
        f"exec dbus-run-session -- {q(str(KR_SESSION))} sh {q(str(inner))}\n"
    )
    return outer


def live_keyring(tmp_path: Path, home: Path) -> str:
    """What the running session's Secret Service holds for gpuci-tui (secret-tool's listing)."""
    bus = (tmp_path / "bus").read_text()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "DBUS_SESSION_BUS_ADDRESS": bus}
    found = subprocess.run(
        ["secret-tool", "search", "--all", "service", "gpuci-tui"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return found.stdout + found.stderr


def containers_named(docker_client: Any, prefix: str) -> list[Any]:
    return docker_client.containers.list(  # type: ignore[no-any-return]
        all=True, sparse=True, filters={"name": prefix}
    )


@pytest.mark.usefixtures("terminal_tools")
def test_setup_signs_in_as_a_service_principal_by_keys_alone(
    tmp_path: Path, org: Org, docker_client: Any, emulator_image: str
) -> None:
    home = tmp_path / "h"
    config = tmp_path / "cfg" / "config.toml"
    config.parent.mkdir()
    prefix = f"sp{uuid.uuid4().hex[:6]}"
    pane = session_script(tmp_path, home, org, config)
    tmux = Screens(f"sh {shlex.quote(str(pane))}", 80, 24)
    started = time.monotonic()
    try:
        tmux.wait_text("Step 1 of 7")
        tmux.learn_focus()
        tmux.wait_focus("https://dev.azure.com/ORG")
        tmux.fill(org.server.org_url)
        tmux.keys("Enter")

        # The PAT field has the focus; the real Secret Service was found.
        tmux.wait_text("Step 2 of 7", "The PAT will be stored in: keyring.backends.SecretService")
        tmux.wait_focus("paste the PAT (hidden)")
        tmux.keys("Tab")
        tmux.wait_focus("Personal access token (PAT)")
        tmux.keys("Down", "Enter")  # the method buttons: the second one
        tmux.wait(lambda s: "paste the PAT" not in s, 10, "the PAT field hidden")
        tmux.keys("Tab")
        tmux.wait_focus("Directory (tenant) ID")
        tmux.fill(TENANT)
        tmux.keys("Tab")
        tmux.wait_focus("Application (client) ID")
        tmux.fill(CLIENT)
        tmux.keys("Tab", "Tab", "Tab")  # past the secret and the certificate: the sign-in host
        tmux.wait_focus("https://login.microsoftonline.com")
        tmux.clear("sign-in host (sovereign clouds)")
        tmux.fill(org.login.url)
        tmux.keys("BTab", "BTab")  # back to the secret
        tmux.wait_focus("client secret (hidden")
        tmux.fill(WRONG, "•" * len(WRONG))
        tmux.keys("Enter")
        tmux.wait_text("AADSTS7000215")
        assert "●●○○○○○" in tmux.screen(), "a refused secret keeps the step"
        assert "gpuci-tui" not in live_keyring(tmp_path, home), "a refused secret is not stored"
        assert org.org.entra.sign_ins == []

        tmux.clear("client secret (hidden")  # the secret field kept the focus
        tmux.fill(SECRET, "•" * len(SECRET))
        tmux.keys("Enter")
        tmux.wait_text("Step 3 of 7", f"{POOL} (0 agents)")
        assert f"#client-secret:{CLIENT}" in live_keyring(tmp_path, home)
        assert org.org.entra.sign_ins[0] == (CLIENT, "secret")

        tmux.wait_focus("pool name")
        tmux.fill(POOL)
        tmux.keys("Enter")
        tmux.wait_text("Step 4 of 7", "No GPU visible on this host")
        tmux.wait_focus("gpuci-agent:")  # the suggestion is in: clearing it now sticks
        tmux.clear("REPO/IMAGE:TAG")
        tmux.fill(emulator_image)
        tmux.wait_text("present locally")
        tmux.keys("Enter")

        # The defaults (one agent; a prefix from the host name) are filled in together.
        tmux.wait_text("Step 5 of 7")
        count = tmux.wait_focus("1")
        tmux.keys("Tab")
        tmux.wait(lambda _: tmux.focused() not in ("", count), 30, "the focus on the prefix")
        tmux.clear("")
        tmux.fill(prefix)
        tmux.keys("Tab")
        tmux.wait_focus("all: every agent sees every GPU")
        tmux.keys("Down", "Enter")  # GPUs: none (this host has none)
        tmux.keys("Tab")
        tmux.wait_focus("bridge: Docker's default network")
        tmux.keys("Down", "Enter")  # network: host (the organisation is on 127.0.0.1)
        tmux.keys("C-n")
        tmux.wait_text("Step 6 of 7")
        tmux.keys("C-n")

        review = tmux.wait_text("Step 7 of 7", "network: host")
        assert (
            "Sign-in signed in as service principal gpuci-lab; client secret stored in the OS "
            "keyring" in flat(review)
        ), review
        assert "GPUs: none" in flat(review) and f"({prefix}-0)" in flat(review), review
        tmux.keys("Enter")  # the focused button: Save and start

        # The console's own supervisor reads the secret back from the keyring and signs in
        # again; its agent registers with the token it hands the container.
        # Slot 0's agent (lane a, or its standby lane b: whichever takes jobs now) is idle.
        dashboard = tmux.wait(
            lambda s: any(f"{prefix}-0" in line and " idle " in line for line in s.splitlines()),
            60,
            "slot 0's agent idle",
        )
        assert "✓ service principal gpuci-lab · token valid" in dashboard, dashboard
        lanes = [org.org.find_agent(f"{prefix}-0{lane}") for lane in ("", "-b")]
        # Registered with the token the supervisor signed in for: online on the organisation.
        assert any(a is not None and a.online for a in lanes), lanes
        tmux.keys("q")
        tmux.wait_text("Leave agents running")
        tmux.keys("l")
        exit_code = tmp_path / "exit-code"  # created by the shell before the code is in it
        code = wait_for(lambda: exit_code.exists() and exit_code.read_text().strip(), 20,
                        "the console's exit code")  # fmt: skip
        assert code == "0", tmux.screen()
        readback_file = tmp_path / "readback.json"
        wait_for(lambda: readback_file.exists() and readback_file.read_text().strip(), 30,
                 "the read-back")  # fmt: skip
        readback = json.loads(readback_file.read_text().strip().splitlines()[-1])
        wait_for(lambda: not daemons_of(home), 10, "the keyring session to end")
        elapsed = time.monotonic() - started
    finally:
        tmux.kill()
        leftovers = daemons_of(home)  # after a failure: the session's bus and keyring daemon
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        for container in containers_named(docker_client, prefix):
            container.remove(force=True)

    assert readback["secret"] == SECRET, readback
    assert (
        f"attribute.username = {org.server.org_url}#client-secret:{CLIENT}" in readback["search"]
    ), readback
    text = config.read_text()
    saved = load_config(config)
    assert (saved.azure.auth, saved.azure.client_id, saved.azure.tenant_id) == (
        "service-principal",
        CLIENT,
        TENANT,
    )
    assert saved.azure.authority == org.login.url
    assert 'auth = "service-principal"' in text
    assert SECRET not in text and WRONG not in text and "Q~" not in text
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert {how for _, how in org.org.entra.sign_ins} == {"secret"}
    assert not [s for s in tmux.seen if SECRET in s or WRONG in s or "Q~" in s], "echoed"
    assert not leftovers, "the keyring session ends with the console"
    print(f"setup by keys: {elapsed:.1f} s")
