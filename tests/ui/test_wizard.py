"""The setup wizard, steps 1–3 (URL, PAT and its storage, pool) and navigation."""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.protocols import PatCheck, Pool
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.keyring_help import KeyringOptions, PassphraseScreen
from gpuci_tui.screens.wizard import WizardScreen
from tests.ui.fakes import (
    GOOD_PAT,
    FakeAzure,
    FakeTokenStore,
)
from tests.ui.helpers import screen_text, text_of, wait_for
from tests.ui.scenarios import sample_config
from tests.ui.wizard_harness import ABSENT, URL, wizard

# --------------------------------------------------------------------------- step 1: URL


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("", "The organisation URL is empty"),
        (
            "dev.azure.com/contoso",
            'The organisation URL must be a URL starting with https://, e.g. "https://dev.azure.com/contoso"',
        ),
        ("http://dev.azure.com/contoso", "The organisation URL must use https://"),
        (
            "https://dev.azure.com/contoso/project/_build",
            "The organisation URL must be the organisation URL, not a project",
        ),
    ],
)
async def test_url_step_rejects_with_a_plain_reason(
    tmp_path: Path, typed: str, expected: str
) -> None:
    async with wizard(tmp_path) as w:
        await w.fill("#url", typed)
        await w.next()
        assert w.wizard.index == 0
        assert w.message.startswith(expected), w.message


async def test_the_title_shows_a_long_config_path_whole_at_80_columns(tmp_path: Path) -> None:
    """The path that Save writes wraps under the title instead of vanishing (found in tmux)."""
    async with wizard(tmp_path, size=(80, 24)) as w:
        assert len(f"gpuci-tui setup  ●○○○○○○  writes {w.config_path}") > 80
        shown = "".join(screen_text(w.app).split())
        assert f"writes{w.config_path}" in shown, screen_text(w.app)


async def test_url_is_normalised_and_http_allowed_for_loopback(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.fill("#url", "https://Dev.Azure.com/contoso/")
        await w.pilot.press("enter")
        await w.at(1)
        assert w.wizard.draft.url == URL
        await w.pilot.press("escape")
        await w.at(0)
        assert w.field("#url").value == URL, "Back keeps what was entered"
        await w.fill("#url", "http://127.0.0.1:8080")
        await w.next()
        assert w.wizard.draft.url == "http://127.0.0.1:8080"


# --------------------------------------------------------------------------- step 2: PAT


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        (None, "Azure DevOps rejected this PAT: it is wrong, expired or revoked."),
        (
            PatCheck(False, "no_scope", "TF400813: not authorized"),
            "This PAT works but lacks the Agent Pools (Read & manage) scope.",
        ),
        (
            PatCheck(False, "unreachable", "connection refused"),
            f"Could not reach {URL}. Check the URL (Back)",
        ),
        (
            PatCheck(False, "rate_limited", "retry in 30 s"),
            "Azure DevOps is rate limiting this PAT right now.",
        ),
        (PatCheck(False, "error", "HTTP 500"), "Azure DevOps answered with an error.\nHTTP 500"),
    ],
)
async def test_pat_failures_are_explained(
    tmp_path: Path, check: PatCheck | None, expected: str
) -> None:
    azure = FakeAzure(checks={} if check is None else {"some-pat": check})
    async with wizard(tmp_path, azure=azure) as w:
        await w.through(1)
        await w.fill("#pat", "some-pat")
        await w.next()
        assert w.wizard.index == 1
        assert w.message.startswith(expected), w.message
        assert "some-pat" not in w.message
        assert w.tokens.tokens == {}, "a PAT that failed is never stored"


async def test_empty_pat_is_asked_for(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.through(1)
        await w.next()
        assert w.message == "Paste the PAT (what you type stays hidden)."
        assert w.field("#pat").password


async def test_good_pat_is_checked_in_the_background_then_stored(tmp_path: Path) -> None:
    gate = threading.Event()
    azure = FakeAzure(checks={GOOD_PAT: PatCheck(True, "ok", "", user="Jane Doe")}, gate=gate)
    async with wizard(tmp_path, azure=azure) as w:
        await w.through(1)
        await w.fill("#pat", GOOD_PAT)
        await w.pilot.press("enter")
        await wait_for(w.pilot, lambda: w.message == f"Checking the PAT with {URL}…")
        await w.pilot.press("tab")  # the screen still takes keys while the check runs
        gate.set()
        await w.at(2)
        assert azure.calls[0] == (URL, GOOD_PAT, None)
        assert w.tokens.tokens == {URL: GOOD_PAT}


async def test_an_already_stored_pat_can_be_kept(tmp_path: Path) -> None:
    tokens = FakeTokenStore()
    tokens.tokens[URL] = GOOD_PAT
    async with wizard(tmp_path, tokens=tokens) as w:
        await w.through(1)
        await wait_for(w.pilot, lambda: "already stored" in text_of(w.wizard, "#pat-store"))
        await w.next()
        await w.at(2)
        assert w.wizard.draft.pat_note == "kept in the keyring"


async def test_unusable_keyring_is_explained_before_typing(tmp_path: Path) -> None:
    async with wizard(tmp_path, keyring_diagnose=lambda: ABSENT) as w:
        await w.through(1)
        options = w.wizard.query_one(KeyringOptions)
        await wait_for(w.pilot, lambda: options.display, what="the keyring options")
        why = text_of(w.wizard, "#keyring-why")
        assert why.startswith(
            "The keyring cannot store the PAT here. No keyring backend is available"
        )
        await w.pilot.click("#show-recipe")
        assert "dbus-run-session" in text_of(w.wizard, "#keyring-recipe")


async def test_keyring_failure_offers_a_pat_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUCI_PAT_FILE", raising=False)
    broken = FakeTokenStore(broken="No keyring backend is available (no D-Bus session).")
    async with wizard(tmp_path, tokens=broken) as w:
        await w.through(1)
        await w.fill("#pat", GOOD_PAT)
        await w.next()
        assert w.wizard.index == 1
        assert (
            w.message
            == "The PAT is valid. Pick where to keep it (the choices above), then press Next again."
        )
        assert w.wizard.query_one(KeyringOptions).display
        await w.click_shown("#use-pat-file")
        pat_file = w.config_path.parent / "pat"
        await wait_for(
            w.pilot, lambda: w.message.startswith(f"Wrote the PAT to {pat_file} (mode 0600)")
        )
        assert pat_file.read_text() == GOOD_PAT + "\n"
        assert stat.S_IMODE(pat_file.stat().st_mode) == 0o600
        assert os.environ["GPUCI_PAT_FILE"] == str(pat_file)
        await w.next()
        await w.at(2)


async def test_keyring_failure_offers_the_encrypted_file_store(tmp_path: Path) -> None:
    broken = FakeTokenStore(broken="No keyring backend is available.")
    unlocked = FakeTokenStore()
    opened: list[str] = []

    def open_cryptfile(passphrase: str) -> object:
        opened.append(passphrase)
        if passphrase != "correct horse":
            raise GpuciError("Wrong passphrase for the encrypted PAT store.")
        return "backend"

    async with wizard(
        tmp_path,
        tokens=broken,
        open_cryptfile=open_cryptfile,
        token_store_factory=lambda backend: unlocked,
    ) as w:
        await w.through(1)
        await w.fill("#pat", GOOD_PAT)
        await w.next()
        await w.click_shown("#use-cryptfile")
        await wait_for(w.pilot, lambda: isinstance(w.app.screen, PassphraseScreen))
        dialog = w.app.screen
        assert isinstance(dialog, PassphraseScreen) and dialog.creating
        await w.pilot.press(*"abc", "enter", *"abd", "enter")
        assert (
            text_of(dialog, "#passphrase-error") == "The two passphrases differ; type them again."
        )
        dialog.query_one("#passphrase", Input).value = "wrong"
        dialog.query_one("#passphrase2", Input).value = "wrong"
        await w.pilot.click("#unlock")
        await wait_for(
            w.pilot,
            lambda: isinstance(w.app.screen, PassphraseScreen) and w.app.screen is not dialog,
        )
        retry = w.app.screen
        assert (
            text_of(retry, "#passphrase-error") == "Wrong passphrase for the encrypted PAT store."
        )
        retry.query_one("#passphrase", Input).value = "correct horse"
        retry.query_one("#passphrase2", Input).value = "correct horse"
        await w.pilot.click("#unlock")
        await wait_for(w.pilot, lambda: w.message.startswith("The encrypted store is unlocked"))
        assert opened == ["wrong", "correct horse"]
        await w.next()
        await w.at(2)
        assert unlocked.tokens == {URL: GOOD_PAT}
        assert w.app.services.token_store is unlocked


# --------------------------------------------------------------------------- step 3: pool


async def test_pool_list_hides_hosted_pools_and_picks_with_the_keyboard(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.through(2)
        listing = w.wizard.query_one("#pool-list", OptionList)
        await wait_for(w.pilot, lambda: listing.option_count == 2)
        assert [str(listing.get_option_at_index(i).prompt) for i in range(2)] == [
            "gpu-a100  (6 agents)",
            "Default  (1 agent)",
        ]
        listing.focus()
        await w.pilot.press("down", "enter")
        await w.at(3)
        assert w.wizard.draft.pool == "Default"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("", "The pool name is empty"),
        ("nope", "There is no agent pool named 'nope' in this organisation."),
    ],
)
async def test_pool_problems(tmp_path: Path, typed: str, expected: str) -> None:
    async with wizard(tmp_path) as w:
        await w.through(2)
        await w.fill("#pool-name", typed)
        await w.next()
        assert w.wizard.index == 2
        assert w.message.startswith(expected), w.message


async def test_pools_that_cannot_be_listed_can_be_typed(tmp_path: Path) -> None:
    class NoList(FakeAzure):
        def factory(self, org_url: str, pat: str) -> Any:
            client = super().factory(org_url, pat)

            def fail() -> list[Pool]:
                raise GpuciError("HTTP 403 on _apis/distributedtask/pools")

            client.list_pools = fail  # type: ignore[method-assign]
            return client

    azure = NoList(checks={GOOD_PAT: PatCheck(True, "ok", "")})
    async with wizard(tmp_path, azure=azure) as w:
        await w.through(2)
        await wait_for(w.pilot, lambda: w.message.startswith("Could not list the pools"))
        assert (
            w.message
            == "Could not list the pools (HTTP 403 on _apis/distributedtask/pools); type the pool name."
        )
        await w.fill("#pool-name", "gpu-a100")
        await w.next()
        await w.at(3)


# --------------------------------------------------------------------------- navigation


async def test_back_on_the_first_step_offers_to_leave(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.pilot.press("escape")
        await wait_for(w.pilot, lambda: isinstance(w.app.screen, ConfirmScreen))
        dialog = w.app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert "Nothing has been saved" in dialog.prompt.body
        await w.pilot.press("n")
        await wait_for(w.pilot, lambda: isinstance(w.app.screen, WizardScreen))
        await w.pilot.press("escape", "y")
        await w.pilot.pause(0.1)
    assert w.app.return_value is None
    assert not w.config_path.exists()


async def test_back_during_a_check_discards_its_result(tmp_path: Path) -> None:
    gate = threading.Event()
    azure = FakeAzure(checks={GOOD_PAT: PatCheck(True, "ok", "")}, gate=gate)
    async with wizard(tmp_path, azure=azure) as w:
        await w.through(1)
        await w.fill("#pat", GOOD_PAT)
        await w.pilot.press("enter")
        await wait_for(w.pilot, lambda: w.message.startswith("Checking the PAT"))
        await w.pilot.press("escape")
        await w.at(0)
        gate.set()
        await w.pilot.pause(0.2)
        assert w.wizard.index == 0, "a stale check must not move the wizard"


async def test_setup_on_an_existing_config_starts_from_its_values(tmp_path: Path) -> None:
    config = replace(
        sample_config(), agents=replace(sample_config().agents, count=3, gpus="per-agent")
    )
    async with wizard(tmp_path, config=config, force_setup=True) as w:
        assert w.field("#url").value == URL
        await w.through(4)
        assert w.field("#count").value == "3"
        assert w.field("#prefix").value == "gpuhost"
