"""Wizard steps 1–3: organisation URL, PAT (checked, then stored safely), agent pool."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from textual import on
from textual.widget import Widget
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.protocols import PatCheck
from gpuci_tui.screens.keyring_help import KeyringOptions, PassphraseScreen, write_pat_file
from gpuci_tui.screens.wizard_base import Step, config_problem
from gpuci_tui.screens.wizard_identity import IdentityChoice, check_identity
from gpuci_tui.ui_messages import TokenStoreChosen


def pat_problem(check: PatCheck, url: str, pool: str | None = None) -> str:
    """The operator's words for a failed `PatCheck` (reason first, server detail after)."""
    headline = {
        "bad_pat": "Azure DevOps rejected this PAT: it is wrong, expired or revoked. "
        "Create a new one and paste it again.",
        "no_scope": "This PAT works but lacks the Agent Pools (Read & manage) scope. "
        "Edit the token in Azure DevOps, add that scope, and try again.",
        "unreachable": f"Could not reach {url}. Check the URL (Back) and this host's network "
        "or proxy.",
        "rate_limited": "Azure DevOps is rate limiting this PAT right now. Wait a moment, then "
        "press Next again.",
        "pool_not_found": f"There is no agent pool named '{pool}' in this organisation. Pick one "
        "from the list, or create it under Organization settings → Agent pools.",
        "pool_ambiguous": f"More than one agent pool is named '{pool}'; rename one in "
        "Organization settings → Agent pools.",
    }.get(check.reason, "Azure DevOps answered with an error.")
    return f"{headline}\n{check.message}" if check.message else headline


class UrlStep(Step):
    """Step 1: the organisation URL (https; http only for this machine)."""

    TITLE = "Step 1 of 7 · Azure DevOps organisation"
    HINT = (
        "The URL of your organisation, e.g. https://dev.azure.com/contoso. "
        "http:// is accepted only for a server on this machine (the simulator)."
    )

    def fields(self) -> Iterable[Widget]:
        """The URL field."""
        config = self.services.config
        value = config.azure.url if config is not None else ""
        yield Input(value=value, placeholder="https://dev.azure.com/ORG", id="url")

    async def validate(self) -> str | None:
        """Normalise the URL with the config rules."""
        from gpuci_tui.core.config.loader import ConfigError, validate_org_url

        field = self.query_one("#url", Input)
        try:
            url = validate_org_url(field.value)
        except ConfigError as exc:
            return config_problem("The organisation URL", exc)
        if url != self.draft.url:
            self.draft.pat = ""  # a PAT checked against another organisation proves nothing
        self.draft.url = url
        field.value = url
        return None


class PatStep(Step):
    """Step 2: the PAT, checked against the organisation, then kept safely."""

    TITLE = "Step 2 of 7 · Personal access token (PAT)"
    HINT = (
        "Create a PAT under User settings → Personal access tokens with only the scope "
        "Agent Pools (Read & manage). It is checked now and stored in the OS keyring, never "
        "in the configuration file."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Create the step."""
        super().__init__(*args, **kwargs)
        self.existing = "none"
        self.pat_file_written = False

    def fields(self) -> Iterable[Widget]:
        """Where the PAT goes, the password field, the keyring way-outs."""
        yield Static("", id="pat-store", classes="hint", markup=False)
        yield Input(password=True, placeholder="paste the PAT (hidden)", id="pat")
        config = self.services.config
        # Below the PAT field, which keeps the focus: the PAT path stays as it was.
        yield IdentityChoice(config.azure if config is not None else None, id="identity")
        yield KeyringOptions(id="keyring-options")

    @property
    def options(self) -> KeyringOptions:
        """The keyring way-outs panel."""
        return self.query_one("#keyring-options", KeyringOptions)

    def entered(self) -> None:
        """Focus the field and find out where the PAT can live."""
        super().entered()
        self.run_worker(self._inspect(), group="pat-inspect", exclusive=True, exit_on_error=False)

    def _diagnose(self) -> Any:
        diagnose = self.services.keyring_diagnose
        if diagnose is None:
            from gpuci_tui.core.secrets.token_store import diagnose_keyring

            diagnose = diagnose_keyring
        return diagnose()

    async def _inspect(self) -> None:
        store = self.services.token_store
        url = self.draft.url
        if store is not None:
            try:
                self.existing = await self.wizard.in_thread(lambda: store.source_of_token(url))
            except Exception:  # noqa: BLE001 - an unusable keyring is diagnosed below
                self.existing = "none"
        where = self.query_one("#pat-store", Static)
        if self.existing == "file":
            where.update("A PAT file is set (GPUCI_PAT_FILE) and wins over the keyring: leave the "
                         "field empty to check that PAT.")  # fmt: skip
        elif self.existing == "env":
            where.update("GPUCI_PAT is set and wins over the keyring: leave the field empty to "
                         "check that PAT.")  # fmt: skip
        elif self.existing == "keyring":
            where.update("A PAT is already stored for this organisation: leave the field empty "
                         "to keep it (it is checked again), or paste a new one.")  # fmt: skip
        if self.pat_file_written or self.existing in ("file", "env"):
            return
        status = await self.wizard.in_thread(self._diagnose)
        if getattr(status, "usable", False):
            where.update(
                f"{where.content}\nThe PAT will be stored in: {status.backend_name}.".strip()
            )
        else:
            self.options.explain(
                f"The keyring cannot store the PAT here. {status.message} {status.advice}"
            )

    async def validate(self) -> str | None:
        """Check the PAT with Azure DevOps, then store it (or sign in as the identity)."""
        choice = self.query_one("#identity", IdentityChoice)
        self.draft.identity, self.draft.credential = {}, None
        if choice.method != "pat":
            return await check_identity(self, choice)
        url = self.draft.url
        pat = self.query_one("#pat", Input).value.strip()
        store = self.services.token_store
        if self.pat_file_written and not pat:
            return None
        if not pat:
            if self.existing == "none" or store is None:
                return "Paste the PAT (what you type stays hidden)."
            try:
                pat = await self.wizard.in_thread(lambda: store.get_token(url))
            except GpuciError as exc:
                return f"The PAT already configured cannot be read: {exc}"
        if self.services.azure_factory is None:
            return "This console was started without an Azure DevOps client; run gpuci-tui setup."
        self.say(f"Checking the PAT with {url}…", "busy")
        client = self.services.azure_factory(url, pat)
        check = await self.wizard.in_thread(lambda: client.validate_pat(None))
        if not check.ok:
            return pat_problem(check, url)
        self.draft.pat, self.draft.user = pat, check.user
        typed = bool(self.query_one("#pat", Input).value.strip())
        if not typed and self.existing in ("file", "env", "keyring"):
            source = {"file": "the file GPUCI_PAT_FILE names", "env": "GPUCI_PAT"}
            self.draft.pat_note = f"kept in {source.get(self.existing, 'the keyring')}"
            return None
        if self.pat_file_written:
            return None
        if store is None:
            return "This console was started without a token store; run gpuci-tui setup."
        try:
            await self.wizard.in_thread(lambda: store.set_token(url, pat))
        except GpuciError as exc:
            self.options.explain(f"The PAT is valid, but it cannot be stored: {exc}")
            return "The PAT is valid. Pick where to keep it (the choices above), then press Next again."
        self.draft.pat_note = self.draft.pat_note or "stored in the OS keyring"
        self.options.display = False
        return None

    # ------------------------------------------------------------------ the way-outs

    @on(Button.Pressed, "#use-cryptfile")
    def _use_cryptfile(self) -> None:
        self._ask_passphrase("")

    def _ask_passphrase(self, error: str) -> None:
        from gpuci_tui.core.config import paths

        store = paths.cryptfile_path()

        def answered(passphrase: str | None) -> None:
            if passphrase:
                self.run_worker(
                    self._open_cryptfile(passphrase), group="cryptfile", exit_on_error=False
                )

        screen = PassphraseScreen(store=store, creating=not store.exists(), error=error)
        self.app.push_screen(screen, answered)

    async def _open_cryptfile(self, passphrase: str) -> None:
        opener = self.services.open_cryptfile
        factory = self.services.token_store_factory
        if opener is None or factory is None:
            from gpuci_tui.core.secrets import token_store as secrets

            opener = opener or secrets.open_cryptfile
            factory = factory or (lambda backend: secrets.TokenStore(backend=backend))
        open_store = opener
        try:
            backend = await self.wizard.in_thread(lambda: open_store(passphrase))
        except GpuciError as exc:
            self._ask_passphrase(str(exc))
            return
        # Services are frozen: the wizard takes a new one, and hands the store to the App.
        store = factory(backend)
        self.wizard.services = replace(self.services, token_store=store)
        self.post_message(TokenStoreChosen(store))
        self.existing = "none"
        self.draft.pat_note = "stored in the encrypted file store (asks for its passphrase)"
        self.options.display = False
        self.say(
            "The encrypted store is unlocked: press Next to check and store the PAT there.", "ok"
        )

    @on(Button.Pressed, "#use-pat-file")
    def _use_pat_file(self) -> None:
        if not self.draft.pat:
            self.say(
                "Paste the PAT and press Next first: it is checked before it is written anywhere."
            )
            return
        self.run_worker(self._write_pat_file(), group="pat-file", exit_on_error=False)

    async def _write_pat_file(self) -> None:
        path = self.services.config_path.parent / "pat"
        pat = self.draft.pat
        try:
            await self.wizard.in_thread(lambda: write_pat_file(path, pat))
        except OSError as exc:
            self.say(f"Could not write {path}: {exc.strerror or exc}. Choose another way.")
            return
        # The supervisor started when the wizard ends reads GPUCI_PAT_FILE from
        # this process's environment; a systemd unit must set it itself.
        os.environ["GPUCI_PAT_FILE"] = str(path)
        self.pat_file_written = True
        self.draft.pat_note = f"in {path} (GPUCI_PAT_FILE, readable only by you)"
        self.options.display = False
        self.say(
            f"Wrote the PAT to {path} (mode 0600). This session uses it now; for a systemd "
            f"service set Environment=GPUCI_PAT_FILE={path}. Press Next.",
            "ok",
        )


class PoolStep(Step):
    """Step 3: the agent pool, from the organisation's list or typed."""

    TITLE = "Step 3 of 7 · Agent pool"
    HINT = "The self-hosted agent pool the agents join. Pick one, or type its name."

    def fields(self) -> Iterable[Widget]:
        """The pool list and the name field."""
        yield OptionList(id="pool-list")
        config = self.services.config
        yield Input(
            value=config.azure.pool if config else "", placeholder="pool name", id="pool-name"
        )

    def entered(self) -> None:
        """Load the pools (in a thread) and focus the name field."""
        self.query_one("#pool-name", Input).focus()
        self.run_worker(self._load(), group="pools", exclusive=True, exit_on_error=False)

    async def _load(self) -> None:
        pools_list = self.query_one("#pool-list", OptionList)
        self.say("Loading the organisation's agent pools…", "busy")
        try:
            client = self.wizard.client()
            pools = await self.wizard.in_thread(lambda: list(client.list_pools()))
        except Exception as exc:  # noqa: BLE001 - the name can still be typed
            pools_list.display = False
            self.say(f"Could not list the pools ({exc}); type the pool name.", "info")
            return
        own = [p for p in pools if not p.is_hosted]
        self.draft.pools = own
        pools_list.clear_options()
        for pool in own:
            size = "? agents" if pool.size is None else f"{pool.size} agent{'s' * (pool.size != 1)}"
            pools_list.add_option(Option(f"{pool.name}  ({size})", id=pool.name))
        pools_list.display = bool(own)
        if own:  # start the list at the typed (or configured) pool
            typed = self.query_one("#pool-name", Input).value.strip()
            names = [p.name for p in own]
            pools_list.highlighted = names.index(typed) if typed in names else 0
        self.say(
            "" if own else "This organisation has no self-hosted pool yet: type a name.", "info"
        )

    @on(OptionList.OptionHighlighted, "#pool-list")
    @on(OptionList.OptionSelected, "#pool-list")
    def _picked(self, event: OptionList.OptionHighlighted | OptionList.OptionSelected) -> None:
        # Highlighting moves only with the operator in the list (not when it fills).
        if not event.option_list.has_focus:
            return
        if event.option.id:
            self.query_one("#pool-name", Input).value = event.option.id
        if isinstance(event, OptionList.OptionSelected):
            self.wizard.go_next()

    async def validate(self) -> str | None:
        """The name must be valid and the PAT must reach that pool."""
        from gpuci_tui.core.config.loader import ConfigError
        from gpuci_tui.core.config.validate import validate_pool

        try:
            name = validate_pool(self.query_one("#pool-name", Input).value)
        except ConfigError as exc:
            return config_problem("The pool name", exc)
        self.say(f"Checking access to the pool '{name}'…", "busy")
        client = self.wizard.client()
        check = await self.wizard.in_thread(lambda: client.validate_pat(name))
        if not check.ok:
            return pat_problem(check, self.draft.url, name)
        self.draft.pool = check.pool.name if check.pool is not None else name
        return None
