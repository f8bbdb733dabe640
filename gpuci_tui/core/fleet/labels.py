"""Host labels that stay distinct at any width: the common part is cut, what differs is kept.

``gpu-node-a.example.com``, ``gpu-node-b.example.com`` and
``gpu-node-c.example.com`` cut in the middle all read ``gpu-nod…mple.com``.
Cut by what they share instead, they read ``gpu-node-a``, ``…node-b`` or ``…-c``
as the room shrinks: first the domain every host shares goes, then the start
they share (marked ``…``), and only then is what differs cut in its middle.
The full name is always in the detail line; an alias from ``[fleet]``
(``label = "a100"``) is shown as given.
"""

from __future__ import annotations

from collections.abc import Sequence

_SEPARATORS = ".-_:@/"


def _middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def common_domain(labels: Sequence[str]) -> str:
    """The dotted ending every label shares (``.example.com``), or ``""``.

    Only at a dot, never a whole label, and only for two labels or more: one
    host alone has nothing to be told apart from.
    """
    if len(labels) < 2:
        return ""
    first = labels[0]
    for dot in [i for i, char in enumerate(first) if char == "."]:
        suffix = first[dot:]
        if all(label.endswith(suffix) and len(label) > len(suffix) for label in labels):
            return suffix
    return ""


def common_start(labels: Sequence[str]) -> str:
    """The start every label shares, up to its last separator (``gpu-node-``), or ``""``."""
    if len(labels) < 2:
        return ""
    shortest = min(labels, key=len)
    size = 0
    while size < len(shortest) and all(label[size] == shortest[size] for label in labels):
        size += 1
    cut = max((i + 1 for i in range(size) if shortest[i] in _SEPARATORS), default=0)
    if any(len(label) <= cut for label in labels):
        return ""
    return shortest[:cut]


def short_label(label: str, labels: Sequence[str], width: int) -> str:
    """``label`` in at most ``width`` characters, told apart from the others in ``labels``.

    Args:
        label: The host's label.
        labels: Every host's label (``label`` among them).
        width: The room, in characters.
    """
    if len(label) <= width:
        return label
    others = [text for text in labels if text] or [label]
    domain = common_domain(others)
    if domain and label.endswith(domain):
        label = label[: -len(domain)]
        others = [text[: -len(domain)] for text in others]
        if len(label) <= width:
            return label
    start = common_start(others)
    if width >= 2 and start and label.startswith(start):
        rest = label[len(start) :]
        if len(rest) + 1 <= width:
            # As much of the shared start as fits, nearest the part that differs.
            return "…" + label[len(label) - (width - 1) :]
        return "…" + _middle(rest, width - 1)
    return _middle(label, width)


def target_around(label: str, target: str) -> tuple[str, str] | None:
    """What ``target`` adds around ``label`` when the label is its host name: ``(before, after)``.

    ``ci@gpu3:2222`` labelled ``gpu3`` is ``("ci@", ":2222")``, so the host is named
    once: ``ci@`` **gpu3** ``:2222``, not ``gpu3 ci@gpu3:2222``. None when the label is
    an alias (``a100`` for ``ci@10.0.0.5``): then both are shown.
    """
    rest = target.rsplit("@", 1)[-1]
    user = target[: len(target) - len(rest)]
    for opening, closing in (("", ""), ("[", "]")):  # an IPv6 address is in brackets
        name = opening + label + closing
        after = rest[len(name) :]
        if rest.startswith(name) and (not after or after.startswith(":")):
            return user + opening, closing + after
    return None
