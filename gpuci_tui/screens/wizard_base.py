"""Building blocks of the setup wizard: the draft being filled in and the step base class.

A step is a container with its own inputs and one message line. Before the
wizard moves on it awaits `Step.validate`, which returns an error message (the
step stays) or None. Blocking checks (Azure DevOps, keyring, Docker, NVML) run
in thread workers through `WizardContext.in_thread`, so the screen keeps
answering keys while they run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from gpuci_tui.core.config.loader import VolumeConfig
from gpuci_tui.core.config.slot_shapes import HostTopology
from gpuci_tui.core.gpu_readings import GpuHostInfo, GpuSample
from gpuci_tui.core.protocols import Pool

if TYPE_CHECKING:
    from gpuci_tui.services import Services, SetupClient

T = TypeVar("T")


@dataclass(frozen=True)
class DraftGroup:
    """An agent group finished in the wizard before the operator added another one."""

    name: str
    pool: str
    image: str
    count: int
    name_prefix: str
    gpu_policy: str
    gpu_ids: tuple[str, ...]
    network: str
    volumes: tuple[VolumeConfig, ...]
    gpus_per_slot: int = 1


@dataclass
class WizardDraft:
    """What the operator has entered so far (validated values only)."""

    url: str = ""
    pat: str = field(default="", repr=False)
    """Kept only while the wizard runs, to check the pool with the same PAT."""
    pat_note: str = ""
    """Where the PAT lives now, for the review (never the PAT itself)."""
    identity: dict[str, str] = field(default_factory=dict)
    """``[azure]`` keys of a service principal or managed identity (empty: a PAT)."""
    credential: Any = field(default=None, repr=False)
    """The signed-in Entra credential the later steps use instead of the PAT."""
    user: str | None = None
    pools: list[Pool] = field(default_factory=list)
    pool: str = ""
    image: str = ""
    image_warnings: list[str] = field(default_factory=list)
    host: GpuHostInfo | None = None
    gpus: list[GpuSample] = field(default_factory=list)
    count: int = 0
    name_prefix: str = ""
    gpu_policy: str = "all"
    network: str = "bridge"
    volumes: list[VolumeConfig] = field(default_factory=list)
    gpu_ids: list[str] = field(default_factory=list)
    """The GPUs (indices or UUIDs) of the group being set up; empty: every GPU of the host."""
    groups: list[DraftGroup] = field(default_factory=list)
    """Groups finished before this one ("Add a group" on the review); empty: one group."""
    group_name: str = ""
    """The name of the group being set up when ``groups`` is not empty."""
    gpus_per_slot: int = 1
    topology: HostTopology | None = None
    """The host's NVLink pairs and MIG devices, read once (`wizard_shapes`)."""

    def current_group(self) -> DraftGroup:
        """The group the steps describe now."""
        return DraftGroup(
            name=self.group_name or "default",
            pool=self.pool,
            image=self.image,
            count=self.count,
            name_prefix=self.name_prefix,
            gpu_policy=self.gpu_policy,
            gpu_ids=tuple(self.gpu_ids),
            network=self.network,
            volumes=tuple(self.volumes),
            gpus_per_slot=self.gpus_per_slot,
        )

    def all_groups(self) -> list[DraftGroup]:
        """Every group of the draft, the one on screen last."""
        return [*self.groups, self.current_group()]


class WizardContext(Protocol):
    """What a step may use from the wizard screen."""

    services: Services
    draft: WizardDraft

    async def in_thread(self, call: Callable[[], T]) -> T:
        """Run a blocking ``call`` in a thread worker and return its result (or raise)."""
        ...

    def client(self) -> SetupClient:
        """An Azure DevOps client for the draft's URL and PAT."""
        ...

    def go_next(self) -> None:
        """Validate the current step and move on (as the Next button does)."""
        ...

    def show_step(self, kind: type[Step]) -> None:
        """Go to the step of class ``kind``."""
        ...


class Step(VerticalScroll):
    """One wizard step: a title, a hint, its fields, and a message line."""

    TITLE: ClassVar[str] = ""
    HINT: ClassVar[str] = ""

    def __init__(self, wizard: WizardContext, *, id: str) -> None:
        """Create the step for ``wizard``."""
        super().__init__(id=id, classes="wizard-step")
        self.wizard = wizard

    @property
    def services(self) -> Services:
        """The console's services."""
        return self.wizard.services

    @property
    def draft(self) -> WizardDraft:
        """The values entered so far."""
        return self.wizard.draft

    def compose(self) -> Iterable[Widget]:
        """Title, hint, the step's fields, message line."""
        yield Static(self.TITLE, classes="step-title")
        if self.HINT:
            yield Static(self.HINT, classes="hint", markup=False)
        yield from self.fields()
        yield Static("", classes="step-message", id=f"{self.id}-message", markup=False)

    def fields(self) -> Iterable[Widget]:
        """The step's own widgets."""
        return ()

    def say(self, text: str, kind: str = "error") -> None:
        """Show ``text`` on the message line; ``kind`` is error, ok, busy or info."""
        line = self.query_one(f"#{self.id}-message", Static)
        line.update(text)
        line.set_classes(f"step-message -{kind}")
        if text and kind == "error":
            self.call_after_refresh(self._show_error, line)

    def _show_error(self, line: Static) -> None:
        """On a short terminal the message may sit below the fold: bring it up, then the
        field being edited, so the operator sees both what went wrong and where to fix it
        (at 80x24 the message alone pushed the focused secret field out of sight).
        """
        line.scroll_visible(animate=False)
        focused = self.screen.focused
        if focused is not None and focused in self.query("*"):
            # After the next refresh, not now: the message's new lines may not be laid out
            # yet, and a later layout would scroll the field away again (seen under load).
            self.call_after_refresh(focused.scroll_visible, animate=False)

    @property
    def message(self) -> str:
        """The text of the message line (for tests and the review)."""
        return str(self.query_one(f"#{self.id}-message", Static).content)

    def entered(self) -> None:
        """Called each time the step is shown: focus the first field, start checks."""
        for widget in self.query("Input, RadioSet, OptionList, Button"):
            if widget.focusable:
                widget.focus()
                return

    async def validate(self) -> str | None:
        """Check the step; return a plain error message, or None to move on."""
        return None


def config_problem(label: str, exc: Any) -> str:
    """``Organisation URL must use https://…`` from a `ConfigError` (or `ConfigErrors`)."""
    problems = [getattr(e, "problem", str(e)) for e in getattr(exc, "errors", [exc])]
    return "\n".join(f"{label} {p}" for p in problems)
