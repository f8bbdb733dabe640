"""Harness for dockeragent/start.sh tests: stub config.sh/run.sh/Agent.Listener around start.sh.

The stubs mirror the real agent's layout: config.sh and run.sh are thin wrappers
that start ``bin/Agent.Listener`` as a child (and, like the real run.sh, do not
forward signals), so start.sh's signal forwarding meets the same process tree
as in a container. The stub listener records its argv, its real environment
(/proc/self/environ, which its jobs would inherit) and its uid.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import wait_until  # noqa: F401 - the start.sh tests import it from here

START_SH = Path(__file__).resolve().parents[2] / "dockeragent" / "start.sh"
#: Runs start.sh with SIGINT and SIGQUIT at their defaults, as a container's entrypoint gets
#: them. A test run started in the background of a non-interactive shell (a CI step, `cmd &`)
#: has both ignored, every child inherits that, and bash cannot trap a signal ignored when it
#: started: the SIGINT test then waited for a signal start.sh never saw.
SIGNALS_AT_DEFAULT = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGQUIT, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)
BAKED_VERSION = "4.275.0"

WRAPPER = """#!/bin/bash
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
printf '%s\\n' "$@" > "$STUB_RECORD_DIR/{name}.argv"
"$DIR"/bin/Agent.Listener {mode} "$@"
"""

LISTENER = r"""#!/bin/bash
rec=$STUB_RECORD_DIR
mode=$1; shift
printf '%s\n' "$@" > "$rec/$mode.argv"
tr '\0' '\n' < /proc/$$/environ > "$rec/$mode.env"
id -u > "$rec/$mode.uid"
id -G > "$rec/$mode.groups"
pwd > "$rec/$mode.cwd"
if [ -e .agent ]; then echo present; else echo absent; fi > "$rec/$mode.dotagent"
if [ -e "$STUB_TOKEN_PATH" ]; then echo present; else echo absent; fi > "$rec/$mode.token_file"
var="STUB_${mode^^}"
behaviour=${!var:-exit:0}
sleeper=""
on_term() {
    echo TERM >> "$rec/$mode.signals"
    if [ "$behaviour" = busy ]; then
        sleep 0.3  # cancelling the job and reporting it to the server
        echo canceled > "$rec/job.result"
    fi
    # Every background sleep, not only $sleeper: a TERM between `sleep 30 &` and
    # `sleeper=$!` left one running (seen under load), and the test waited for it.
    kill $(jobs -p) 2>/dev/null
    wait
    exit 0
}
trap on_term TERM
case $behaviour in
    exit:*) exit "${behaviour#exit:}" ;;
    hold)
        touch "$rec/$mode.ready"
        while [ ! -e "$rec/$mode.release" ]; do sleep 0.02; done
        exit 0 ;;
    idle|busy)
        [ "$behaviour" = busy ] && echo running > "$rec/job.result"
        touch "$rec/$mode.ready"
        # The sleep holds no pipe of the caller's: an orphan could not keep its output open.
        while :; do sleep 30 >/dev/null 2>&1 & sleeper=$!; wait $sleeper; done ;;
esac
"""


@dataclass
class Result:
    code: int
    out: str


class Agent:
    """A temporary agent directory with stubs, a token and a record directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "agent"
        self.rec = root / "rec"
        self.token_dir = root / "run-azp"
        self.token_file = self.token_dir / "token"
        self.token = secrets.token_hex(26)
        (self.dir / "bin").mkdir(parents=True)
        self.rec.mkdir()
        for name, mode in (("config.sh", "configure"), ("run.sh", "run")):
            path = self.dir / name
            path.write_text(WRAPPER.replace("{name}", name).replace("{mode}", mode))
        (self.dir / "bin" / "Agent.Listener").write_text(LISTENER)
        (self.dir / ".image-agent-version").write_text(BAKED_VERSION + "\n")
        for path in (self.dir / "config.sh", self.dir / "run.sh", self.dir / "bin/Agent.Listener"):
            path.chmod(0o755)
        # Like the supervisor's put_archive: a root-only directory and file.
        self.token_dir.mkdir(mode=0o700)
        self.deliver_token()
        # Readable by an unprivileged run-as user (the privilege-drop test).
        for path in (root, self.dir, self.dir / "bin"):
            path.chmod(0o755)
        self.rec.chmod(0o777)
        self.dir.chmod(0o777)
        self.proc: subprocess.Popen[str] | None = None

    def deliver_token(self) -> None:
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)

    def env(self, **overrides: str | None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AZP_URL": "http://127.0.0.1:9/org/",
            "AZP_POOL": "gpu",
            "AZP_AGENT_NAME": "gpu-host-1",
            "AZP_TOKEN_FILE": str(self.token_file),
            "AZP_AGENT_DIR": str(self.dir),
            "AZP_AGENT_SOURCE": str(self.dir),
            "AZP_DOCKER_SOCKET": str(self.root / "no-docker.sock"),
            "AZP_TEST_SKIP_PRIVDROP": "1",
            "AZP_SKIP_VERSION_CHECK": "1",
            "STUB_RECORD_DIR": str(self.rec),
            "STUB_TOKEN_PATH": str(self.token_file),
            "NVIDIA_VISIBLE_DEVICES": "GPU-1234",
        }
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def start(self, **overrides: str | None) -> subprocess.Popen[str]:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SIGNALS_AT_DEFAULT, str(START_SH)],
            env=self.env(**overrides),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        return self.proc

    def finish(self, timeout: float = 20.0) -> Result:
        assert self.proc is not None
        out, _ = self.proc.communicate(timeout=timeout)
        return Result(self.proc.returncode, out)

    def run(self, **overrides: str | None) -> Result:
        self.start(**overrides)
        return self.finish()

    def read(self, name: str) -> str:
        return (self.rec / name).read_text()

    def argv(self, mode: str) -> list[str]:
        return self.read(f"{mode}.argv").splitlines()

    def environ(self, mode: str) -> dict[str, str]:
        return dict(
            line.split("=", 1) for line in self.read(f"{mode}.env").splitlines() if "=" in line
        )

    def has(self, name: str) -> bool:
        return (self.rec / name).exists()

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own session, started above
            self.proc.wait(timeout=10)


def cmdlines_containing(needle: str) -> list[str]:
    hits = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            hits.append(f"{entry.name}: {cmdline}")
    return hits
