"""Which CUDA agent image can this host's NVIDIA driver run?

The rules (NVIDIA's CUDA compatibility documentation):

- A driver supports every CUDA version up to the one it reports
  (``nvmlSystemGetCudaDriverVersion``, the "CUDA Version" of nvidia-smi). An
  image built for CUDA X.Y is fully supported when that version is ≥ X.Y.
- Since CUDA 11, *minor-version compatibility* lets a program built with any
  toolkit of a major family run on a driver that meets the family minimum
  (13.x → 580, 12.x → 525, 11.x → 450), with some features missing (e.g. PTX
  JIT of newer code). But the image's ``NVIDIA_REQUIRE_CUDA=cuda>=X.Y ...``
  makes nvidia-container-cli refuse to start the container unless
  ``NVIDIA_DISABLE_REQUIRE=1`` is set: this is the usual "requirement error:
  unsatisfied condition: cuda>=12.8" when the driver is a little too old.
- Below the family minimum nothing runs: update the driver or pick an older tag.

Tags are parsed from nvidia/cuda tags (``12.4.1-runtime-ubuntu22.04``), our
own (``amd64-ubuntu24.04-cuda12.8``, see dockeragent/matrix.txt) and the
common ``cuda12.1`` / ``cu121`` spellings of other projects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

CudaVersion = tuple[int, int]

KNOWN_TAGS: tuple[str, ...] = (
    "amd64-ubuntu22.04-cuda12.4",
    "amd64-ubuntu22.04-cuda12.4-devel",
    "amd64-ubuntu22.04-cuda12.8",
    "amd64-ubuntu24.04-cuda12.8",
    "amd64-ubuntu24.04-cuda12.8-devel",
    "amd64-ubuntu24.04-cuda12.9",
    "amd64-ubuntu24.04-cuda12.9-devel",
    "amd64-ubuntu24.04-cuda12.9-cudnn-devel",
    "amd64-ubuntu24.04-cuda13.0",
    "amd64-ubuntu24.04-cuda13.0-devel",
)
"""Tags of the dockeragent build matrix (dockeragent/matrix.txt; a test keeps them equal)."""

_FAMILY_MINIMUM: dict[int, int] = {13: 580, 12: 525, 11: 450}
"""Minimum driver (major) of each CUDA family under minor-version compatibility."""

# Before CUDA 11 there is no minor-version compatibility: each release needs its own driver.
_EXACT_MINIMUM: dict[CudaVersion, int] = {(10, 2): 440, (10, 1): 418, (10, 0): 410, (9, 2): 396}

# First Linux driver branch of each CUDA release (CUDA toolkit release notes, "CUDA
# Toolkit and Corresponding Driver Versions"): used when NVML cannot report the
# CUDA version itself. 12.7 was never released.
# fmt: off
_DRIVER_CUDA: tuple[tuple[int, CudaVersion], ...] = (
    (580, (13, 0)), (575, (12, 9)), (570, (12, 8)), (560, (12, 6)), (555, (12, 5)),
    (550, (12, 4)), (545, (12, 3)), (535, (12, 2)), (530, (12, 1)), (525, (12, 0)),
    (520, (11, 8)), (515, (11, 7)), (510, (11, 6)), (495, (11, 5)), (470, (11, 4)),
    (465, (11, 3)), (460, (11, 2)), (455, (11, 1)), (450, (11, 0)),
)
# fmt: on

# nvidia/cuda style: the tag starts with the version and names a flavor. The
# major must look like CUDA's (9-19) so "2.3.0-runtime" of another project is no match.
_NVIDIA_TAG = re.compile(r"^(9|1\d)\.(\d{1,2})(?:\.\d+)?-(?:base|runtime|devel|cudnn)")
_CUDA_WORD = re.compile(r"(?:^|[-_.])cuda[-_]?(\d{1,2})\.(\d{1,2})(?:\.\d+)?(?=$|[-_])")
_CU_WORD = re.compile(r"(?:^|[-_.])cu(\d{2})(\d)(?=$|[-_.])")
_REQUIRE_CUDA = re.compile(r"^cuda>=(\d+)\.(\d+)")


def _fmt(v: CudaVersion) -> str:
    return f"{v[0]}.{v[1]}"


def tag_of(image: str) -> str:
    """The tag part of an image reference (``repo/name:tag`` → ``tag``); a bare tag as is."""
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else last


def cuda_of_tag(tag: str) -> CudaVersion | None:
    """The CUDA (major, minor) an image tag is built for, or None when it does not say.

    Args:
        tag: A tag (``12.4.1-runtime-ubuntu22.04``, ``amd64-ubuntu24.04-cuda12.8``,
            ``2.3.0-cuda12.1-cudnn8-runtime``, ``cu121``) or a full image reference.
    """
    tag = tag_of(tag.strip())
    # An explicit "cuda12.1" wins: "2.3.0-cuda12.1-cudnn8-runtime" is PyTorch 2.3.0.
    for pattern in (_CUDA_WORD, _CU_WORD, _NVIDIA_TAG):
        match = pattern.search(tag)
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def driver_major(driver_version: str | None) -> int | None:
    """``"550.54.15"`` → 550; None when absent or unparseable."""
    if not driver_version:
        return None
    match = re.match(r"\s*(\d+)", driver_version)
    return int(match.group(1)) if match else None


def cuda_of_driver(driver_version: str | None) -> CudaVersion | None:
    """The highest CUDA a Linux driver version supports (None for pre-450 or unparseable)."""
    major = driver_major(driver_version)
    if major is None:
        return None
    for first_driver, cuda in _DRIVER_CUDA:
        if major >= first_driver:
            return cuda
    return None


def required_driver(cuda: CudaVersion) -> int:
    """Minimum driver (major version) that runs CUDA ``cuda`` code at all.

    Raises:
        ValueError: for a CUDA version this table does not know (newer than 13.x
            or older than 9.2).
    """
    if cuda[0] in _FAMILY_MINIMUM:
        return _FAMILY_MINIMUM[cuda[0]]
    if cuda in _EXACT_MINIMUM:
        return _EXACT_MINIMUM[cuda]
    raise ValueError(f"No driver requirement is known for CUDA {_fmt(cuda)}.")


class Verdict(StrEnum):
    """How well an image's CUDA fits the host's driver."""

    OK = "ok"
    """The driver supports the image's CUDA version fully."""
    MINOR_COMPAT = "minor-compat"
    """Same major family, driver older than the image: runs with limits, and only
    when the image's NVIDIA_REQUIRE_CUDA check is disabled."""
    TOO_OLD = "too-old"
    """The driver cannot run this image."""
    UNKNOWN = "unknown"
    """No GPU/driver seen, or the image's CUDA version is unknown."""


@dataclass(frozen=True)
class Compatibility:
    """The answer of `check_compatibility`, with a message for the operator."""

    verdict: Verdict
    message: str
    image_cuda: CudaVersion | None = None
    driver_cuda: CudaVersion | None = None
    required_driver: int | None = None

    @property
    def ok(self) -> bool:
        """Whether the image is fully supported."""
        return self.verdict is Verdict.OK


def _host_words(driver_version: str | None, driver_cuda: CudaVersion | None) -> str:
    if driver_version and driver_cuda:
        return f"{driver_version} (CUDA {_fmt(driver_cuda)})"
    if driver_version:
        return driver_version
    if driver_cuda:
        return f"with CUDA {_fmt(driver_cuda)}"
    return "(unknown)"


def check_compatibility(
    image_cuda: CudaVersion | None,
    driver_cuda: CudaVersion | None,
    driver_version: str | None,
    *,
    require_disabled: bool = False,
) -> Compatibility:
    """Decide whether this host's driver can run an image built for ``image_cuda``.

    Args:
        image_cuda: From `cuda_of_tag` or `RequireCuda.cuda`; None if unknown.
        driver_cuda: The driver's CUDA version (`GpuHostInfo.cuda_driver_version`).
        driver_version: The driver version string, e.g. ``"550.54.15"``.
        require_disabled: The container gets ``NVIDIA_DISABLE_REQUIRE=1``.
    """
    if image_cuda is None:
        return Compatibility(
            Verdict.UNKNOWN,
            "Cannot tell which CUDA version this image needs (its tag names none and it "
            "sets no NVIDIA_REQUIRE_CUDA); make sure it matches the driver yourself.",
            driver_cuda=driver_cuda,
        )
    img = _fmt(image_cuda)
    try:
        need = required_driver(image_cuda)
    except ValueError:
        need = None
    if driver_cuda is None:
        driver_cuda = cuda_of_driver(driver_version)
    if driver_cuda is None and driver_major(driver_version) is None:
        return Compatibility(
            Verdict.UNKNOWN,
            f"No NVIDIA driver detected, so the image's CUDA {img} cannot be checked"
            + (f" (it needs driver ≥ {need})." if need else "."),
            image_cuda=image_cuda,
            required_driver=need,
        )
    host = _host_words(driver_version, driver_cuda)
    if driver_cuda is not None and driver_cuda >= image_cuda:
        return Compatibility(
            Verdict.OK,
            f"Image CUDA {img} runs on driver {host}.",
            image_cuda,
            driver_cuda,
            need,
        )
    major = driver_major(driver_version)
    same_family = driver_cuda is not None and driver_cuda[0] == image_cuda[0]
    family_met = (
        need is not None
        and image_cuda[0] >= 11
        and ((major is not None and major >= need) or (major is None and same_family))
    )
    if not family_met:
        if need is None:
            advice = (
                f"Choose an image for CUDA {_fmt(driver_cuda)} or older." if driver_cuda else ""
            )
            message = f"Image CUDA {img} is newer than driver {host} supports. {advice}".strip()
        else:
            older = f"a cuda{driver_cuda[0]}.x" if driver_cuda else "an older CUDA"
            message = (
                f"Image CUDA {img} needs NVIDIA driver ≥ {need}; this host has {host}. "
                f"Choose {older} tag or update the driver."
            )
        return Compatibility(Verdict.TOO_OLD, message, image_cuda, driver_cuda, need)
    exact = f"a cuda{_fmt(driver_cuda)}" if driver_cuda else "an older"
    if require_disabled:
        message = (
            f"Image CUDA {img} is newer than driver {host}; NVIDIA_DISABLE_REQUIRE=1 lets it "
            "start under minor-version compatibility (some features, e.g. PTX JIT, fail). "
            f"{exact[0].upper()}{exact[1:]} tag avoids the limits."
        )
    else:
        message = (
            f"Image CUDA {img} is newer than driver {host}: programs would run under "
            "minor-version compatibility, but the container will refuse to start "
            f"(NVIDIA_REQUIRE_CUDA) unless NVIDIA_DISABLE_REQUIRE=1 is set. Choose {exact} "
            "tag or update the driver."
        )
    return Compatibility(Verdict.MINOR_COMPAT, message, image_cuda, driver_cuda, need)


@dataclass(frozen=True)
class TagChoice:
    """The result of `choose_tag`."""

    tag: str | None
    """The chosen tag, or None when no tag fits."""
    compatibility: Compatibility | None
    explanation: str
    alternatives: tuple[str, ...] = ()
    """Other fully compatible tags, best first."""


def choose_tag(
    available_tags: Iterable[str],
    driver_cuda: CudaVersion | None,
    prefer: Sequence[str] = (),
    *,
    driver_version: str | None = None,
) -> TagChoice:
    """Pick the best tag for this host from ``available_tags``.

    Fully compatible tags win (the highest CUDA the driver supports); failing
    that, the highest tag usable under minor-version compatibility. Among equal
    CUDA versions, tags containing more of the ``prefer`` words (e.g.
    ``"ubuntu24.04"``, ``"devel"``) win, then the plain (runtime) tag.

    Args:
        available_tags: Tags the caller knows (local images plus `KNOWN_TAGS`).
        driver_cuda: The driver's CUDA version; None when no GPU is visible.
        prefer: Words that break ties between tags of the same CUDA version.
        driver_version: The driver version string, for the family-minimum rule.
    """
    parsed = sorted({(cuda, tag) for tag in available_tags if (cuda := cuda_of_tag(tag))})
    if not parsed:
        return TagChoice(None, None, "None of the tags names a CUDA version (e.g. cuda12.8).")

    def rank(item: tuple[CudaVersion, str], closest: bool) -> tuple[int, int, int, int, str]:
        (major, minor), tag = item
        score = sum(word in tag for word in prefer)
        if closest:  # the lowest version is the one nearest the driver
            major, minor = -major, -minor
        return major, minor, score, -len(tag), tag

    checked = {item: check_compatibility(item[0], driver_cuda, driver_version) for item in parsed}
    for verdict in (Verdict.OK, Verdict.MINOR_COMPAT, Verdict.UNKNOWN):
        # Under minor-version compatibility the tag closest to the driver loses
        # the fewest features; otherwise the newest CUDA wins.
        closest = verdict is Verdict.MINOR_COMPAT
        fits = sorted(
            (item for item, c in checked.items() if c.verdict is verdict),
            key=lambda item: rank(item, closest),
            reverse=True,
        )
        if not fits:
            continue
        best = fits[0]
        compat = checked[best]
        if verdict is Verdict.OK:
            why = f"{best[1]}: the newest CUDA ({_fmt(best[0])}) this driver fully supports."
        elif verdict is Verdict.MINOR_COMPAT:
            why = f"{best[1]}: no tag is fully supported. {compat.message}"
        else:
            why = f"{best[1]}: no GPU detected, so the newest tag was picked unchecked."
        alternatives = tuple(tag for _, tag in fits[1:]) if verdict is Verdict.OK else ()
        return TagChoice(best[1], compat, why, alternatives)
    oldest_cuda, oldest = parsed[0]
    host = _host_words(driver_version, driver_cuda)
    need = checked[(oldest_cuda, oldest)].required_driver
    return TagChoice(
        None,
        checked[(oldest_cuda, oldest)],
        f"No tag fits driver {host}: the oldest, {oldest} (CUDA {_fmt(oldest_cuda)}), "
        f"needs driver ≥ {need}. Update the driver, or build an image for CUDA "
        f"{_fmt(driver_cuda) if driver_cuda else 'your driver'} with dockeragent/build.sh.",
    )


def suggest_image(
    repo: str,
    driver_cuda: CudaVersion | None,
    ubuntu: str = "24.04",
    arch: str = "amd64",
    *,
    flavor: str = "runtime",
    driver_version: str | None = None,
) -> str:
    """The `KNOWN_TAGS` image to propose in the setup wizard, as ``repo:tag``.

    Prefers the requested Ubuntu, architecture and flavor (``runtime``,
    ``devel``, ``cudnn-devel``); when nothing fits the driver it still returns
    the oldest candidate, so always show `check_compatibility` next to it.
    """
    suffix = "" if flavor == "runtime" else f"-{flavor}"
    flavored = [t for t in KNOWN_TAGS if re.search(rf"cuda\d+\.\d+{re.escape(suffix)}$", t)]
    # Tags start with the architecture; build.sh --arch builds any row of the
    # matrix for another architecture under the same name pattern.
    in_arch = list(dict.fromkeys(f"{arch}-{t.split('-', 1)[1]}" for t in flavored or KNOWN_TAGS))
    candidates = [t for t in in_arch if f"-ubuntu{ubuntu}-" in t] or in_arch
    choice = choose_tag(candidates, driver_cuda, driver_version=driver_version)
    tag = choice.tag or min(candidates, key=lambda t: cuda_of_tag(t) or (0, 0))
    return f"{repo}:{tag}"


@dataclass(frozen=True)
class RequireCuda:
    """An image's ``NVIDIA_REQUIRE_CUDA``, as nvidia-container-cli reads it."""

    raw: str
    cuda: CudaVersion | None
    """The ``cuda>=X.Y`` minimum, None when the variable has none."""
    alternatives: tuple[str, ...] = ()
    """The other OR-ed clauses (``brand=tesla,driver>=470,driver<471``): driver
    branches allowed through NVIDIA's forward-compatibility package."""
    disabled: bool = False
    """``NVIDIA_DISABLE_REQUIRE`` is set: the check is skipped."""


def _env_map(env: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    if isinstance(env, Mapping):
        return dict(env)
    out: dict[str, str] = {}
    for item in env:
        key, _, value = item.partition("=")
        out[key] = value
    return out


def require_cuda_of_env(env: Mapping[str, str] | Sequence[str]) -> RequireCuda | None:
    """Parse ``NVIDIA_REQUIRE_CUDA`` from an image's environment.

    Args:
        env: A mapping, or Docker's ``Config.Env`` list of ``KEY=value`` strings.

    Returns:
        None when the image sets no ``NVIDIA_REQUIRE_CUDA`` (and no
        ``CUDA_VERSION`` to fall back on). Space-separated clauses are OR-ed
        and comma-separated conditions AND-ed, as in libnvidia-container.
    """
    values = _env_map(env)
    disabled = values.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() not in ("", "0", "false")
    raw = values.get("NVIDIA_REQUIRE_CUDA", "").strip()
    if not raw:
        # Images without the variable (rare) usually still carry CUDA_VERSION.
        version = re.match(r"(\d+)\.(\d+)", values.get("CUDA_VERSION", ""))
        if version is None:
            return None
        found = int(version.group(1)), int(version.group(2))
        return RequireCuda(raw="", cuda=found, disabled=disabled)
    cuda: CudaVersion | None = None
    alternatives = []
    for clause in raw.split():
        match = _REQUIRE_CUDA.match(clause)
        if match and cuda is None and "," not in clause:
            cuda = int(match.group(1)), int(match.group(2))
        else:
            alternatives.append(clause)
    return RequireCuda(raw=raw, cuda=cuda, alternatives=tuple(alternatives), disabled=disabled)


def image_cuda(
    image: str, env: Mapping[str, str] | Sequence[str] | None = None
) -> CudaVersion | None:
    """The CUDA version an image needs: its environment first, else its tag."""
    if env is not None:
        req = require_cuda_of_env(env)
        if req is not None and req.cuda is not None:
            return req.cuda
    return cuda_of_tag(image)


def driver_for(cuda: CudaVersion) -> int | None:
    """The first Linux driver branch that fully supports CUDA ``cuda`` (None: unknown).

    ``(12, 4)`` → 550: the driver to upgrade to so that an image built for 12.4
    starts without ``NVIDIA_DISABLE_REQUIRE``.
    """
    fits = [driver for driver, supported in _DRIVER_CUDA if supported >= cuda]
    return min(fits) if fits else None
