"""``gpuci-tui export kubernetes`` end to end: files, summary, errors, atomic writes, no PAT."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
import yaml

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.secrets.token_store import TokenStore
from tests.keyring_fakes import MemoryKeyring

ORG = "https://dev.azure.com/acme"
PAT = "k8sexp0rtPATnever1nF1les0rStdout9zq8xw7vu6ts5rq4po3nm2lk1"
NEEDLES = [
    PAT.encode(),
    base64.b64encode(PAT.encode()),  # how a Secret manifest's data: would hold it
    base64.b64encode(f":{PAT}".encode()),  # an Authorization header's value
    PAT[:12].encode(),  # not even a fragment
]
FILES = ["default-NOTES.md", "default-scaledjob.yaml", "default-triggerauthentication.yaml"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    dataset = tmp_path / "imagenet"
    dataset.mkdir()
    path = tmp_path / "config.toml"
    path.write_text(
        f'[azure]\nurl = "{ORG}"\npool = "gpu"\n\n'
        '[agents]\ncount = 3\nimage = "registry.example/agent:cuda12.8"\n'
        'name_prefix = "gpuhost"\ngpus = "all"\nmem_limit = "32g"\n\n'
        f'[[agents.volumes]]\nhost = "{dataset}"\ncontainer = "/datasets/imagenet"\n'
        'env = "IMAGENET_DIR"\n',
        encoding="utf-8",
    )
    return path


def export(config: Path, *args: str) -> int:
    return main(["--config", str(config), "export", "kubernetes", *args])


def test_writes_the_manifests_and_says_what_to_do(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out" / "k8s"
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "2") == exitcodes.OK
    assert sorted(p.name for p in out_dir.iterdir()) == FILES
    assert [p.name for p in out_dir.parent.iterdir()] == ["k8s"]  # no staging directory left
    stdout = capsys.readouterr().out
    for name in FILES:
        assert name in stdout
    assert (
        "kubectl -n gpuci create secret generic gpuci-azp-pat --from-file=token=PATFILE" in stdout
    )
    assert f"kubectl apply -f {out_dir}/" in stdout
    (job,) = yaml.safe_load_all((out_dir / "default-scaledjob.yaml").read_text(encoding="utf-8"))
    assert job["spec"]["maxReplicaCount"] == 3
    (agent,) = job["spec"]["jobTargetRef"]["template"]["spec"]["containers"]
    assert agent["resources"]["limits"] == {"nvidia.com/gpu": "2", "memory": "32Gi"}


def test_options_reach_the_manifests(config: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "k8s"
    dataset = tmp_path / "imagenet"
    args = [
        "-o",
        str(out_dir),
        "--gpus-per-agent",
        "1",
        "--namespace",
        "ci",
        "--secret-name",
        "pat",
    ]
    assert export(config, *args, "--dataset-pvc", f"{dataset}/=imagenet-ro") == exitcodes.OK
    text = (out_dir / "default-scaledjob.yaml").read_text(encoding="utf-8")
    (job,) = yaml.safe_load_all(text)
    assert job["metadata"]["namespace"] == "ci"
    volumes = job["spec"]["jobTargetRef"]["template"]["spec"]["volumes"]
    assert {
        "name": "dataset-0",
        "persistentVolumeClaim": {"claimName": "imagenet-ro", "readOnly": True},
    } in volumes
    assert "secretName: pat" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--group", "train"], 'unknown agent group "train"; this configuration has: default'),
        ([], "--gpus-per-agent N"),
        (["--gpus-per-agent", "1", "--dataset-pvc", "/nowhere=x"], "is not the host path"),
        (["--gpus-per-agent", "1", "--dataset-pvc", "claim-only"], "must be HOSTPATH=CLAIM"),
        (["--gpus-per-agent", "1", "--namespace", "Upper"], "not a valid namespace"),
    ],
)
def test_bad_input_exits_4_with_an_actionable_message(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert export(config, "-o", str(tmp_path / "k8s"), *args) == exitcodes.CONFIG
    assert message in capsys.readouterr().err
    assert not (tmp_path / "k8s").exists()


def test_a_config_without_a_pool_exits_4(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(config.read_text(encoding="utf-8").replace('pool = "gpu"\n', ""), "utf-8")
    assert export(config, "-o", str(tmp_path / "k8s"), "--gpus-per-agent", "1") == exitcodes.CONFIG
    assert "azure.pool" in capsys.readouterr().err


def test_docker_socket_is_refused(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config.read_text(encoding="utf-8").replace(
        "[[agents", "docker_socket = true\n\n[[agents"
    )
    config.write_text(text, encoding="utf-8")
    assert export(config, "-o", str(tmp_path / "k8s"), "--gpus-per-agent", "1") == exitcodes.CONFIG
    assert "docker_socket = true cannot be exported" in capsys.readouterr().err


def test_a_non_empty_directory_is_kept_unless_force(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "k8s"
    out_dir.mkdir()
    (out_dir / "mine.yaml").write_text("keep me", encoding="utf-8")
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1") == exitcodes.FAILED
    err = capsys.readouterr().err
    assert "is not empty" in err and "--force" in err
    assert [p.name for p in out_dir.iterdir()] == ["mine.yaml"]
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1", "--force") == exitcodes.OK
    assert sorted(p.name for p in out_dir.iterdir()) == FILES  # replaced as a whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "imagenet", "k8s"]


def test_force_never_replaces_a_directory_with_subdirectories(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "project" / "src").mkdir(parents=True)
    args = ["-o", str(tmp_path / "project"), "--gpus-per-agent", "1", "--force"]
    assert export(config, *args) == exitcodes.FAILED
    assert "is left alone because it holds src" in capsys.readouterr().err
    assert (tmp_path / "project" / "src").is_dir()


def test_an_unwritable_target_exits_1(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert export(config, "-o", str(tmp_path / "file" / "k8s"), "--gpus-per-agent", "1") == 1
    assert "cannot write into" in capsys.readouterr().err
    assert export(config, "-o", str(tmp_path / "file"), "--gpus-per-agent", "1") == 1
    assert "is not a directory" in capsys.readouterr().err


def test_a_failure_while_writing_leaves_nothing_behind(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "k8s"
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1") == exitcodes.OK
    before = {p.name: p.read_bytes() for p in out_dir.iterdir()}
    written: list[str] = []
    real_write = Path.write_text

    def failing_write(self: Path, *args: object, **kwargs: object) -> int:
        written.append(self.name)
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        return real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", failing_write)
    args = ["-o", str(out_dir), "--gpus-per-agent", "4", "--force"]
    assert export(config, *args) == exitcodes.FAILED
    # The earlier export is untouched and no temporary directory is left.
    assert {p.name: p.read_bytes() for p in out_dir.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "imagenet", "k8s"]


@pytest.fixture
def pat_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The PAT where the CLI could read it: keyring, GPUCI_PAT_FILE and GPUCI_PAT."""
    previous = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    TokenStore().set_token(ORG, PAT)
    pat_file = tmp_path / "pat"
    pat_file.write_text(PAT + "\n", encoding="utf-8")
    pat_file.chmod(0o600)
    monkeypatch.setenv("GPUCI_PAT_FILE", str(pat_file))
    monkeypatch.setenv("GPUCI_PAT", PAT)
    assert TokenStore().get_token(ORG) == PAT  # so it really is within reach
    yield
    keyring.set_keyring(previous)


@pytest.mark.usefixtures("pat_everywhere")
def test_the_pat_is_in_no_file_and_not_on_stdout(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def leaks(data: bytes) -> list[bytes]:
        return [needle for needle in NEEDLES if needle in data]

    pat_file = Path(os.environ["GPUCI_PAT_FILE"])
    assert leaks(pat_file.read_bytes()), "the search must find the PAT where it is"
    assert leaks(base64.b64encode(PAT.encode())), "and its base64 form"
    out_dir = tmp_path / "k8s"
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1") == exitcodes.OK
    captured = capsys.readouterr()
    assert leaks(captured.out.encode()) == [] and leaks(captured.err.encode()) == []
    for path in out_dir.iterdir():
        assert leaks(path.read_bytes()) == [], path
    # The PAT reaches the cluster only as a Secret reference.
    auth = (out_dir / "default-triggerauthentication.yaml").read_text(encoding="utf-8")
    assert "secretTargetRef" in auth and "gpuci-azp-pat" in auth
    assert os.environ["GPUCI_PAT"] == PAT


def test_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["export", "kubernetes", "--help"])
    assert exc.value.code == 0
    assert "--gpus-per-agent N" in capsys.readouterr().out
    for argv in (["export"], ["export", "kubernetes", "--gpus-per-agent", "two"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == exitcodes.USAGE


def test_a_host_path_that_exists_only_on_the_nodes_is_exported(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The volume's host path names a directory on the cluster's nodes, not on this machine."""
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace(str(tmp_path / "imagenet"), "/mnt/nodes-only/imagenet"))
    out_dir = tmp_path / "k8s"
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1") == exitcodes.OK
    assert "/mnt/nodes-only/imagenet" in (out_dir / "default-scaledjob.yaml").read_text()
    # The daemon still refuses it: its agents would mount a directory that is not there.
    assert main(["--config", str(config), "check-config"]) == exitcodes.CONFIG
    assert "/mnt/nodes-only/imagenet does not exist on this host" in capsys.readouterr().err


def test_the_manifests_and_notes_say_which_keda_they_need(config: Path, tmp_path: Path) -> None:
    """fetchUnfinishedJobsOnly is new in KEDA 2.18; an older KEDA rejects the ScaledJob."""
    out_dir = tmp_path / "k8s"
    assert export(config, "-o", str(out_dir), "--gpus-per-agent", "1") == exitcodes.OK
    scaled_job = (out_dir / "default-scaledjob.yaml").read_text()
    assert "fetchUnfinishedJobsOnly" in scaled_job
    assert "# Needs KEDA 2.18 or later" in scaled_job
    assert "KEDA 2.18 or later is installed" in (out_dir / "default-NOTES.md").read_text()
