"""The setup wizard: seven steps, each checked before Next, Back always possible.

Shown when there is no configuration (or for ``gpuci-tui setup``). It ends by
saving the configuration atomically and posting `SetupSaved`; the App then
switches to the dashboard and starts the supervisor. Nothing is written before
the review step except the PAT (keyring, encrypted store or PAT file), which is
stored only after Azure DevOps accepted it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from textual import on
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, ContentSwitcher, Footer, Input, Static
from textual.worker import WorkerFailed

from gpuci_tui.screens.wizard_agents import AgentsStep, ImageStep, VolumesStep
from gpuci_tui.screens.wizard_azure import PatStep, PoolStep, UrlStep
from gpuci_tui.screens.wizard_base import DraftGroup, Step, WizardDraft
from gpuci_tui.services import Services, SetupClient
from gpuci_tui.ui_messages import SetupSaved

T = TypeVar("T")


class ReviewStep(Step):
    """Step 7: everything at a glance; Save writes the file (the App starts the supervisor)."""

    TITLE = "Step 7 of 7 · Review and save"

    def fields(self) -> Iterable[Widget]:
        """The summary, where it is saved, and a way to add another agent group."""
        yield Static("", id="review", markup=False)
        yield Static("", id="review-path", classes="hint", markup=False)
        yield Button("Add another agent group…", id="add-group")

    def entered(self) -> None:
        """Render the summary of the draft; Enter saves."""
        draft = self.draft
        # Slots count from 0 (docs/config-file.md: slot 0 is {name_prefix}-0): name the agents that will run.
        last = f" … {draft.name_prefix}-{draft.count - 1}" if draft.count > 1 else ""
        volumes = [
            f"{v.host} → {v.container}" + (f" (${v.env})" if v.env else "") for v in draft.volumes
        ]
        who = f" for {draft.user}" if draft.user else ""
        lines = [
            f"Organisation  {draft.url}",
            f"PAT           valid{who}; {draft.pat_note}"
            if not draft.identity
            else f"Sign-in       {draft.pat_note}",
            *(group_lines(group) for group in draft.groups),
            *([f"Group         {draft.group_name}"] if draft.groups else []),
            f"Pool          {draft.pool}",
            f"Image         {draft.image}",
            *(f"              ! {warning}" for warning in draft.image_warnings),
            f"Agents        {draft.count} ({draft.name_prefix}-0{last}), GPUs: "
            f"{gpu_text(draft.gpu_policy, draft.gpu_ids, draft.gpus_per_slot)}, "
            f"network: {draft.network}",
            f"Volumes       {volumes[0] if volumes else 'none'}",
            *(f"              {v}" for v in volumes[1:]),
        ]
        self.query_one("#review", Static).update("\n".join(lines))
        self.query_one("#review-path", Static).update(
            f"Save writes {self.services.config_path} (readable only by you; the PAT is not in "
            "it) and starts the supervisor."
        )
        self.screen.query_one("#wizard-next", Button).focus()

    def add_group(self) -> None:
        """Keep the group set up so far and walk through pool, image, agents for another."""
        draft = self.draft
        draft.groups.append(draft.current_group())
        if len(draft.groups) == 1:
            # The first group shares [agents]' name prefix; a second one gets its own.
            draft.name_prefix = f"{draft.name_prefix}-g2"
        draft.group_name = f"group{len(draft.groups) + 1}"
        draft.gpu_ids = []
        self.wizard.show_step(PoolStep)

    def build(self) -> Any:
        """The `Config` the draft describes (settings the wizard does not ask about are kept)."""
        from gpuci_tui.core.config.loader import AgentsConfig, Config
        from gpuci_tui.core.config.model import AgentGroup
        from gpuci_tui.screens.wizard_identity import azure_of

        draft = self.draft
        base = self.services.config
        base_agents = base.agents if base is not None else AgentsConfig(0, "", "")

        def agents_of(group: DraftGroup) -> AgentsConfig:
            return replace(
                base_agents,
                count=group.count,
                image=group.image,
                name_prefix=group.name_prefix,
                network=group.network,
                gpus=group.gpu_policy,
                gpu_ids=group.gpu_ids,
                gpus_per_slot=group.gpus_per_slot,
                volumes=group.volumes,
            )

        groups = draft.all_groups()
        agents = agents_of(groups[0])
        azure = azure_of(draft.url, groups[0].pool, draft.identity, base and base.azure)
        made = (
            tuple(AgentGroup(g.name, g.pool, agents_of(g)) for g in groups) if draft.groups else ()
        )
        if base is not None:
            return replace(
                base, azure=azure, agents=agents, groups=made, path=self.services.config_path
            )
        return Config(azure=azure, agents=agents, groups=made, path=self.services.config_path)

    async def validate(self) -> str | None:
        """Write the file atomically (mode 0600)."""
        from gpuci_tui.core.config.loader import ConfigError, save_config

        config = self.build()
        path: Path = self.services.config_path
        self.say(f"Saving {path}…", "busy")
        try:
            await self.wizard.in_thread(lambda: save_config(config, path))
        except ConfigError as exc:
            return f"The configuration was not saved: {exc}"
        self.saved = config
        return None

    saved: Any = None
    """The `Config` written by `validate` (None until saved)."""


def gpu_text(policy: str, ids: Iterable[str], per_slot: int = 1) -> str:
    """``per-agent over 2,3`` (``, 2 per agent`` with ``gpus_per_slot``) for the review."""
    listed = ",".join(ids)
    text = f"{policy} over {listed}" if listed and policy != "list" else listed or policy
    return f"{text}, {per_slot} per agent" if per_slot > 1 else text


def group_lines(group: DraftGroup) -> str:
    """One finished group of the draft, for the review."""
    return (
        f"Group         {group.name}: pool {group.pool}, {group.count} × {group.image}, "
        f"{group.name_prefix}-N, GPUs: "
        f"{gpu_text(group.gpu_policy, group.gpu_ids, group.gpus_per_slot)}"
    )


class WizardScreen(Screen[None]):
    """The setup wizard (the App's first screen when there is no configuration)."""

    BINDINGS = [
        Binding("ctrl+n", "next", "Next", id="wizard.next", tooltip="Check this step and go on"),
        Binding(
            "escape", "back", "Back", id="wizard.back", tooltip="Previous step (nothing is lost)"
        ),
    ]

    def __init__(self, services: Services) -> None:
        """Create the wizard."""
        super().__init__(id="wizard")
        self.services = services
        self.draft = WizardDraft()
        self.steps: list[Step] = [
            UrlStep(self, id="step-url"),
            PatStep(self, id="step-pat"),
            PoolStep(self, id="step-pool"),
            ImageStep(self, id="step-image"),
            AgentsStep(self, id="step-agents"),
            VolumesStep(self, id="step-volumes"),
            ReviewStep(self, id="step-review"),
        ]
        self.index = 0
        self._generation = 0

    def compose(self) -> Iterable[Widget]:
        """Title, the steps (one visible), Back/Next, footer."""
        yield Static("", id="wizard-title", markup=False)
        with ContentSwitcher(initial=self.steps[0].id, id="wizard-steps"):
            yield from self.steps
        with Horizontal(id="wizard-nav"):
            yield Button("Back", id="wizard-back")
            yield Button("Next", id="wizard-next", variant="primary")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        """Show step 1."""
        self._show(0)

    @property
    def step(self) -> Step:
        """The step on screen."""
        return self.steps[self.index]

    def show_step(self, kind: type[Step]) -> None:
        """Go to the step of class ``kind`` (e.g. back to the pool for another group)."""
        self._generation += 1
        self.step.say("", "info")
        self._show(next(i for i, step in enumerate(self.steps) if isinstance(step, kind)))

    def _show(self, index: int) -> None:
        self.index = index
        step = self.steps[index]
        self.query_one(ContentSwitcher).current = step.id
        dots = "".join("●" if i <= index else "○" for i in range(len(self.steps)))
        self.query_one("#wizard-title", Static).update(
            f"gpuci-tui setup  {dots}  writes {self.services.config_path}"
        )
        self.query_one("#wizard-back", Button).disabled = index == 0
        last = index == len(self.steps) - 1
        self.query_one("#wizard-next", Button).label = "Save and start" if last else "Next"
        step.entered()

    # ------------------------------------------------------------------ services for steps

    async def in_thread(self, call: Callable[[], T]) -> T:
        """Run the blocking ``call`` in a thread worker and return its result or raise its error."""
        worker = self.run_worker(call, thread=True, group="wizard-io", exit_on_error=False)
        try:
            return await worker.wait()
        except WorkerFailed as failed:
            raise failed.error from None

    def client(self) -> SetupClient:
        """An Azure DevOps client for the URL and PAT entered so far."""
        if self.draft.credential is not None:  # a service principal or managed identity
            from gpuci_tui.core.azure.client import AzureDevOpsClient

            return AzureDevOpsClient(self.draft.url, self.draft.credential)
        factory = self.services.azure_factory
        if factory is None:
            raise RuntimeError("no Azure DevOps client is configured for this console")
        return factory(self.draft.url, self.draft.pat)

    # ------------------------------------------------------------------ navigation

    def go_next(self) -> None:
        """Validate the current step and move on."""
        self.run_worker(self._next(), group="wizard-next", exclusive=True, exit_on_error=False)

    def action_next(self) -> None:
        """Next (ctrl+n)."""
        self.go_next()

    async def _next(self) -> None:
        step, generation = self.step, self._generation
        button = self.query_one("#wizard-next", Button)
        button.disabled = True
        try:
            try:
                problem = await step.validate()
            except Exception as exc:  # noqa: BLE001 - an unexpected failure still reads plainly
                problem = f"This step could not be checked: {exc or type(exc).__name__}"
        finally:
            button.disabled = False
        if generation != self._generation or step is not self.step:
            return  # the operator went Back meanwhile: this result is stale
        if problem:
            step.say(problem, "error")
            return
        step.say("", "info")
        if isinstance(step, ReviewStep) and step.saved is not None:
            self.draft.pat = ""  # done with it: the supervisor reads it from where it was stored
            self.post_message(SetupSaved(step.saved))
            return
        self._show(self.index + 1)

    def action_back(self) -> None:
        """Previous step; on the first step, offer to leave."""
        self._generation += 1
        self.query_one("#wizard-next", Button).disabled = False
        if self.index == 0:
            self.run_worker(self.app.action_quit(), exit_on_error=False)
            return
        self.step.say("", "info")
        self._show(self.index - 1)

    @on(Button.Pressed, "#wizard-next")
    def _next_pressed(self) -> None:
        self.go_next()

    @on(Button.Pressed, "#add-group")
    def _add_group_pressed(self) -> None:
        review = self.step
        if isinstance(review, ReviewStep):
            review.add_group()

    @on(Button.Pressed, "#wizard-back")
    def _back_pressed(self) -> None:
        self.action_back()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if isinstance(self.step, VolumesStep) and self.step.submitted():
            return
        self.go_next()
