"""A read-only console's footer offers only what works: command keys leave it.

The keys stay bound: pressing one still says why nothing happens (the
console was started with ``--readonly``), but the footer no longer offers
Drain, Restart or Resume that would only be refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from textual.dom import DOMNode

#: Binding ids of the keys that change something on a host (the fleet's and a dashboard's).
COMMAND_IDS = frozenset(
    {
        "drain", "drain_all", "restart", "restart_all", "resume", "resume_all",
        "scale_up", "scale_down", "pause", "gpu_clear", "reload", "reset_overrides", "image_pull",
    }
)  # fmt: skip


def hide_from_footer(node: DOMNode, ids: Collection[str] = COMMAND_IDS) -> None:
    """Leave the bindings ``ids`` of ``node`` out of its footer (they stay bound).

    Called from the node's ``__init__``: it edits the node's own copy of its
    bindings (Textual gives each node one), before the keymap is applied by id.
    """
    bindings = node._bindings.key_to_bindings  # noqa: SLF001 - the node's own copy
    for key, found in bindings.items():
        bindings[key] = [dataclasses.replace(b, show=False) if b.id in ids else b for b in found]
