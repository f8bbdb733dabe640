"""The configuration file on disk: reading TOML, rendering it, writing it safely, and
`ConfigError`, which points at a place in it (file, dotted key) and says what to do.

Reading turns every failure (missing file, unreadable, not UTF-8, not TOML) into
a `ConfigError` that says what to do. Writing is atomic (temp file in the same
directory, fsync, rename), keeps the previous good file as ``config.toml.bak``
and never silently replaces a file the operator broke by hand: their edits
would be lost. Validation lives in `loader` / `validate`.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import tomli_w

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.files import atomic_write


class Document(Protocol):
    """What `config_to_toml` renders: a `config.Config` (named here without importing it,
    so that ``config`` can import this module and not the other way round).
    """

    @property
    def azure(self) -> Any:
        """``[azure]``."""

    @property
    def agents(self) -> Any:
        """``[agents]`` with its volumes."""

    @property
    def supervisor(self) -> Any:
        """``[supervisor]``."""

    @property
    def keys(self) -> Mapping[str, str]:
        """``[keys]``."""

    @property
    def groups(self) -> Sequence[Any]:
        """``[groups.NAME]`` tables (`config_model.AgentGroup`)."""

    @property
    def fleet(self) -> Any:
        """``[fleet]`` (its ``to_table()`` is written when not empty)."""


HEADER = (
    "# gpuci-tui configuration, written by gpuci-tui; edit freely (every key: docs/configuration.md).\n"
    "# The PAT is not in this file: it lives in the OS keyring (gpuci-tui token set).\n"
)
SETUP_HINT = 'run "gpuci-tui setup" to write a new one'
MAX_BYTES = 1024 * 1024
"""A config file is a few hundred bytes; anything this big is the wrong file."""


class ConfigError(GpuciError):
    """A configuration value, or the file itself, is wrong.

    Attributes:
        path: The file, when the problem comes from one.
        key: Dotted key, e.g. ``agents.count`` or ``agents.volumes[1].host`` (0-based index).
        problem: What is wrong and what to do, e.g. ``must be a whole number from 1 to 64,
            got "two"``.
        allowed: The allowed values or keys when there is a fixed set (for the UI).
    """

    def __init__(
        self,
        problem: str,
        *,
        key: str | None = None,
        path: Path | None = None,
        allowed: Sequence[str] = (),
    ) -> None:
        self.problem = problem
        self.key = key
        self.path = path
        self.allowed = tuple(allowed)
        super().__init__(problem)

    def __str__(self) -> str:
        return ": ".join([*(str(p) for p in (self.path, self.key) if p is not None), self.problem])

    @property
    def errors(self) -> list[ConfigError]:
        """Every problem this error stands for: itself (`ConfigErrors` holds several)."""
        return [self]

    def with_path(self, path: Path | None) -> ConfigError:
        """A copy of this error that names ``path``."""
        return ConfigError(self.problem, key=self.key, path=path, allowed=self.allowed)


class ConfigErrors(ConfigError):
    """Several problems found at once (all of a file's); ``str()`` gives one per line."""

    def __init__(self, errors: Sequence[ConfigError], *, path: Path | None = None) -> None:
        self._errors = [e.with_path(path) if path is not None else e for e in errors]
        super().__init__(f"{len(self._errors)} problems", path=path)

    @property
    def errors(self) -> list[ConfigError]:
        """The individual problems, section by section."""
        return list(self._errors)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self._errors)

    def with_path(self, path: Path | None) -> ConfigError:
        """A copy whose problems all name ``path``."""
        return ConfigErrors(self._errors, path=path)


def raise_if_any(errors: Sequence[ConfigError], path: Path | None = None) -> None:
    """Raise nothing, the single error, or one `ConfigErrors` holding all of them."""
    if len(errors) == 1:
        raise errors[0].with_path(path) if path is not None else errors[0]
    if errors:
        raise ConfigErrors(errors, path=path)


def show(value: object) -> str:
    """A value as it would be written in TOML, shortened, for "got ..." in messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:56] + '…"'
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return "nothing" if value is None else f"a {type(value).__name__}"


def is_ascii_number(text: str) -> bool:
    """Whether ``text`` is a whole number in ASCII digits.

    ``str.isdigit`` also accepts "²" or "٣", which ``int`` then refuses (or
    reads as another number): ports and slot numbers take 0-9 only.
    """
    return text.isascii() and text.isdigit()


def check_not_writable_by_others(path: Path, info: os.stat_result) -> None:
    """Refuse a config file another user could have written, or its directory.

    Whoever can write the configuration decides what the agents mount (the
    Docker socket, the host's root) and which commands the fleet console runs:
    it is obeyed only if it and its directory belong to us (or root) and only we
    can write them. A world-writable directory with the sticky bit (``/tmp``)
    is accepted: nobody else can replace a file of ours in it.

    Raises:
        ConfigError: with the ``chmod`` or ``chown`` that fixes it.
    """
    me = os.geteuid()
    if info.st_uid not in (me, 0):
        raise ConfigError(
            f"belongs to uid {info.st_uid}, not to you (uid {me}) or root: another user could "
            f"change what your agents run; take it over (chown {me} {path}) or use a copy of "
            "your own",
            path=path,
        )
    if stat.S_IMODE(info.st_mode) & 0o022:
        raise ConfigError(
            f"can be written by other users (mode {stat.S_IMODE(info.st_mode):04o}): they could "
            f"change what your agents mount and run; run: chmod go-w {path}",
            path=path,
        )
    parent = path.parent
    try:
        dinfo = parent.stat()
    except OSError:
        return
    sticky = bool(dinfo.st_mode & stat.S_ISVTX)
    if dinfo.st_uid not in (me, 0) and not sticky:
        raise ConfigError(
            f"is in {parent}, which belongs to uid {dinfo.st_uid}: that user could replace the "
            "file; keep the configuration in a directory of your own",
            path=path,
        )
    if stat.S_IMODE(dinfo.st_mode) & 0o022 and not sticky:
        raise ConfigError(
            f"is in {parent}, which other users can write (mode "
            f"{stat.S_IMODE(dinfo.st_mode):04o}): they could replace the file; run: "
            f"chmod go-w {parent}",
            path=path,
        )


def read_toml(path: Path) -> dict[str, Any]:
    """Read and parse a TOML file.

    Raises:
        ConfigError: naming ``path``: missing (how to create one), unreadable,
            not UTF-8 or not valid TOML (with the line and column).
    """
    try:
        with path.open("rb") as handle:
            check_not_writable_by_others(path, os.fstat(handle.fileno()))
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(
            'no configuration file here; create one with "gpuci-tui setup" '
            "(or point --config or GPUCI_CONFIG at another file)",
            path=path,
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({os_reason(exc)})", path=path) from None
    if len(data) > MAX_BYTES:
        raise ConfigError("is larger than 1 MiB, so it is not a gpuci-tui config file", path=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"line {line}: is not UTF-8 text; fix it or {SETUP_HINT}", path=path
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's error has no line attributes; the position ends its message.
        message = str(exc)
        at = re.search(r"\s*\(at (line \d+, column \d+|end of document)\)$", message)
        where = f"{at[1]}: " if at else ""
        reason = message[: at.start()] if at else message
        raise ConfigError(
            f"{where}not valid TOML ({reason}); fix that line, or move the file away and "
            f"{SETUP_HINT}",
            path=path,
        ) from None
    except RecursionError:
        # tomllib recurses per nesting level: thousands of [[ or { are no configuration.
        raise ConfigError(
            "nests arrays or tables thousands of levels deep, so it is not a gpuci-tui "
            f"config file; move it away and {SETUP_HINT}",
            path=path,
        ) from None


def config_to_toml(config: Document) -> str:
    """Render a configuration as the TOML text `save_config` writes.

    Optional values equal to their defaults are left out, so a later release's
    better defaults reach files written by this one; ``name_prefix`` is always
    written so that renaming the host never renames the agents.
    """
    agents = _agents_toml(config.agents, always=("count", "image", "name_prefix", "network"))
    chunks = [HEADER, "\n", tomli_w.dumps({"azure": _changed(config.azure)})]
    chunks += ["\n", tomli_w.dumps({"agents": agents})]
    chunks += _volumes_toml("agents", config.agents.volumes)
    for group in config.groups:
        # A group writes what differs from [agents] (its defaults), and always its count
        # and name prefix, so that a later change of [agents] never renames its agents.
        table = _agents_toml(group.agents, always=("count", "name_prefix"), base=config.agents)
        if group.pool != config.azure.pool:
            table = {"pool": group.pool, **table}
        chunks += ["\n", tomli_w.dumps({"groups": {group.name: table}})]
        if group.agents.volumes != config.agents.volumes:
            chunks += _volumes_toml(f"groups.{group.name}", group.agents.volumes)
    for name in ("supervisor", "gpu", "history", "metrics", "docker"):
        table = _changed(getattr(config, name), skip_defaults=True)
        if table:
            chunks += ["\n", tomli_w.dumps({name: table})]
    if config.keys:
        chunks += ["\n", tomli_w.dumps({"keys": dict(config.keys)})]
    fleet = config.fleet.to_table()
    if fleet:
        chunks += ["\n", tomli_w.dumps({"fleet": fleet})]
    return "".join(chunks)


def _agents_toml(agents: Any, *, always: tuple[str, ...], base: Any = None) -> dict[str, Any]:
    """An agents table: ``gpu_ids`` folded into ``gpus``, volumes written apart."""
    out = _changed(agents, always=always, skip_defaults=base is None)
    if base is not None:
        # Against the [agents] defaults, not the built-in ones: a group that sets a
        # built-in default where [agents] does not must still say so.
        out = {
            k: v for k, v in out.items() if k in always or getattr(agents, k) != getattr(base, k)
        }
    out.pop("volumes", None)
    # The ids are part of the GPU setting: a change of either writes the whole setting.
    if "gpus" in out or "gpu_ids" in out or base is None:
        out["gpus"] = gpus_to_toml(agents.gpus, agents.gpu_ids)
    out.pop("gpu_ids", None)
    if "gpu_admission" in out:
        out["gpu_admission"] = agents.gpu_admission.to_toml()
    if out.get("standby_schedule") is not None:
        out["standby_schedule"] = agents.standby_schedule.to_toml()
    return out


def gpus_to_toml(policy: str, ids: Sequence[str]) -> object:
    """The TOML value of a GPU setting (the inverse of `parse_gpus`)."""
    if policy == "list":
        return list(ids)
    if policy == "per-agent" and ids:
        return {"per_agent": list(ids)}
    return policy


def _volumes_toml(where: str, volumes: Any) -> list[str]:
    # tomli_w would inline short tables; the documented format uses [[agents.volumes]].
    return [
        f"\n[[{where}.volumes]]\n{tomli_w.dumps(_changed(volume, always=('env',)))}"
        for volume in volumes
    ]


def _changed(
    obj: Any, *, always: tuple[str, ...] = (), skip_defaults: bool = True
) -> dict[str, Any]:
    """The fields of a config dataclass worth writing (TOML has no null: None is left out)."""
    out = {}
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        default = field.default
        if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        if value is None or (skip_defaults and field.name not in always and value == default):
            continue
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def write_config_text(path: Path, text: str, *, overwrite_broken: bool = False) -> None:
    """Write ``text`` to ``path`` atomically, with mode 0600, keeping a backup.

    The directory is created with mode 0700 when missing. A symlinked config is
    written through (the link stays). An unchanged file is not rewritten, so
    ``.bak`` keeps the last different version.

    Args:
        path: The config file.
        text: Its new content.
        overwrite_broken: Replace an existing file that is not valid TOML; it is
            kept as ``config.toml.broken`` rather than lost.

    Raises:
        ConfigError: the directory cannot be created or written (with the
            reason), or the existing file is broken and ``overwrite_broken`` is
            False.
    """
    target = path.resolve() if path.is_symlink() else path
    directory = target.parent
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the directory {directory} ({os_reason(exc)})", path=path
        ) from None
    if target.is_dir():
        raise ConfigError("is a directory; choose a file name, e.g. config.toml", path=path)
    previous = _read_existing(target, path)
    data = text.encode("utf-8")
    if previous == data:
        return
    if previous is not None:
        if _parses(previous):
            _atomic_write(target.with_name(target.name + ".bak"), previous, path)
        elif overwrite_broken:
            _atomic_write(target.with_name(target.name + ".broken"), previous, path)
        else:
            raise ConfigError(
                "exists but is not valid TOML, so it was not replaced (your edits would be lost); "
                "fix it or move it away, then save again",
                path=path,
            )
    _atomic_write(target, data, path)


def _read_existing(target: Path, path: Path) -> bytes | None:
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(
            f"the existing file cannot be read ({os_reason(exc)})", path=path
        ) from None


def _parses(data: bytes) -> bool:
    try:
        tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return True


def _atomic_write(target: Path, data: bytes, path: Path) -> None:
    """`atomic_write` (0600), its failure said as a config error with the way out."""
    try:
        atomic_write(target, data, mode=0o600)
    except OSError as exc:
        raise ConfigError(
            f"cannot write in the directory {target.parent} ({os_reason(exc)}); "
            "check its permissions and the free space, or choose another file with --config",
            path=path,
        ) from None


def os_reason(exc: OSError) -> str:
    """``Permission denied, EACCES``: the errno text and name, never a traceback."""
    name = errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or exc.__class__.__name__
    return f"{text}, {name}" if name else text
