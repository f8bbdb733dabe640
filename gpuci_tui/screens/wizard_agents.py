"""Wizard steps 4–6: image (CUDA fit, present locally?), agents, dataset volumes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from textual import on
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input, OptionList, RadioButton, RadioSet, Static
from textual.widgets.option_list import Option

from gpuci_tui.core.config.loader import VolumeConfig
from gpuci_tui.core.formatting import gib
from gpuci_tui.core.wording import plural
from gpuci_tui.screens.wizard_base import Step, config_problem
from gpuci_tui.screens.wizard_shapes import read_shape, shape_fields, show_shapes

DEFAULT_IMAGE_REPO = "gpuci-agent"
"""The repository dockeragent/build.sh tags its images with (``--repo`` changes it)."""

GPU_POLICY_LABELS = {
    "all": "all: every agent sees every GPU",
    "none": "none: CPU-only agents",
    "per-agent": "per-agent: each agent gets its own GPU (one agent per GPU)",
}
NETWORK_LABELS = {
    "bridge": "bridge: Docker's default network",
    "host": "host: the host's network (to reach services on 127.0.0.1)",
}


class ImageStep(Step):
    """Step 4: which image; does this host's driver run its CUDA; is it present locally?"""

    TITLE = "Step 4 of 7 · Agent image"
    HINT = (
        "The image every agent container runs. Build it with dockeragent/build.sh, or "
        'let the daemon pull it before the first start ([agents] pull = "missing").'
    )

    def fields(self) -> Iterable[Widget]:
        """Host facts, the image field, two verdict lines."""
        yield Static("", id="host-line", classes="hint", markup=False)
        config = self.services.config
        yield Input(
            value=config.agents.image if config else "", placeholder="REPO/IMAGE:TAG", id="image"
        )
        yield Static("", id="image-compat", markup=False)
        yield Static("", id="image-present", markup=False)

    def entered(self) -> None:
        """Read the driver (in a thread) and propose a matching image."""
        super().entered()
        self.run_worker(self._suggest(), group="image-suggest", exclusive=True, exit_on_error=False)

    async def _suggest(self) -> None:
        from gpuci_tui.core.gpu.imagechoice import suggest_image

        host = self.draft.host
        if host is None:
            host = await self.wizard.in_thread(self.services.gpu.host_info)
            self.draft.host = host
        if host.available:
            cuda = (
                f", CUDA {host.cuda_driver_version[0]}.{host.cuda_driver_version[1]}"
                if host.cuda_driver_version
                else ""
            )
            self.query_one("#host-line", Static).update(
                f"This host: NVIDIA driver {host.driver_version or 'unknown'}{cuda}, {plural(host.gpu_count, 'GPU')}."
            )
        else:
            self.query_one("#host-line", Static).update(
                f"No GPU visible on this host: {host.reason}"
            )
        field = self.query_one("#image", Input)
        if not field.value.strip():
            field.value = suggest_image(
                DEFAULT_IMAGE_REPO, host.cuda_driver_version, driver_version=host.driver_version
            )
        self._compat(field.value)

    def _compat(self, image: str) -> str:
        """Show whether the driver runs the image's CUDA; return a warning or ''."""
        from gpuci_tui.core.gpu.imagechoice import Verdict, check_compatibility, image_cuda

        host = self.draft.host
        verdict = check_compatibility(
            image_cuda(image.strip()),
            host.cuda_driver_version if host else None,
            host.driver_version if host else None,
        )
        line = self.query_one("#image-compat", Static)
        kind = {Verdict.OK: "ok-text", Verdict.UNKNOWN: "muted"}.get(verdict.verdict, "error-text")
        line.update(("✓ " if verdict.ok else "! ") + verdict.message)
        line.set_classes(kind)
        return "" if verdict.verdict in (Verdict.OK, Verdict.UNKNOWN) else verdict.message

    @on(Input.Changed, "#image")
    def _changed(self, event: Input.Changed) -> None:
        self._compat(event.value)
        self.run_worker(self._presence(event.value, delay=0.3), group="image-presence", exclusive=True,
                        exit_on_error=False)  # fmt: skip

    async def _presence(self, image: str, delay: float = 0.0) -> str:
        """Ask Docker whether ``image`` is present; show it; return a warning or ''."""
        if delay:
            await asyncio.sleep(delay)  # typing: ask once the operator pauses
        line = self.query_one("#image-present", Static)
        image = image.strip()
        runtime = self.services.runtime
        if not image:
            line.update("")
            return ""
        if runtime is None:
            warning = "Docker is not connected: cannot tell whether the image is present locally."
            line.update(warning)
            line.set_classes("muted")
            return warning
        try:
            present = await self.wizard.in_thread(lambda: runtime.image_present(image))
        except Exception as exc:  # noqa: BLE001 - shown, not fatal
            warning = f"Could not ask Docker whether the image is present: {exc}"
            line.update(warning)
            line.set_classes("error-text")
            return warning
        if present:
            line.update("✓ present locally")
            line.set_classes("ok-text")
            return ""
        warning = (
            f"{image} is not present locally: build it (dockeragent/build.sh), or the "
            f"daemon pulls it before the first start (gpuci-tui image pull to pull it now)."
        )
        line.update("! " + warning)
        line.set_classes("error-text")
        return warning

    async def validate(self) -> str | None:
        """A valid reference is required; CUDA and presence problems are warnings."""
        from gpuci_tui.core.config.loader import ConfigError
        from gpuci_tui.core.config.validate import validate_image

        value = self.query_one("#image", Input).value
        try:
            image = validate_image(value)
        except ConfigError as exc:
            return config_problem("The image", exc)
        warnings = [w for w in (self._compat(image), await self._presence(image)) if w]
        self.draft.image = image
        self.draft.image_warnings = warnings
        return None


class AgentsStep(Step):
    """Step 5: how many agents, their names, their GPUs and network."""

    TITLE = "Step 5 of 7 · Agents"
    HINT = "Each agent runs one job in its own container, then is replaced by a fresh one."

    def fields(self) -> Iterable[Widget]:
        """Count, prefix, GPU policy (with the GPUs), network."""
        config = self.services.config
        yield Static("Number of agents", classes="field-label")
        yield Input(value=str(config.agents.count) if config else "", id="count", type="integer")
        yield Static(
            "Name prefix (agents and containers are named PREFIX-0, PREFIX-1, …)",
            classes="field-label",
        )
        yield Input(value=config.agents.name_prefix if config else "", id="prefix")
        # Shown once the operator adds a second group: groups never share GPUs or names.
        yield Static("Group name (addresses its slots as NAME/1, NAME/2, …)",
                     classes="field-label group-only")  # fmt: skip
        yield Input(value="", id="group-name", classes="group-only")
        yield Static("GPUs of this group: indices or UUIDs, comma-separated",
                     classes="field-label group-only")  # fmt: skip
        yield Input(value="", id="gpu-ids", classes="group-only", placeholder="e.g. 2,3")
        yield Static("GPUs for each agent", classes="field-label")
        policy = config.agents.gpus if config else "all"
        with RadioSet(id="gpu-policy"):
            for key, label in GPU_POLICY_LABELS.items():
                yield RadioButton(label, value=key == policy, id=f"gpus-{key}")
        yield Static("", id="gpu-list", classes="hint", markup=False)
        yield from shape_fields(config)
        yield Static("Network", classes="field-label")
        network = config.agents.network if config else "bridge"
        with RadioSet(id="network"):
            for key, label in NETWORK_LABELS.items():
                yield RadioButton(label, value=key == network, id=f"net-{key}")

    def entered(self) -> None:
        """Fill defaults from the host once; list the GPUs."""
        adding = bool(self.draft.groups)
        for widget in self.query(".group-only"):
            widget.display = adding
        if adding:
            self.query_one("#group-name", Input).value = self.draft.group_name
            self.query_one("#gpu-ids", Input).value = ",".join(self.draft.gpu_ids)
            self.query_one("#prefix", Input).value = self.draft.name_prefix
        super().entered()
        self.run_worker(self._host(), group="agents-host", exclusive=True, exit_on_error=False)

    async def _host(self) -> None:
        from gpuci_tui.core.config.loader import default_name_prefix

        if not self.draft.gpus:
            frame = await self.wizard.in_thread(self.services.gpu.sample)
            self.draft.gpus = list(frame.gpus)
            self.draft.host = self.draft.host or frame.host
        count, prefix = self.query_one("#count", Input), self.query_one("#prefix", Input)
        if not count.value:
            count.value = str(len(self.draft.gpus) or 1)
        if not prefix.value:
            prefix.value = default_name_prefix(self.services.hostname)
        gpus = [
            f"GPU{g.index} {g.name}"
            + ("" if g.memory_total_mib is None else f" · {gib(g.memory_total_mib)} GiB")
            for g in self.draft.gpus
        ]
        host = self.draft.host
        reason = (
            host.reason if host is not None and not host.available else "the driver reports none"
        )
        self.query_one("#gpu-list", Static).update(
            "\n".join(gpus) if gpus else f"No GPU visible: {reason}."
        )
        await show_shapes(self)

    def _chosen(self, radio_id: str, labels: dict[str, str]) -> str:
        pressed = self.query_one(f"#{radio_id}", RadioSet).pressed_button
        if pressed is None or pressed.id is None:
            return next(iter(labels))
        return pressed.id.split("-", 1)[1]

    async def validate(self) -> str | None:
        """Count, prefix and policy must fit the rules and this host's GPUs."""
        from gpuci_tui.core.config.loader import ConfigError, validate_count, validate_name_prefix
        from gpuci_tui.core.config.validate import check_gpu_count

        policy = self._chosen("gpu-policy", GPU_POLICY_LABELS)
        typed = self.query_one("#count", Input).value.strip()
        try:
            # The field holds text; the rule checks a TOML integer.
            count = validate_count(int(typed) if typed.lstrip("-").isdigit() else (typed or None))
        except ConfigError as exc:
            return config_problem("The number of agents", exc)
        try:
            prefix = validate_name_prefix(self.query_one("#prefix", Input).value)
        except ConfigError as exc:
            return config_problem("The name prefix", exc)
        host = self.draft.host
        visible = len(self.draft.gpus) if host is None or host.available else 0
        if policy != "none" and visible == 0:
            reason = f" ({host.reason})" if host is not None and host.reason else ""
            return (
                f"No GPU is visible on this host{reason}, so agents with GPUs cannot start. "
                "Choose 'none', or install the NVIDIA driver and Container Toolkit first."
            )
        policy, per_slot, problem = read_shape(self, policy, count)
        try:
            if problem:
                return problem
            check_gpu_count(count, policy, visible, per_slot)
        except ConfigError as exc:
            return config_problem("The number of agents", exc)
        if self.draft.groups:
            problem = self._group_fields(policy)
            if problem:
                return problem
            policy = "list" if policy == "all" and self.draft.gpu_ids else policy
        self.draft.count, self.draft.name_prefix, self.draft.gpu_policy = count, prefix, policy
        self.draft.gpus_per_slot = per_slot
        self.draft.network = self._chosen("network", NETWORK_LABELS)
        return None

    def _group_fields(self, policy: str) -> str | None:
        """Read the group name and its GPUs (second and later groups only)."""
        from gpuci_tui.core.config.groups import GROUP_NAME

        name = self.query_one("#group-name", Input).value.strip()
        if not GROUP_NAME.fullmatch(name):
            return (
                f"The group name {name!r} is not valid: use lower-case letters, digits, '-' and '_' "
                "(at most 20; it names the group's slots, e.g. cuda13/1)."
            )
        if name in {group.name for group in self.draft.groups}:
            return f"A group named {name!r} is already set up: choose another name."
        typed = self.query_one("#gpu-ids", Input).value
        ids = [part.strip() for part in typed.split(",") if part.strip()]
        if policy != "none" and not ids:
            return (
                "Name the GPUs of this group (e.g. 2,3): groups on one host never share a GPU, "
                "and the first group already uses the host's GPUs from 0 up."
            )
        self.draft.group_name, self.draft.gpu_ids = name, ids
        return None


_VOLUME_FIELDS = {
    "host": "The host directory",
    "container": "The container path",
    "env": "The variable",
}


def volume_problems(exc: Any) -> str:
    """Each volume error, named by its field (``The host directory /x does not exist…``)."""
    lines = []
    for error in getattr(exc, "errors", [exc]):
        field = str(getattr(error, "key", "") or "").rsplit(".", 1)[-1]
        label = _VOLUME_FIELDS.get(field, "The volume")
        lines.append(f"{label}: {getattr(error, 'problem', str(error))}")
    return "\n".join(lines)


class VolumesStep(Step):
    """Step 6: read-only dataset mounts (optional)."""

    TITLE = "Step 6 of 7 · Dataset volumes (optional)"
    HINT = (
        "Host directories mounted read-only into every agent, e.g. /data/imagenet at "
        "/datasets/imagenet, named by an env var such as DATASET_DIR. Press Next to skip."
    )

    def fields(self) -> Iterable[Widget]:
        """Three fields, Add/Remove, the list."""
        with Horizontal(classes="volume-row"):
            yield Input(placeholder="host directory", id="vol-host")
            yield Input(placeholder="path in the agent", id="vol-container")
            yield Input(placeholder="env var (optional)", id="vol-env")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Add volume", id="vol-add")
            yield Button("Remove selected", id="vol-remove")
        yield OptionList(id="vol-list")

    def on_mount(self) -> None:
        """Start with the volumes of an existing configuration."""
        config = self.services.config
        if config is not None and not self.draft.volumes:
            self.draft.volumes = list(config.agents.volumes)
        self._refresh()

    def _refresh(self) -> None:
        listing = self.query_one("#vol-list", OptionList)
        listing.clear_options()
        for index, volume in enumerate(self.draft.volumes):
            env = f"  ${volume.env}" if volume.env else ""
            listing.add_option(
                Option(f"{volume.host} → {volume.container} (read-only){env}", id=str(index))
            )
        listing.display = bool(self.draft.volumes)

    def _typed(self) -> tuple[str, str, str]:
        return tuple(
            self.query_one(f"#vol-{n}", Input).value.strip() for n in ("host", "container", "env")
        )  # type: ignore[return-value]

    def add(self) -> str | None:
        """Add the typed volume; return the problem, or None when added."""
        from gpuci_tui.core.config.loader import ConfigError, validate_volume

        host, container, env = self._typed()
        try:
            volume: VolumeConfig = validate_volume(host, container, env or None, self.draft.volumes)
        except ConfigError as exc:
            return volume_problems(exc)
        self.draft.volumes.append(volume)
        for name in ("host", "container", "env"):
            self.query_one(f"#vol-{name}", Input).value = ""
        self._refresh()
        self.query_one("#vol-host", Input).focus()
        self.say(f"Added {volume.host} → {volume.container}.", "ok")
        return None

    @on(Button.Pressed, "#vol-add")
    def _add_pressed(self) -> None:
        problem = self.add()
        if problem:
            self.say(problem)

    @on(Button.Pressed, "#vol-remove")
    def _remove_pressed(self) -> None:
        listing = self.query_one("#vol-list", OptionList)
        if listing.highlighted is None or not self.draft.volumes:
            self.say("Select a volume in the list first (Tab to it, arrow keys).")
            return
        removed = self.draft.volumes.pop(listing.highlighted)
        self._refresh()
        self.say(f"Removed {removed.host} → {removed.container}.", "info")

    def submitted(self) -> bool:
        """Enter in a volume field adds it; with nothing typed it means Next."""
        if any(self._typed()):
            self._add_pressed()
            return True
        return False

    async def validate(self) -> str | None:
        """A typed but not yet added volume is added (or its problem shown)."""
        if any(self._typed()):
            return self.add()
        return None
