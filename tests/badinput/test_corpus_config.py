"""Bad-input corpus, part 1 (issue 5 §3): every wrong value in config.toml, with its exact message.

`CONFIG_CASES`: a good document with one thing wrong. Each case is asserted three ways with
the same words: `load_config` on the file, ``gpuci-tui --config FILE check-config`` (exit 4,
the message on stderr, nothing else), and `save_config` of the same values built in memory
over an existing good file, which must refuse. The bad file and the good configuration
directory are compared byte for byte afterwards: nothing is rewritten, no ``.bak`` or
temporary file is left. Part 2 (everything else the operator touches) is
test_corpus_other.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.config.loader import (
    AgentsConfig,
    AzureConfig,
    Config,
    ConfigError,
    MetricsConfig,
    VolumeConfig,
    load_config,
    save_config,
    validate_config,
)
from gpuci_tui.core.config.validate import IMAGE_EXAMPLE, PAT_ADVICE
from tests.badinput.helpers import (
    AGENTS_KEYS,
    PAT,
    Snapshot,
    as_nobody,
    good_doc,
    save_good,
    shared_dir,
    write_toml,
)

# =========================================================================== config.toml


DIGEST_ADVICE = (
    "a digest is sha256: and 64 lowercase hex (docker image inspect lists it under RepoDigests), "
    'e.g. "registry.example.com/gpuci-agent@sha256:<64 hex>"; or use a tag, '
    f'"{IMAGE_EXAMPLE}"'
)


@dataclass(frozen=True)
class ConfigCase:
    """A good document with one thing wrong, and the one problem that must be reported."""

    id: str
    patch: Callable[[dict[str, Any], Path], None]
    """Makes the good document bad; gets a directory for host paths."""
    key: str
    problem: str
    """``{tmp}`` stands for that directory."""
    in_memory: bool = True
    """Whether the same values can be built as a `Config` (not so for unknown keys)."""
    gpu_count: int | None = None
    """The host's GPU count to validate against (only the library API takes it)."""


def setv(section: str, key: str, value: Any) -> Callable[[dict[str, Any], Path], None]:
    def patch(doc: dict[str, Any], tmp: Path) -> None:
        doc.setdefault(section, {})[key] = value

    return patch


def volumes(*items: dict[str, str]) -> Callable[[dict[str, Any], Path], None]:
    """``[[agents.volumes]]`` entries; ``{tmp}`` in a value is the case's directory."""

    def patch(doc: dict[str, Any], tmp: Path) -> None:
        (tmp / "data").mkdir(exist_ok=True)
        (tmp / "afile").write_text("not a directory\n")
        doc["agents"]["volumes"] = [
            {k: v.replace("{tmp}", str(tmp)) for k, v in item.items()} for item in items
        ]

    return patch


def combine(*patches: Callable[[dict[str, Any], Path], None]) -> Callable[..., None]:
    def patch(doc: dict[str, Any], tmp: Path) -> None:
        for p in patches:
            p(doc, tmp)

    return patch


DATA = {"host": "{tmp}/data", "container": "/datasets/a"}
COUNT_RULE = "must be a whole number from 1 to 64, got "

CONFIG_CASES = [
    ConfigCase(
        "url-no-scheme",
        setv("azure", "url", "dev.azure.com/acme"),
        "azure.url",
        'must be a URL starting with https://, e.g. "https://dev.azure.com/acme"; '
        'got "dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-http-remote-host",
        setv("azure", "url", "http://dev.azure.com/acme"),
        "azure.url",
        "must use https:// (http:// is only allowed for a server on this machine: 127.0.0.1, "
        '::1 or localhost); use "https://dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-trailing-project-path",
        setv("azure", "url", "https://dev.azure.com/acme/project"),
        "azure.url",
        'must be the organisation URL, not a project or page; use "https://dev.azure.com/acme"',
    ),
    ConfigCase(
        "url-without-organisation",
        setv("azure", "url", "https://dev.azure.com/"),
        "azure.url",
        'is missing the organisation; use "https://dev.azure.com/ORG"',
    ),
    ConfigCase("count-0", setv("agents", "count", 0), "agents.count", COUNT_RULE + "0"),
    ConfigCase("count-minus-1", setv("agents", "count", -1), "agents.count", COUNT_RULE + "-1"),
    ConfigCase("count-10000", setv("agents", "count", 10000), "agents.count", COUNT_RULE + "10000"),
    ConfigCase(
        "count-two-as-text", setv("agents", "count", "two"), "agents.count", COUNT_RULE + '"two"'
    ),
    ConfigCase(
        "gpus-bad-policy",
        setv("agents", "gpus", "per_agent"),
        "agents.gpus",
        'must be one of "all", "none", "per-agent", "mig", a list of GPU ids like ["0", "1"] or { per_agent = ["0", "1"] }, got "per_agent"; did you mean "per-agent"?',
    ),
    ConfigCase(
        "gpu-index-beyond-host-gpus",
        combine(setv("agents", "gpus", "per-agent"), setv("agents", "count", 4)),
        "agents.count",
        'is 4 with gpus = "per-agent", but this host has 2 GPUs; lower count to 2 or use '
        'gpus = "all" or "none"',
        gpu_count=2,
    ),
    ConfigCase(
        "gpu-per-agent-on-a-host-without-gpus",
        setv("agents", "gpus", "per-agent"),
        "agents.count",
        'is 2 with gpus = "per-agent", but this host has 0 GPUs; use gpus = "all" or "none"',
        gpu_count=0,
    ),
    ConfigCase(
        "volume-host-path-missing",
        volumes({"host": "{tmp}/absent", "container": "/datasets/a"}),
        "agents.volumes[0].host",
        "{tmp}/absent does not exist on this host; give an existing directory",
    ),
    ConfigCase(
        "volume-host-path-is-a-file",
        volumes({"host": "{tmp}/afile", "container": "/datasets/a"}),
        "agents.volumes[0].host",
        "{tmp}/afile is not a directory; give an existing directory",
    ),
    ConfigCase(
        "volume-relative-container-path",
        volumes({"host": "{tmp}/data", "container": "datasets/a"}),
        "agents.volumes[0].container",
        'must be an absolute path (starting with /), got "datasets/a"',
    ),
    ConfigCase(
        "volume-duplicate-container-path",
        volumes(DATA, {"host": "{tmp}/data", "container": "/datasets/a/"}),
        "agents.volumes[1].container",
        "/datasets/a is already used by another volume",
    ),
    ConfigCase(
        "volume-system-container-path",
        volumes({"host": "{tmp}/data", "container": "/usr/lib"}),
        "agents.volumes[0].container",
        "/usr/lib is a system path in the container; use e.g. /datasets/NAME",
    ),
    ConfigCase(
        "volume-invalid-env-name",
        volumes({**DATA, "env": "1DATA-DIR"}),
        "agents.volumes[0].env",
        "must be a variable name (letters, digits and '_', not starting with a digit), "
        'got "1DATA-DIR"',
    ),
    ConfigCase(
        "volume-reserved-env-name",
        volumes({**DATA, "env": "AZP_TOKEN"}),
        "agents.volumes[0].env",
        '"AZP_TOKEN" is reserved (AZP_* variables belong to the agent); pick another, '
        'e.g. "DATA_DIR"',
    ),
    ConfigCase(
        "gpu-admission-unknown-word",
        setv("agents", "gpu_admission", "shared"),
        "agents.gpu_admission",
        'must be "exclusive", "off" or { foreign_memory_max = "8GiB", foreign_util_max = 20 }, '
        'got "shared"',
        in_memory=False,
    ),
    ConfigCase(
        "gpu-admission-size-without-unit",
        setv("agents", "gpu_admission", {"foreign_memory_max": "8 gigs"}),
        "agents.gpu_admission.foreign_memory_max",
        'must be a size with a unit in quotes, like "8GiB" or "512MiB" (units KiB, MiB, GiB, '
        'TiB, KB, MB, GB, TB), got "8 gigs"',
        in_memory=False,
    ),
    ConfigCase(
        "gpu-admission-util-over-100",
        setv("agents", "gpu_admission", {"foreign_util_max": 150}),
        "agents.gpu_admission.foreign_util_max",
        "must be a percentage from 0 to 100 (summed SM utilisation of the processes that are "
        "not ours), got 150",
        in_memory=False,
    ),
    ConfigCase(
        "gpu-hold-down-negative",
        setv("agents", "gpu_hold_down", -5),
        "agents.gpu_hold_down",
        "must be a number of seconds from 0 to 3600 (how long a GPU that flaps must stay free "
        "before its slot takes jobs again), got -5",
    ),
    ConfigCase(
        "standby-schedule-unknown-day",
        setv("agents", "standby_schedule", {"weekday": {"08:00": 1}}),
        "agents.standby_schedule.weekday",
        'unknown key; did you mean "weekdays"? allowed: time_zone, every_day, weekdays, weekend, '
        "monday, tuesday, wednesday, thursday, friday, saturday, sunday",
    ),
    ConfigCase(
        "standby-schedule-bad-time",
        setv("agents", "standby_schedule", {"weekdays": {"8am": 1}}),
        "agents.standby_schedule.weekdays",
        'has the time "8am"; write times as "HH:MM", 24-hour, from "00:00" to "23:59"',
    ),
    ConfigCase(
        "standby-schedule-count-over-the-lanes",
        setv("agents", "standby_schedule", {"weekdays": {"08:00": 9}}),
        "agents.standby_schedule.weekdays",
        "gives 9 standbys at 08:00; a count is a whole number from 0 to 7 (the deepest standby)",
    ),
    ConfigCase(
        "standby-schedule-over-auto-max",
        combine(
            setv("agents", "standby", "auto"),
            setv("agents", "standby_schedule", {"sunday": {"08:00": 5}}),
        ),
        "agents.standby_schedule.sunday",
        'gives 5 standbys, more than standby_max (3) allows with standby = "auto"; lower the '
        "count or raise standby_max",
    ),
    ConfigCase(
        "standby-schedule-bad-zone",
        setv("agents", "standby_schedule", {"time_zone": "CEST", "weekdays": {"08:00": 1}}),
        "agents.standby_schedule.time_zone",
        'is not a known time zone; use an IANA name such as "Europe/Berlin", "America/New_York" '
        'or "UTC"; got "CEST"',
    ),
    ConfigCase(
        "standby-schedule-no-times",
        setv("agents", "standby_schedule", {"time_zone": "UTC"}),
        "agents.standby_schedule",
        'has no times; give at least one day, e.g. weekdays = { "08:00" = 3, "19:00" = 1 }',
    ),
    ConfigCase(
        "unknown-key-with-suggestion",
        setv("agents", "cuont", 3),
        "agents.cuont",
        f'unknown key; did you mean "count"? allowed: {AGENTS_KEYS}',
        in_memory=False,
    ),
    ConfigCase(
        "unknown-section-with-suggestion",
        setv("agent", "count", 3),
        "agent",
        'unknown section; did you mean "agents"? allowed: [azure], [agents], [groups], [supervisor], '
        "[gpu], [history], [metrics], [docker], [keys], [fleet]",
        in_memory=False,
    ),
    ConfigCase(
        "pat-in-config-file",
        setv("azure", "pat", PAT),
        "azure.pat",
        "a PAT or password must not be in the config file: delete this line; " + PAT_ADVICE,
        in_memory=False,
    ),
    ConfigCase(
        "metrics-port-only",
        setv("metrics", "listen", "9464"),
        "metrics.listen",
        'must be HOST:PORT, e.g. "127.0.0.1:9464" (a port alone is not enough: say which '
        'address to listen on), got "9464"',
    ),
    ConfigCase(
        "metrics-remote-address-not-allowed",
        setv("metrics", "listen", "0.0.0.0:9464"),
        "metrics.listen",
        'is "0.0.0.0:9464", which other machines can reach, and /metrics has no '
        'authentication; use "127.0.0.1:9464" (with a reverse proxy or an ssh tunnel for '
        "remote scrapes), or add allow_remote = true to [metrics] if that is intended",
    ),
    ConfigCase(
        "image-uppercase",
        setv("agents", "image", "Registry/GPU-Agent:cuda12"),
        "agents.image",
        f'is not an image reference like "{IMAGE_EXAMPLE}"; repository names must be lowercase, '
        'got "Registry/GPU-Agent:cuda12"',
    ),
    ConfigCase(
        "image-digest-too-short",
        setv("agents", "image", "registry.example:5000/gpu-agent@sha256:0123abcd"),
        "agents.image",
        'has a malformed digest "sha256:0123abcd": ' + DIGEST_ADVICE,
    ),
    ConfigCase(
        "image-digest-not-sha256",
        setv("agents", "image", "gpu-agent:cuda12@md5:" + "ab" * 16),
        "agents.image",
        'has a malformed digest "md5:' + "ab" * 16 + '": ' + DIGEST_ADVICE,
    ),
    ConfigCase(
        "group-image-digest-uppercase",
        lambda doc, _tmp: doc.setdefault("groups", {}).update(
            {"train": {"count": 1, "image": "gpu-agent@sha256:" + "AB" * 32}}
        ),
        "groups.train.image",
        'has a malformed digest "sha256:' + "AB" * 24 + '…": ' + DIGEST_ADVICE,
        in_memory=False,
    ),
    ConfigCase(
        "keys-action-typo",
        setv("keys", "drian", "k"),
        "keys.drian",
        'is not an action of the console; did you mean "drain"? actions: quit, help, drain, '
        "drain_all, restart, restart_all, resume, resume_all, scale_up, scale_down, logs, "
        "history, pause, gpu_clear, reload, reset_overrides, stale, image_pull, open_host, "
        "reconnect, fleet_back",
    ),
    ConfigCase(
        "keys-reserved",
        setv("keys", "drain", "escape"),
        "keys.drain",
        'binds "escape", which the console keeps: it goes back and closes dialogs; choose '
        "another key",
    ),
    ConfigCase(
        "standby-floor-above-ceiling",
        combine(
            setv("agents", "standby", "auto"),
            setv("agents", "standby_min", 4),
            setv("agents", "standby_max", 2),
        ),
        "agents.standby_min",
        'is 4, above standby_max (2): "auto" keeps standby_min standbys while idle and at most '
        "standby_max; lower standby_min to 2 or raise standby_max",
    ),
]


def as_config(doc: dict[str, Any]) -> Config:
    """The document as an in-memory `Config`, wrong values and all (dataclasses do not check)."""
    agents = dict(doc["agents"])
    agents["volumes"] = tuple(VolumeConfig(**v) for v in agents.get("volumes", ()))
    metrics = MetricsConfig(**doc.get("metrics", {}))
    return Config(
        azure=AzureConfig(**doc["azure"]),
        agents=AgentsConfig(**agents),
        metrics=metrics,
        keys=dict(doc.get("keys", {})),
    )


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[c.id for c in CONFIG_CASES])
def test_bad_config_value(
    case: ConfigCase, tmp_path: Path, good_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = good_doc()
    case.patch(doc, tmp_path)
    problem = case.problem.replace("{tmp}", str(tmp_path))
    bad = tmp_path / "bad.toml"
    bad_bytes = write_toml(bad, doc)

    # 1. The library, as the console and the daemon read the file.
    with pytest.raises(ConfigError) as caught:
        load_config(bad, gpu_count=case.gpu_count)
    assert str(caught.value) == f"{bad}: {case.key}: {problem}"
    assert PAT not in str(caught.value), "a PAT-like value must never be echoed"
    assert [e.key for e in caught.value.errors] == [case.key]

    # 2. The command line: exit 4 and the same words, nothing on stdout, no traceback.
    if case.gpu_count is None:
        code = main(["--config", str(bad), "check-config"])
        out, err = capsys.readouterr()
        assert (code, out) == (exitcodes.CONFIG, "")
        assert err == f"gpuci-tui: {caught.value}\n"
    assert bad.read_bytes() == bad_bytes, "a failed check must not rewrite the file"

    # 3. Saving the same values over the good file is refused and changes nothing.
    if case.in_memory:
        config = as_config(doc)
        if case.gpu_count is None:
            with pytest.raises(ConfigError) as refused:
                save_config(config, good_dir)
            assert str(refused.value) == f"{case.key}: {problem}"
        else:
            assert [str(e) for e in validate_config(config, gpu_count=case.gpu_count)] == [
                f"{case.key}: {problem}"
            ]


def test_corrupt_toml_is_named_with_line_and_column(
    tmp_path: Path, good_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    text = '[azure\nurl = "https://dev.azure.com/acme"\n'
    write_toml(bad, text)
    expected = (
        f"{bad}: line 1, column 7: not valid TOML (Expected ']' at the end of a table "
        'declaration); fix that line, or move the file away and run "gpuci-tui setup" to '
        "write a new one"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert str(caught.value) == expected
    assert main(["--config", str(bad), "check-config"]) == exitcodes.CONFIG
    assert capsys.readouterr().err == f"gpuci-tui: {expected}\n"
    # Saving over a file the operator broke by hand is refused: their edits would be lost.
    with pytest.raises(ConfigError) as refused:
        save_config(load_config(good_dir), bad)
    assert str(refused.value) == (
        f"{bad}: exists but is not valid TOML, so it was not replaced (your edits would be "
        "lost); fix it or move it away, then save again"
    )
    assert bad.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "cfg"]


@pytest.mark.root
def test_unwritable_config_directory_keeps_the_old_file() -> None:
    """As a user who may read but not write the directory (root would write anyway)."""
    with shared_dir("gpuci-badcfg-") as directory:
        path = directory / "config.toml"
        save_good(path)
        path.chmod(0o644)
        before = Snapshot(directory)
        code = (
            "import dataclasses, sys\n"
            "from gpuci_tui.core.config.loader import load_config, save_config\n"
            f"path = __import__('pathlib').Path({str(path)!r})\n"
            "config = load_config(path)\n"
            "changed = dataclasses.replace(config, agents=dataclasses.replace(config.agents, "
            "count=3))\n"
            "try:\n"
            "    save_config(changed, path)\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n"
        )
        out = as_nobody(code, directory)
        before.assert_unchanged()
    assert out == (
        f"ConfigError {path}: cannot write in the directory {directory} (Permission denied, "
        "EACCES); check its permissions and the free space, or choose another file with --config"
    )
