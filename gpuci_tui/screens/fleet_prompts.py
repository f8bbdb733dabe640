"""The words of the fleet's confirmations, built from each host's own `CommandPreview`.

The daemon of every host answers "what would this do?" by its own rules
(`gpuci_tui.core.engine.preview`); these functions only count its answers and say
them. "No job is killed" is said for drain and restart, where it is true:
busy agents always finish their job first.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuci_tui.core.engine.preview import CommandPreview, Effect
from gpuci_tui.core.wording import plural
from gpuci_tui.screens.prompts import Prompt

#: Per command kind: (effect, singular phrase, plural phrase with {n}).
_PHRASES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "drain": (
        (Effect.AFTER_JOB, "1 busy agent finishes its job, then stays stopped",
         "{n} busy agents finish their job, then stay stopped"),
        (Effect.STOP_NOW, "1 idle agent stops now", "{n} idle agents stop now"),
        (Effect.NOT_STARTED, "1 slot without a container is not started again",
         "{n} slots without a container are not started again"),
    ),
    "restart": (
        (Effect.REPLACE_NOW, "1 idle agent is replaced now", "{n} idle agents are replaced now"),
        (Effect.AFTER_JOB, "1 busy agent is replaced after its job",
         "{n} busy agents are replaced after their job"),
        (Effect.START_NOW, "1 slot without a container starts a fresh agent now",
         "{n} slots without a container start a fresh agent now"),
    ),
    "resume": (
        (Effect.RESUME, "1 drained, parked or backing-off slot starts again",
         "{n} drained, parked or backing-off slots start again"),
    ),
}  # fmt: skip
_VERBS = {"drain": "Drain", "restart": "Restart", "resume": "Resume"}
_AFTER = {
    "drain": " No job is killed. Nothing replaces them until you resume (u).",
    "restart": " No job is killed.",
    "resume": "",
}


def effects_phrase(kind: str, preview: CommandPreview) -> str:
    """What ``kind`` does to one host, in words (empty: nothing)."""
    parts = []
    for effect, one, many in _PHRASES[kind]:
        # Draining a drained slot changes nothing: it is not counted.
        count = sum(1 for item in preview.of(effect) if kind != "drain" or item.state != "drained")
        if count:
            parts.append(one if count == 1 else many.format(n=count))
    return "; ".join(parts)


def host_prompt(kind: str, label: str, preview: CommandPreview) -> Prompt | str:
    """Confirm ``kind`` (drain, restart, resume) of every agent of one host.

    Returns:
        The confirmation, or a sentence saying why there is nothing to confirm.
    """
    if not preview.ok:
        return f"{label}: {preview.message or 'the daemon refused'}"
    phrase = effects_phrase(kind, preview)
    if not phrase:
        return f"{label}: nothing to {kind} (no agent would change)."
    count = len(preview.effects)
    agents = "the only agent" if count == 1 else f"all {count} agents"
    after = _AFTER[kind]
    if count == 1:
        after = after.replace("replaces them", "replaces it")
    return Prompt(f"{_VERBS[kind]} {agents} on {label}?", f"{phrase}.{after}", _VERBS[kind])


def fleet_prompt(
    kind: str, answers: Sequence[tuple[str, CommandPreview]], left_out: Sequence[tuple[str, str]]
) -> Prompt | str:
    """Confirm ``kind`` on every reachable host, one line per host.

    Args:
        kind: ``drain``, ``restart`` or ``resume``.
        answers: ``(label, preview)`` of each host that answered.
        left_out: ``(label, why)`` of each host that gets nothing (unreachable, no answer).

    Returns:
        The confirmation, or a sentence when no host would change.
    """
    lines = []
    acting = 0
    for label, preview in answers:
        phrase = effects_phrase(kind, preview) if preview.ok else ""
        if phrase:
            acting += 1
            lines.append(f"{label}: {phrase}.")
        else:
            why = preview.message if not preview.ok else f"nothing to {kind}"
            lines.append(f"{label}: {why}; left as it is.")
    lines += [f"{label}: {why}; left as it is." for label, why in left_out]
    if not acting:
        return f"Nothing to {kind} on any reachable host. " + " ".join(lines)
    title = f"{_VERBS[kind]} on {plural(acting, 'host')}?"
    body = "\n".join(lines) + ("\n" + _AFTER[kind].strip() if _AFTER[kind] else "")
    return Prompt(title, body, f"{_VERBS[kind]} {plural(acting, 'host')}")


def fleet_quit_prompt(hosts: int) -> Prompt:
    """Leaving the fleet console changes nothing on any host."""
    return Prompt(
        "Quit the fleet console?",
        f"The daemons on {'the host' if hosts == 1 else f'all {hosts} hosts'} keep running "
        "and keep replacing their agents: quitting only closes the ssh connections.",
        "Quit",
    )
