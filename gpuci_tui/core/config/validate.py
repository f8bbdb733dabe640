"""The rules for configuration values, shared by the file loader and the setup wizard.

Every rule lives here once: the loader feeds it raw TOML values, the wizard
feeds it what the operator typed, and `loader.validate_config` feeds it a
`Config` built in memory, so all three get the same messages. The rules of a
dataset mount are in `volumes`. A validator
returns the normalised value or raises `ConfigError` naming the dotted key,
what is wrong and what to do. Nothing here knows the config dataclasses.
"""

from __future__ import annotations

import difflib
import math
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.org_url import OrgUrlProblem, parse_org_url
from gpuci_tui.core.models import MAX_SLOTS

#: ``agents.count``'s upper bound: the one slot limit, `models.MAX_SLOTS`.
MAX_AGENTS = MAX_SLOTS
POOL_NAME_MAX = 256
CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""C0, DEL and C1: never part of a name; in a terminal they are commands, not text."""
NAME_PREFIX_MAX = 50
GPU_POLICIES = ("all", "none", "per-agent", "mig")
#: The most GPUs one slot may hold (an 8-GPU NVLink board).
MAX_GPUS_PER_SLOT = 8
NETWORK_MODES = ("bridge", "host")
PAT_ADVICE = 'the PAT lives in the OS keyring: store it with "gpuci-tui token set"'
DOCKER_MIN_MEMORY = 6 * 1024**2
"""Docker refuses a memory limit below 6 MiB."""

# Key names that show someone tried to put a secret in the file.
_SECRET_KEY = re.compile(
    r"^(pat|token|password|passwd|secret|credentials?)$|[_.-](pat|token|password|secret)$", re.I
)
_NAME_PREFIX = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
# Docker's reference grammar (distribution/reference): [registry[:port]/]path[:tag][@digest].
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REF = re.compile(
    rf"(?:{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?/)?{_PART}(?:/{_PART})*(?::\w[\w.-]{{0,127}})?"
    r"(?:@sha256:[0-9a-f]{64})?"
)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""The one digest Docker pins images by: the sha256 of the manifest, 64 lowercase hex digits."""
_MEM_LIMIT = re.compile(r"(\d+(?:\.\d+)?)([kmg]?)b?", re.I)
_MEM_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def suggest(word: str, choices: Iterable[str]) -> str:
    """``did you mean "x"? `` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f'did you mean "{close[0]}"? ' if close else ""


def as_text(value: object, key: str, what: str = "a string") -> str:
    """The value with surrounding spaces dropped, or ConfigError if it is not a string."""
    if not isinstance(value, str):
        raise ConfigError(f"must be {what} in quotes, got {show(value)}", key=key)
    return value.strip()


def _choice(value: object, key: str, choices: Sequence[str]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    listed = ", ".join(f'"{c}"' for c in choices)
    hint = suggest(value, choices) if isinstance(value, str) else ""
    problem = f"must be one of {listed}, got {show(value)}" + (f"; {hint.strip()}" if hint else "")
    raise ConfigError(problem, key=key, allowed=choices)


def _whole(value: object, key: str, low: int, high: int | None = None) -> int:
    # bool is an int subclass in Python, but `count = true` is a mistake, not 1.
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ConfigError(f"must be a whole number {span}, got {show(value)}", key=key)
    return value


def check_keys(table: Mapping[str, Any], where: str, allowed: Sequence[str]) -> list[ConfigError]:
    """Problems with the key names of one table: unknown ones (with a suggestion), PAT-like ones.

    Args:
        table: The table as read from TOML.
        where: Its dotted name (``""`` for the top level, where keys are sections).
        allowed: The key names it may hold.
    """
    errors = []
    for name in table:
        key = f"{where}.{name}" if where else name
        if _SECRET_KEY.search(name):
            problem = (
                "a PAT or password must not be in the config file: delete this line; " + PAT_ADVICE
            )
            errors.append(ConfigError(problem, key=key))
        elif name not in allowed:
            kind = "key" if where else "section"
            listed = ", ".join(allowed if where else (f"[{a}]" for a in allowed))
            problem = f"unknown {kind}; {suggest(name, allowed)}allowed: {listed}"
            errors.append(ConfigError(problem, key=key, allowed=allowed))
    return errors


# --------------------------------------------------------------------------- [azure]


def validate_org_url(text: object) -> str:
    """Check an Azure DevOps organisation URL and return it normalised.

    Normalising lower-cases the scheme and host, drops a default port and trailing
    slashes, and turns ``https://ORG.visualstudio.com/DefaultCollection`` into
    ``https://ORG.visualstudio.com``. Plain ``http`` is accepted only for a server
    on this machine (the simulator): a PAT must never cross a network unencrypted.

    Raises:
        ConfigError: with key ``azure.url``.
    """
    key, example = "azure.url", "https://dev.azure.com/ORG"
    raw = as_text(text, key)
    try:
        return parse_org_url(raw).url
    except OrgUrlProblem as problem:
        raise ConfigError(_org_url_message(problem, example), key=key) from None


def _org_url_message(problem: OrgUrlProblem, example: str) -> str:
    """``problem`` worded for the ``azure.url`` key."""
    raw = problem.raw
    return {
        "empty": f'is empty; set your organisation URL, e.g. "{example}"',
        "spaces": f"must not contain spaces, got {show(raw)}",
        "no_scheme": f'must be a URL starting with https://, e.g. "{problem.fix}"; got {show(raw)}',
        "bad_port": f"is not a valid URL (bad host or port), got {show(raw)}",
        "credentials": f"must not contain a user name or password; {PAT_ADVICE}",
        "not_url": f'must be a URL starting with https://, e.g. "{example}"; got {show(raw)}',
        "query": f'must not contain "?" or "#"; use e.g. "{example}"',
        "insecure_http": "must use https:// (http:// is only allowed for a server on this "
        f'machine: 127.0.0.1, ::1 or localhost); use "{problem.fix}"',
        "missing_org": f'is missing the organisation; use "{example}"',
        "project_page": f'must be the organisation URL, not a project or page; use "{problem.fix}"',
        "bad_name": "has an invalid organisation name (letters, digits and inner hyphens, "
        f"at most 50), got {show(problem.segment)}",
    }[problem.kind]


def validate_pool(value: object) -> str:
    """Check the agent pool name (not empty; surrounding spaces are dropped)."""
    name = as_text(value, "azure.pool")
    if not name:
        raise ConfigError('is empty; set the agent pool name, e.g. "gpu"', key="azure.pool")
    control = CONTROL_CHARACTER.search(name)
    if control is not None:
        raise ConfigError(
            f"contains the control character U+{ord(control.group()):04X}; an agent pool name "
            'is printable text, e.g. "gpu"',
            key="azure.pool",
        )
    if len(name) > POOL_NAME_MAX:
        raise ConfigError(
            f"must be at most {POOL_NAME_MAX} characters, got {len(name)}", key="azure.pool"
        )
    return name


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
#: Shorter than this would remove a registration between the checks that see it go offline.
REMOVE_OFFLINE_MIN = 60.0


def validate_remove_offline_after(value: object) -> float | None:
    """``[azure] remove_offline_after``: a duration ("7d", "12h", "90m", or seconds), ≥ 1 minute.

    None (a `Config` checked again, with the setting off) stays None.

    Raises:
        ConfigError: with key ``azure.remove_offline_after``.
    """
    key = "azure.remove_offline_after"
    if value is None:
        return None
    example = 'e.g. "7d" (units s, m, h, d, w)'
    if isinstance(value, bool):
        raise ConfigError(f"must be a duration, {example}; got {show(value)}", key=key)
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = as_text(value, key).strip().lower()
        match = _DURATION.fullmatch(text)
        if match is None:
            raise ConfigError(f"must be a duration, {example}; got {show(value)}", key=key)
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not seconds >= REMOVE_OFFLINE_MIN or seconds == float("inf"):
        raise ConfigError(
            f"must be at least 1 minute (stale registrations are checked every hour), "
            f"{example}; got {show(value)}",
            key=key,
        )
    return seconds


#: The smallest ``max_requests_per_minute`` a daemon works under: a cycle of reads a
#: minute, the queue, and room left for the writes that take jobs in.
MIN_REQUESTS_PER_MINUTE = 10
MAX_REQUESTS_PER_MINUTE = 100_000


def validate_max_requests_per_minute(value: object) -> int | None:
    """``[azure] max_requests_per_minute``: a whole number from 10 (None: no cap).

    Raises:
        ConfigError: with key ``azure.max_requests_per_minute``.
    """
    if value is None:
        return None
    return _whole(
        value, "azure.max_requests_per_minute", MIN_REQUESTS_PER_MINUTE, MAX_REQUESTS_PER_MINUTE
    )


# --------------------------------------------------------------------------- [agents]


def validate_count(value: object) -> int:
    """Check the number of agent slots: a whole number from 1 to `MAX_SLOTS`."""
    return _whole(value, "agents.count", 1, MAX_AGENTS)


def validate_gpus_per_slot(value: object) -> int:
    """Check ``gpus_per_slot``: a whole number from 1 to `MAX_GPUS_PER_SLOT`."""
    return _whole(value, "agents.gpus_per_slot", 1, MAX_GPUS_PER_SLOT)


def check_gpu_count(count: int, gpus: str, gpu_count: int | None, per_slot: int = 1) -> None:
    """With ``gpus = "per-agent"`` each slot gets ``per_slot`` GPUs of its own.

    So the host must have ``count`` x ``per_slot`` GPUs.
    """
    if gpus != "per-agent" or gpu_count is None or count * per_slot <= gpu_count:
        return
    have = f"this host has {gpu_count} GPU{'' if gpu_count == 1 else 's'}"
    if per_slot > 1:
        fit = gpu_count // per_slot
        fix = f"lower count to {fit} or gpus_per_slot" if fit else "lower gpus_per_slot"
        raise ConfigError(
            f"is {count} with gpus_per_slot = {per_slot} ({count * per_slot} GPUs), "
            f"but {have}; {fix}",
            key="agents.count",
        )
    fix = f"lower count to {gpu_count} or use" if gpu_count > 0 else "use"
    raise ConfigError(
        f'is {count} with gpus = "per-agent", but {have}; {fix} gpus = "all" or "none"',
        key="agents.count",
    )


IMAGE_EXAMPLE = "registry.example.com/gpuci-agent:amd64-ubuntu24.04-cuda12.8"
"""A real-looking agent image (a tag dockeragent/build.sh builds) for every message that
shows one: valid itself, so it is never the value a message rejects."""
IMAGE_PLACEHOLDER = "REPO/IMAGE:TAG"
"""The wizard's placeholder, which a file copied by hand may still hold."""


def validate_image(value: object) -> str:
    """Check a container image reference: a tag or a pinned digest.

    ``[REGISTRY[:PORT]/]REPO[:TAG]`` (``registry.example:5000/gpu-agent:cuda12``) or
    ``REPO[:TAG]@sha256:<64 hex>`` (the image pinned by its manifest digest).
    """
    key = "agents.image"
    ref = as_text(value, key)
    if not ref:
        raise ConfigError(f'is empty; set the agent image, e.g. "{IMAGE_EXAMPLE}"', key=key)
    name, at, digest = ref.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        raise ConfigError(
            f"has a malformed digest {show(digest)}: a digest is sha256: and 64 lowercase hex "
            "(docker image inspect lists it under RepoDigests), e.g. "
            f'"{IMAGE_EXAMPLE.rsplit(":", 1)[0]}@sha256:<64 hex>"; or use a tag, "{IMAGE_EXAMPLE}"',
            key=key,
        )
    if ref == IMAGE_PLACEHOLDER:
        raise ConfigError(
            f'is still the placeholder {show(ref)}: name your agent image, e.g. "{IMAGE_EXAMPLE}"',
            key=key,
        )
    if len(ref) > 255 or not _IMAGE_REF.fullmatch(ref):
        name = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
        hint = "; repository names must be lowercase" if name != name.lower() else ""
        raise ConfigError(
            f'is not an image reference like "{IMAGE_EXAMPLE}"{hint}, got {show(ref)}', key=key
        )
    return ref


def validate_name_prefix(value: object) -> str:
    """Check the agent/container name prefix: ``[a-zA-Z0-9][a-zA-Z0-9_.-]*``, ≤ 50 chars."""
    key = "agents.name_prefix"
    name = as_text(value, key)
    if not name:
        raise ConfigError('is empty; set a short name such as the host name, e.g. "gpu01"', key=key)
    if len(name) > NAME_PREFIX_MAX:
        raise ConfigError(f"must be at most {NAME_PREFIX_MAX} characters, got {len(name)}", key=key)
    if not _NAME_PREFIX.fullmatch(name):
        raise ConfigError(
            "must start with a letter or digit and hold only letters, digits, '_', '.' and '-' "
            f"(it names containers and agents), got {show(name)}",
            key=key,
        )
    return name


def default_name_prefix(hostname: str | None = None) -> str:
    """The host's short name made valid as a name prefix (``gpuhost`` if nothing is left)."""
    short = (socket.gethostname() if hostname is None else hostname).split(".")[0]
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]+", "-", short).lstrip("_.-")[:NAME_PREFIX_MAX]
    return cleaned.rstrip("_.-") or "gpuhost"


def validate_network(value: object) -> str:
    """Check the container network mode: ``bridge`` or ``host``."""
    return _choice(value, "agents.network", NETWORK_MODES)


def validate_oom_score_adj(value: object) -> int:
    """Check the kernel OOM score adjustment of agent containers (-1000 to 1000)."""
    return _whole(value, "agents.oom_score_adj", -1000, 1000)


def validate_mem_limit(value: object) -> str | None:
    """Check a Docker memory limit such as ``"64g"`` (None: no limit)."""
    key = "agents.mem_limit"
    if value is None:
        return None
    text = as_text(value, key, 'a size like "64g"')
    match = _MEM_LIMIT.fullmatch(text)
    if not match:
        raise ConfigError(f'must be a size like "64g" (unit k, m or g), got {show(value)}', key=key)
    if float(match[1]) * _MEM_UNITS[match[2].lower()] < DOCKER_MIN_MEMORY:
        raise ConfigError(f'must be at least "6m" (Docker\'s minimum), got {show(value)}', key=key)
    return text


def validate_docker_socket(value: object) -> bool:
    """Check the opt-in Docker socket flag: true or false."""
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, got {show(value)}", key="agents.docker_socket")
    return value


#: Standby lanes per slot at the most (lanes ``b`` to ``h``; see `engine.standby_auto`).
MAX_STANDBY = 7


def validate_standby(value: object) -> bool | int | str:
    """Check the hot standby depth: true, false, a whole number of standbys or "auto"."""
    if isinstance(value, bool) or value == "auto":
        return value
    if isinstance(value, int) and 0 <= value <= MAX_STANDBY:
        return value
    raise ConfigError(
        f'must be true, false, a whole number from 0 to {MAX_STANDBY} or "auto", got {show(value)}',
        key="agents.standby",
    )


def validate_standby_bound(name: str, value: object) -> int:
    """Check ``standby_min`` or ``standby_max``: a whole number of standbys per slot."""
    return _whole(value, f"agents.{name}", 0, MAX_STANDBY)


def validate_max_agents(value: object) -> int | None:
    """Check the cap on a group's registered agents: a whole number of at least 1 (or none)."""
    return None if value is None else _whole(value, "agents.max_agents", 1)


# --------------------------------------------------------------------------- [supervisor]


def validate_supervisor(field: str, value: object) -> float | int:
    """Check one ``[supervisor]`` value: ``park_after``, ``canary_jobs`` ≥ 1, the others positive seconds."""
    key = f"supervisor.{field}"
    if field in ("park_after", "canary_jobs"):
        return _whole(value, key, 1)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(f"must be a positive number of seconds, got {show(value)}", key=key)
    return float(value)
