"""Bad-input corpus, part 2 (issue 5 §3): everything but config.toml, with exact messages.

`OTHER_CASES`: the organisation URL as the Azure client sees it, PATs, pools, the Docker
engine, NVML, the keyring, the command line, all through public entry points. Each case
returns the message the operator would read; the good configuration must stay untouched.

No network beyond loopback: organisation answers come from SimServer on 127.0.0.1, and
remote host names only ever reach a requests adapter that records and never resolves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import (
    load_config,
)
from tests.badinput.cases import (
    Env,
    cli_check_config_process,
    cli_empty_config_path,
    cli_run_with_a_missing_pat_file,
    cli_scale_two,
    docker_socket_denied,
    docker_socket_missing,
    http_remote_client,
    image_missing,
    keyring_absent,
    keyring_locked,
    nvml_missing,
    pat_empty_typed,
    pat_file,
    pat_file_empty,
    pat_file_missing,
    pat_file_two_lines,
    pat_file_unreadable,
    pat_with_newline_typed,
    pat_with_space_in_env,
    pool_ambiguous,
    pool_empty_name,
    pool_missing,
    trailing_path_client,
    typo_host,
)
from tests.badinput.helpers import (
    AGAIN,
    GOOD_URL,
    PAT,
    good_doc,
    save_good,
    write_toml,
)
from tests.badinput.test_corpus_config import CONFIG_CASES


@dataclass(frozen=True)
class Case:
    id: str
    run: Callable[[Env], str]
    expected: str
    needs: tuple[str, ...] = ()
    """The components the case uses: their markers (tests/components.py)."""

    def param(self) -> object:
        """The case as a pytest parameter, marked with what it needs."""
        return pytest.param(self, id=self.id, marks=[getattr(pytest.mark, n) for n in self.needs])


NOT_FOUND_FILE = (
    "GPUCI_PAT_FILE names {tmp}/pat, which does not exist; create it (the PAT on one line, "
    "chmod 600) or unset GPUCI_PAT_FILE."
)
DOCS_POOLS = "Pools you can see: gpu, gpu-a100."

OTHER_CASES = [
    Case(
        "url-typo-host-does-not-resolve",
        typo_host,
        "Cannot reach dev.azure.co: the host name does not resolve (DNS). Check the "
        "organisation URL, this host's network and its proxy settings.",
    ),
    Case(
        "url-http-remote-refused-by-client",
        http_remote_client,
        "Refusing to send the PAT to example.invalid over plain http://: anyone on the network "
        "could read it. Use the https:// address of the organisation (http:// is only allowed "
        "for 127.0.0.1, ::1 and localhost).",
    ),
    Case(
        "url-trailing-path-refused-by-client",
        trailing_path_client,
        "https://dev.azure.com/acme/project/_build is a project or page address, not the "
        "organisation's: use https://dev.azure.com/acme.",
    ),
    Case(
        "pat-with-spaces",
        pat_with_space_in_env,
        f"The PAT in GPUCI_PAT has spaces or line breaks inside; {AGAIN}",
    ),
    Case(
        "pat-with-newline",
        pat_with_newline_typed,
        f"The PAT given has spaces or line breaks inside; {AGAIN}",
    ),
    Case("pat-empty", pat_empty_typed, f"The PAT given is empty; {AGAIN}"),
    Case("pat-file-empty", pat_file_empty, f"The PAT in GPUCI_PAT_FILE is empty; {AGAIN}"),
    Case(
        "pat-file-two-lines",
        pat_file_two_lines,
        f"The PAT in GPUCI_PAT_FILE has spaces or line breaks inside; {AGAIN}",
    ),
    Case("pat-file-missing", pat_file_missing, NOT_FOUND_FILE),
    Case(
        "pat-file-unreadable",
        pat_file_unreadable,
        "TokenFileError GPUCI_PAT_FILE names {dir}/pat, which cannot be read (Permission "
        "denied); make it readable by this user (owned by you, chmod 600).",
        needs=("root",),
    ),
    Case(
        "pool-nonexistent",
        pool_missing,
        f"No agent pool named 'gpu-h100' in acme. Did you mean 'gpu-a100'? {DOCS_POOLS}",
    ),
    Case(
        "pool-several-match",
        pool_ambiguous,
        "2 agent pools in acme are named 'gpu' (ids 42, 45). Rename all but one in "
        "Organization settings → Agent pools.",
    ),
    Case(
        "pool-empty-name",
        pool_empty_name,
        "The agent pool name is empty. Set it in the configuration.",
    ),
    Case(
        "docker-socket-missing",
        docker_socket_missing,
        "Docker engine not reachable: /nonexistent.sock does not exist. Is Docker installed "
        "and running? (systemctl start docker)",
    ),
    Case(
        "docker-socket-permission-denied",
        docker_socket_denied,
        "RuntimeUnavailableError Permission denied on {dir}/docker.sock: add your user to the "
        "'docker' group (sudo usermod -aG docker $USER, then log in again) or run as root",
        needs=("root",),
    ),
    Case(
        "image-missing-locally",
        image_missing,
        "Image {image} is not present locally. Pull or build it first: gpuci-tui image pull "
        'or docker pull {image} (with [agents] pull = "never" gpuci-tui does not pull it)',
        needs=("docker",),
    ),
    Case(
        "nvml-missing",
        nvml_missing,
        "NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver is installed on this "
        "host. Install the NVIDIA driver to monitor and use GPUs.",
    ),
    Case(
        "keyring-locked",
        keyring_locked,
        "Cannot read the PAT from the keyring: it is locked (Failed to unlock the collection!). "
        "Unlock it, or use the encrypted file store or GPUCI_PAT_FILE.",
    ),
    Case(
        "keyring-absent",
        keyring_absent,
        "No keyring is available in this session. Over SSH there is usually no Secret Service "
        'on D-Bus. Either run gpuci-tui under "dbus-run-session" with "gnome-keyring-daemon '
        '--unlock" (see docs/identity.md, "Keyring"), or use the encrypted file store (its passphrase is '
        "asked on the terminal). A service gets the PAT from a file instead: a systemd "
        "credential (in its unit LoadCredential=gpuci-pat:/etc/gpuci-tui/pat, or "
        "LoadCredentialEncrypted=; gpuci-tui reads $CREDENTIALS_DIRECTORY/gpuci-pat), or "
        "GPUCI_PAT_FILE naming a file that holds the PAT on one line (chmod 600). See docs/identity.md, "
        '"The PAT".',
    ),
    Case(
        "cli-scale-two",
        cli_scale_two,
        "gpuci-tui scale: error: argument count: invalid int value: 'two'",
    ),
    Case(
        "cli-check-config-process",
        cli_check_config_process,
        'gpuci-tui: {bad}: agents.count: must be a whole number from 1 to 64, got "two"\n'
        '{bad}: agents.gpus: must be one of "all", "none", "per-agent", "mig", a list of GPU ids like ["0", "1"] or { per_agent = ["0", "1"] }, got "every"\n',
    ),
    Case(
        "cli-empty-config-path",
        cli_empty_config_path,
        'gpuci-tui: --config was given an empty path; give a file, e.g. "--config ~/gpu.toml"\n',
    ),
    Case(
        "cli-run-with-missing-pat-file",
        cli_run_with_a_missing_pat_file,
        "gpuci-tui: GPUCI_PAT_FILE names {tmp}/absent-pat, which does not exist; create it "
        "(the PAT on one line, chmod 600) or unset GPUCI_PAT_FILE.\n",
        needs=("daemon",),
    ),
]


@pytest.mark.parametrize("case", [c.param() for c in OTHER_CASES])
def test_operator_message(case: Case, tmp_path: Path, good_dir: Path) -> None:
    env = Env(tmp_path)
    try:
        message = case.run(env)
    finally:
        env.close()
    assert message == case.expected.replace("{tmp}", str(tmp_path))
    assert PAT not in message


def test_pat_file_with_a_trailing_newline_is_fine(tmp_path: Path) -> None:
    """The usual shape of a PAT file (echo "$PAT" > file) is not bad input."""
    store = pat_file(Env(tmp_path), f"  {PAT}\r\n".encode())
    assert store.get_token(GOOD_URL) == PAT


def test_the_corpus_is_big_enough() -> None:
    cases = (
        len(CONFIG_CASES) + len(OTHER_CASES) + 2  # corrupt TOML, unwritable directory
    )
    assert cases >= 30
    assert len({c.id for c in CONFIG_CASES} | {c.id for c in OTHER_CASES}) == cases - 2


def test_good_config_round_trips(tmp_path: Path) -> None:
    """The baseline every case starts from is itself valid (else every case would pass)."""
    path = tmp_path / "config.toml"
    save_good(path)
    write_toml(tmp_path / "doc.toml", good_doc())
    assert load_config(path) == dataclasses.replace(load_config(tmp_path / "doc.toml"), path=path)
