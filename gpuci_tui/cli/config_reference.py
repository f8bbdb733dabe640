"""docs/configuration.md: the configuration reference, generated from the schema itself.

Nothing here is written twice: the sections and their keys are the loader's own tables,
each key's type and default its dataclass field's, its description the field's docstring,
what it allows the loader's answer to a value no rule accepts (the message a wrong file
gets, without its "got ..."), and what ``reload`` does with a change of it
`reload_diff.reload_effect`'s. tests/docs holds docs/configuration.md to `render`;
regenerate it with::

    python -m gpuci_tui.cli.config_reference docs/configuration.md
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.config import keys as keys_module
from gpuci_tui.core.config import loader
from gpuci_tui.core.config.docker_disk import DockerConfig
from gpuci_tui.core.config.fleet import FLEET_KEYS, FleetConfig
from gpuci_tui.core.config.fleet_host import HOST_KEYS, FleetHost
from gpuci_tui.core.config.keys import ACTIONS, key_name
from gpuci_tui.core.config.model import AgentsConfig, AzureConfig, VolumeConfig
from gpuci_tui.core.config.observe import GpuConfig, HistoryConfig, MetricsConfig
from gpuci_tui.core.config.reload_diff import reload_effect
from gpuci_tui.core.engine.settings import SupervisorConfig

REGENERATE = "python -m gpuci_tui.cli.config_reference docs/configuration.md"
"""The command that rewrites the reference (the drift test names it)."""

#: Each section's dataclass: its fields are the section's keys (`loader` reads them so).
MODELS: dict[str, type] = {
    "azure": AzureConfig,
    "agents": AgentsConfig,
    "supervisor": SupervisorConfig,
    "gpu": GpuConfig,
    "history": HistoryConfig,
    "metrics": MetricsConfig,
    "docker": DockerConfig,
    "fleet": FleetConfig,
}

#: How the file writes a value whose Python type says less (or other) than the file takes.
FILE_FORMS = {
    "azure.remove_offline_after": 'duration: "7d", "12h", "90m" (units s, m, h, d, w) or seconds',
    "agents.gpus": "string, array of GPU indexes or UUIDs, or table { per_agent = [...] }",
    "agents.gpu_admission": 'string, or table { foreign_memory_max = "8GiB", foreign_util_max = 20 }',
    "agents.standby_schedule": "table [agents.standby_schedule] (docs/standby.md)",
    "agents.volumes": "array of tables [[agents.volumes]]",
    "agents.standby": 'boolean, integer or "auto"',
    "fleet.hosts": 'array of "[user@]host[:port]" strings or tables',
}

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_GOT = re.compile(r"[,;]? ?(got|but got) .*$")
_GENERIC = ("a string in quotes",)


class _Probe:
    """A value no rule accepts: the loader's answer to it says what the key allows."""

    def __repr__(self) -> str:
        return "PROBE"


@dataclass(frozen=True)
class KeyDoc:
    """One key of the reference."""

    key: str
    """Dotted, as a problem names it (``agents.image``)."""
    kind: str
    default: str
    allowed: str
    live: bool
    reload: str
    description: str


def field_docs(model: type) -> dict[str, str]:
    """The docstring under each field of a dataclass, on one line (``""`` where none)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(model)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        text = ""
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            text = " ".join(inspect.cleandoc(str(after.value.value)).split())
        docs[node.target.id] = text.replace("``", "`")
    return docs


def _kind(key: str, annotation: object) -> str:
    if key in FILE_FORMS:
        return FILE_FORMS[key]
    text = str(annotation)
    optional = text.endswith(" | None")
    text = text.removesuffix(" | None")
    kind = _TYPES.get(text, "array" if text.startswith("tuple[") else "table")
    return f"{kind} (optional)" if optional else kind


def _toml(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    to_toml = getattr(value, "to_toml", None)
    if callable(to_toml):
        return _toml(to_toml())
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _default(key: str, field: dataclasses.Field[object]) -> str:
    if key in loader._REQUIRED:  # the loader's own list of required keys
        return f"required, e.g. `{loader._REQUIRED[key]}`"
    if field.default is not dataclasses.MISSING:
        return f"`{_toml(field.default)}`"
    if field.default_factory is not dataclasses.MISSING:
        return f"`{_toml(field.default_factory())}`"
    return "see the description"


def allowed(section: str, name: str) -> str:
    """What ``section.name`` allows: the loader's message for a value no rule accepts."""
    key = f"{section}.{name}"
    _, errors = loader._from_tables({section: {name: _Probe()}})
    for error in errors:
        if error.key != key:
            continue
        if error.allowed:
            return ", ".join(f'`"{choice}"`' for choice in error.allowed)
        rule = _GOT.sub("", error.problem).removeprefix("must be ").strip()
        return "" if rule in _GENERIC else rule
    return ""


def section_keys(section: str) -> Iterator[KeyDoc]:
    """The keys of one section of the file, in the order its dataclass declares them."""
    model = MODELS[section]
    docs = field_docs(model)
    names = FLEET_KEYS if section == "fleet" else loader._TABLES[section]
    fields = {f.name: f for f in dataclasses.fields(model)}
    for name in names:
        key = f"{section}.{name}"
        live, why = reload_effect(key)
        yield KeyDoc(
            key,
            _kind(key, fields[name].type),
            _default(key, fields[name]),
            allowed(section, name),
            live,
            why,
            docs[name],
        )


def _plain_keys(prefix: str, model: type, names: Sequence[str], reload_key: str) -> list[KeyDoc]:
    """Keys of a nested table (a volume, a fleet host) with their docs, types and defaults."""
    docs = field_docs(model)
    fields = {f.name: f for f in dataclasses.fields(model)}
    live, why = reload_effect(reload_key)
    rows = []
    for name in names:
        field = fields.get(name) or fields["target"]  # a host entry's ``host`` is its target
        default = "required" if field.default is dataclasses.MISSING else _default("", field)
        rows.append(
            KeyDoc(
                f"{prefix}.{name}", _kind("", field.type), default, "", live, why, docs[field.name]
            )
        )
    return rows


def key_bindings() -> list[str]:
    """``[keys]``: the rules once, then each rebindable action with its default keys."""
    live, why = reload_effect("keys")
    lines = [
        'Each value is a string of keys, comma-separated (`drain = "ctrl+d,f5"`). The rules',
        "(`check-config` and `run` refuse what the console would get wrong):",
        "",
        *_bullets((keys_module.__doc__ or "").split("\n\n")[2]),
        "",
        f"`reload`: {'live' if live else 'restart'}: {why}.",
        "",
        "| Key | Default | Screens |",
        "|---|---|---|",
    ]
    for action, spec in ACTIONS.items():
        default = ",".join(key_name(k) for k in spec.default.split(","))
        lines.append(f"| `keys.{action}` | `{_toml(default)}` | {', '.join(spec.screens)} |")
    return lines


def _bullets(text: str) -> list[str]:
    """A docstring's ``*`` list as Markdown bullets, one line each."""
    items = " ".join(text.split()).replace("``", "`").split("* ")
    return [f"- {item.strip()}" for item in items if item.strip()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(rows: Sequence[KeyDoc]) -> list[str]:
    lines = [
        "| Key | Type | Default | Allowed | `reload` | Description |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        effect = ("live: " if row.live else "restart: ") + row.reload
        cells = (f"`{row.key}`", row.kind, row.default, row.allowed, effect, row.description)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _intro(model: type) -> str:
    doc = inspect.getdoc(model) or ""
    return " ".join(doc.split()).replace("``", "`")


def render() -> str:
    """The whole reference, as docs/configuration.md holds it."""
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from the configuration schema by `{REGENERATE}`: do not edit by hand. -->",
        "",
        "Every key of `config.toml`, generated from the schema the loader checks files with:",
        "its type, its default, what it allows (the rule a wrong value is refused by, as",
        "`check-config` says it) and what `gpuci-tui reload` does with a change of it (*live*:",
        "applied without a restart; *restart*: left as it runs until the daemon restarts).",
        "The file itself, with examples: [the configuration file](config-file.md).",
        "",
    ]
    for section in loader._SECTIONS:
        if section == "groups":
            out += _groups()
            continue
        if section == "keys":
            first = (keys_module.__doc__ or "").split("\n")[0].replace("``", "`")
            out += ["## [keys]", "", first, "", *key_bindings(), ""]
            continue
        out += [f"## [{section}]", "", _intro(MODELS[section]), ""]
        out += [*_table(list(section_keys(section))), ""]
        if section == "agents":
            out += ["### [[agents.volumes]]", "", _intro(VolumeConfig), ""]
            volume = [f.name for f in dataclasses.fields(VolumeConfig)]
            out += [
                *_table(_plain_keys("agents.volumes", VolumeConfig, volume, "agents.volumes")),
                "",
            ]
        if section == "fleet":
            out += ["### A host entry of `hosts` (a table)", "", _intro(FleetHost), ""]
            out += [*_table(_plain_keys("fleet.hosts", FleetHost, HOST_KEYS, "fleet.hosts")), ""]
    return "\n".join(out).rstrip() + "\n"


def _groups() -> list[str]:
    live, why = reload_effect("groups.NAME.pool")
    pool = KeyDoc(
        "groups.NAME.pool",
        "string",
        "`[azure] pool`",
        "",
        live,
        why,
        "The group's agent pool.",
    )
    return [
        "## [groups.NAME]",
        "",
        "Several agent groups on one host: each `[groups.NAME]` table takes every `[agents]`",
        "key (with `[agents]` values as its defaults) and `pool`. `reload` treats a group's",
        "keys as `[agents]` keys; a group added starts, a group removed drains.",
        "",
        *_table([pool]),
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the reference, or write it to the file named (docs/configuration.md)."""
    args = sys.argv[1:] if argv is None else list(argv)
    text = render()
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
