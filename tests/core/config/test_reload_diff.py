"""The reload's diff: what a re-read file changes, what applies live, what needs a restart."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import Config, agent_groups, load_config
from gpuci_tui.core.config.reload_diff import diff_configs, reload_effect

ONE = """
[azure]
url = "https://dev.azure.com/org"
pool = "gpu"

[agents]
count = 2
image = "repo/agent:v1"
name_prefix = "box"
"""

GROUPS = """
[azure]
url = "https://dev.azure.com/org"
pool = "gpu"

[agents]
image = "repo/agent:v1"
name_prefix = "box"

[groups.a]
count = 2
gpus = ["0"]

[groups.b]
pool = "gpu-b"
count = 1
gpus = ["1"]
"""


def load(tmp_path: Path, text: str, name: str = "config.toml") -> Config:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


# (edit of the one-group file, key, live?, words in the line)
ONE_GROUP = [
    (('image = "repo/agent:v1"', 'image = "repo/agent:v2"'), "agents.image", True, "one by one"),
    (("count = 2", "count = 5"), "agents.count", True, "scales"),
    (('name_prefix = "box"', 'name_prefix = "cart"'), "agents.name_prefix", False, "named"),
    (('pool = "gpu"', 'pool = "gpu2"'), "azure.pool", False, "registered in that pool"),
    (
        ("org", "other"),
        "azure.url",
        False,
        "a restart is needed (the daemon's agents are registered in that organisation",
    ),
    (('name_prefix = "box"', 'name_prefix = "box"\nmem_limit = "8g"'), "agents.mem_limit", True,
     "(unset) -> \"8g\""),
    (('name_prefix = "box"', 'name_prefix = "box"\nstandby = false'), "agents.standby", False,
     "second registration"),
    (('name_prefix = "box"', 'name_prefix = "box"\ngpu_hold_down = 30.0'), "agents.gpu_hold_down",
     True, "next GPU sample"),
    (('name_prefix = "box"', 'name_prefix = "box"\n\n[agents.standby_schedule]\n'
      'time_zone = "Europe/Berlin"\nweekdays = { "08:00" = 3, "19:00" = 1 }\n'
      'saturday = { "00:00" = 0 }'), "agents.standby_schedule", True,
     '(unset) -> "[Europe/Berlin: mon-fri 08:00=3 19:00=1, sat 00:00=0]": applies now'),
    (('name_prefix = "box"', 'name_prefix = "box"\n\n[metrics]\nlisten = "127.0.0.1:9464"'),
     "metrics.listen", False, "bound when the daemon starts"),
    (('name_prefix = "box"', 'name_prefix = "box"\n\n[supervisor]\ncanary_jobs = 5'),
     "supervisor.canary_jobs", True, "next reload --canary"),
    (('name_prefix = "box"', 'name_prefix = "box"\n\n[supervisor]\nbackoff_max = 90.0'),
     "supervisor.backoff_max", False, "engine's rules"),
    (('name_prefix = "box"', 'name_prefix = "box"\n\n[history]\nkeep_days = 7'),
     "history.keep_days", False, "history is opened"),
    (('pool = "gpu"', 'pool = "gpu"\nmax_requests_per_minute = 60'),
     "azure.max_requests_per_minute", True, "(unset) -> 60: applies now: the daemon's calls"),
    # A reload that changed these raised KeyError before the configuration reference
    # asked every key what reload does with it.
    (('name_prefix = "box"', 'name_prefix = "box"\npull = "always"'), "agents.pull", True,
     "next agent start"),
    (('name_prefix = "box"', 'name_prefix = "box"\npull_check_interval = 60.0'),
     "agents.pull_check_interval", True, "next agent start"),
    # Reload compared three [azure] keys and answered "nothing to change" for the others.
    (('pool = "gpu"', 'pool = "gpu"\npat_expires = "2027-03-01"'), "azure.pat_expires", False,
     '"" -> "2027-03-01": a restart is needed (how the daemon signs in'),
    (('pool = "gpu"', 'pool = "gpu"\nremove_offline_after = "7d"'), "azure.remove_offline_after",
     False, "a restart is needed (the stale watch takes it when the daemon starts)"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "key", "live", "words"), ONE_GROUP)
def test_one_group_field_by_field(
    tmp_path: Path, change: tuple[str, str], key: str, live: bool, words: str
) -> None:
    old = load(tmp_path, ONE)
    new = load(tmp_path, edit(ONE, *change), "new.toml")
    diff = diff_configs(old, new)
    found = [c for g in diff.groups for c in g.changes] + list(diff.other)
    assert [c.key for c in found] == [key]
    assert found[0].live is live
    assert words in found[0].words()
    assert diff.changed
    assert (found[0] in diff.restart_needed) is not live


@pytest.mark.parametrize(("change", "key", "live", "words"), ONE_GROUP)
def test_reload_effect_says_what_the_diff_does(
    tmp_path: Path, change: tuple[str, str], key: str, live: bool, words: str
) -> None:
    """The reference's reload column (`reload_effect`) answers as a real reload does."""
    found = diff_configs(load(tmp_path, ONE), load(tmp_path, edit(ONE, *change), "new.toml"))
    change_seen = [*(c for g in found.groups for c in g.changes), *found.other][0]
    assert reload_effect(key) == (change_seen.live, change_seen.why)
    group_key = key.replace("agents.", "groups.gpu.", 1)
    if key.startswith("agents."):
        assert reload_effect(group_key) == reload_effect(key)


def test_a_new_sign_in_is_named_key_by_key_and_left_for_a_restart(tmp_path: Path) -> None:
    old = load(tmp_path, ONE)
    principal = (
        'pool = "gpu"\nauth = "service-principal"\n'
        'tenant_id = "contoso.onmicrosoft.com"\nclient_id = "11111111-2222-3333-4444-555555555555"'
    )
    diff = diff_configs(old, load(tmp_path, edit(ONE, 'pool = "gpu"', principal), "new.toml"))
    assert [c.key for c in diff.restart_needed] == [
        "azure.auth",
        "azure.tenant_id",
        "azure.client_id",
    ]
    assert diff.applied.azure == old.azure  # the daemon runs on as it signed in
    assert "nothing to change" not in " ".join(diff.lines())


def test_reload_effect_of_an_unknown_key_is_an_error() -> None:
    with pytest.raises(KeyError):
        reload_effect("agents.imagee")


def test_applied_takes_only_what_changed_live(tmp_path: Path) -> None:
    old = load(tmp_path, ONE)
    text = edit(ONE, 'image = "repo/agent:v1"', 'image = "repo/agent:v2"')
    text = edit(text, 'name_prefix = "box"', 'name_prefix = "cart"')
    text = edit(text, "org", "other")
    diff = diff_configs(old, load(tmp_path, text, "new.toml"))
    assert diff.applied.agents.image == "repo/agent:v2"  # live
    assert diff.applied.agents.name_prefix == "box"  # restart: as it runs
    assert diff.applied.azure.url == old.azure.url
    assert len(diff.restart_needed) == 2


def test_a_new_request_cap_is_applied_live(tmp_path: Path) -> None:
    old = load(tmp_path, ONE)
    new = load(
        tmp_path, edit(ONE, 'pool = "gpu"', 'pool = "gpu"\nmax_requests_per_minute = 60'), "n"
    )
    assert diff_configs(old, new).applied.azure.max_requests_per_minute == 60
    assert diff_configs(new, old).applied.azure.max_requests_per_minute is None


def test_no_change(tmp_path: Path) -> None:
    old = load(tmp_path, ONE)
    diff = diff_configs(old, load(tmp_path, ONE, "same.toml"))
    assert not diff.changed
    assert diff.lines() == ("the configuration file has no change",)
    assert diff.applied == replace(old, path=diff.applied.path)


def test_groups_kept_added_removed(tmp_path: Path) -> None:
    old = load(tmp_path, GROUPS)
    text = edit(GROUPS, '[groups.b]\npool = "gpu-b"\ncount = 1\ngpus = ["1"]\n', "")
    text += '\n[groups.c]\ncount = 1\ngpus = ["2"]\nimage = "repo/agent:c"\n'
    text = edit(text, "[groups.a]\ncount = 2", "[groups.a]\ncount = 3")
    diff = diff_configs(old, load(tmp_path, text, "new.toml"))
    assert [(g.name, g.status) for g in diff.groups] == [
        ("a", "kept"),
        ("b", "removed"),
        ("c", "added"),
    ]
    assert [c.key for c in diff.groups[0].changes] == ["groups.a.count"]
    assert [g.name for g in agent_groups(diff.applied)] == ["a", "c"]
    assert diff.applied.groups[0].agents.count == 3
    lines = diff.lines()
    assert "group b: removed (its slots drain, no job is killed)" in lines
    assert "group c: added (its slots start)" in lines


@pytest.mark.parametrize(
    ("change", "key", "live"),
    [
        (('pool = "gpu-b"', 'pool = "gpu-c"'), "groups.b.pool", False),
        (('gpus = ["1"]', 'gpus = ["1", "2"]'), "groups.b.gpus", True),
        # An [agents] default reaches every group that does not set it.
        (('image = "repo/agent:v1"', 'image = "repo/agent:v2"'), "groups.a.image", True),
    ],
)
def test_group_fields(tmp_path: Path, change: tuple[str, str], key: str, live: bool) -> None:
    old = load(tmp_path, GROUPS)
    diff = diff_configs(old, load(tmp_path, edit(GROUPS, *change), "new.toml"))
    changes = [c for g in diff.groups for c in g.changes]
    assert changes[0].key == key
    assert changes[0].live is live
    if not live:
        assert diff.applied.groups[1].pool == "gpu-b"


def test_agents_alone_to_groups_is_a_restart(tmp_path: Path) -> None:
    old = load(tmp_path, ONE)
    diff = diff_configs(old, load(tmp_path, GROUPS, "new.toml"))
    assert diff.shape is not None and "a restart is needed" in diff.shape
    assert diff.groups == ()
    assert diff.applied.agents == old.agents and diff.applied.groups == ()
