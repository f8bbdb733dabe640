"""A small YAML writer for Kubernetes manifests, so the export needs no YAML library.

Manifests are plain data (mappings, lists, strings, whole numbers, booleans),
which block-style YAML expresses without any of the format's hard parts. Every
string that could be read back as anything but that string (``"1"``, ``"true"``,
``"on"``, ``"0400"``, anything with a space, quote or ``#``) is written
double-quoted with JSON escapes, which YAML 1.1 and 1.2 read the same way; the
others stay plain so the files read like hand-written manifests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["Node", "dump_documents", "dump_yaml"]

Node: TypeAlias = Mapping[str, "Node"] | Sequence["Node"] | str | int | bool | None
"""What a manifest is made of."""

# Plain only when it starts with a letter, "_" or "/" (so never a number, date, alias,
# tag, indicator or comment) and holds no space, quote, "#", ",", "[", "{" or ": ".
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@+-]*(?::[A-Za-z0-9_./@+-]+)*")
# Words some YAML reader takes for a boolean or null.
_SPECIAL = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null"])


def _scalar(value: str | int | bool | None) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if _PLAIN.fullmatch(value) and value.lower() not in _SPECIAL:
        return value
    return json.dumps(value, ensure_ascii=False)


def _is_scalar(value: Node) -> bool:
    return value is None or isinstance(value, str | int | bool)


def _lines(value: Node, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            label = pad + _scalar(str(key)) + ":"
            if _is_scalar(item) or not item:
                out.append(label + " " + _inline(item))
            elif isinstance(item, Mapping):
                out.append(label)
                out.extend(_lines(item, indent + 2))
            else:  # a list sits at the key's own indentation, as kubectl writes it
                out.append(label)
                out.extend(_lines(item, indent))
        return out
    if isinstance(value, str | int | bool) or value is None:
        return [pad + _scalar(value)]
    if not value:
        return [pad + "[]"]
    out = []
    for item in value:
        if _is_scalar(item) or not item:
            out.append(pad + "- " + _inline(item))
        else:
            nested = _lines(item, indent + 2)
            out.append(pad + "- " + nested[0][indent + 2 :])
            out.extend(nested[1:])
    return out


def _inline(value: Node) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, str | int | bool) or value is None:
        return _scalar(value)
    return "[]"


def dump_yaml(document: Node) -> str:
    """One YAML document, block style, ending with a newline.

    Args:
        document: Mappings with string keys, lists, strings, ints, booleans, None.

    Returns:
        The YAML text; loading it gives back ``document``.
    """
    return "\n".join(_lines(document, 0)) + "\n"


def dump_documents(documents: Sequence[Node], header: str = "") -> str:
    """Several documents in one stream, each opened with ``---``.

    Args:
        documents: The documents, in order.
        header: Comment text put before the first document, one ``#`` line per line.

    Returns:
        The YAML stream.
    """
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comment + "".join("---\n" + dump_yaml(doc) for doc in documents)
