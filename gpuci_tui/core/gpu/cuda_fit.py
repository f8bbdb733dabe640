"""May a slot start its image on this driver? The CUDA check before every start.

An agent image declares the CUDA it needs in its configuration:
``NVIDIA_REQUIRE_CUDA`` (what nvidia-container-cli enforces when the container
starts), else ``CUDA_VERSION`` (nvidia/cuda's images set both), else the label
``io.gpuci.cuda`` that ``dockeragent/build.sh`` writes. The driver reports the
CUDA it supports through NVML (``nvmlSystemGetCudaDriverVersion_v2``). When
the driver is too old, nvidia-container-cli refuses the container ("requirement
error: unsatisfied condition: cuda>=12.4"), so every start would fail and the
slot would crash-loop and park: `refusal` says so beforehand, with the fix, and
the engine holds the slot instead (`steps.CudaChecked`).

Never refused: an image that declares nothing (a tag is a guess, not a
requirement), one with ``NVIDIA_DISABLE_REQUIRE`` (the check is switched off on
purpose), a host whose driver NVML cannot read, and an image whose
``NVIDIA_REQUIRE_CUDA`` has another clause the driver meets (nvidia/cuda's
``brand=tesla,driver>=535,driver<536``: data-centre GPUs of that branch run it
through the forward-compatibility package; the GPU's brand is not checked
here, so such an image is let through rather than a working pool stopped).

Pure: the caller reads the image (`DockerRuntime.image_config`) and the driver
(`GpuHostInfo`); nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuci_tui.core.gpu.imagechoice import (
    CudaVersion,
    Verdict,
    check_compatibility,
    cuda_of_driver,
    cuda_of_tag,
    driver_for,
    require_cuda_of_env,
    suggest_image,
)

CUDA_LABEL = "io.gpuci.cuda"
"""The label ``dockeragent/build.sh`` writes: the image's full CUDA version (``12.8.1``)."""

LABEL_SOURCE = f"label {CUDA_LABEL}"


_OUR_TAG = re.compile(
    r"^(?P<arch>[a-z0-9]+)-ubuntu(?P<ubuntu>[\d.]+)-cuda[\d.]+(?:-(?P<flavor>.+))?$"
)
_CONDITION = re.compile(r"^(driver|cuda)(>=|<=|>|<|=)([\d.]+)$")


@dataclass(frozen=True)
class CudaNeed:
    """What an image needs of the driver, as its configuration says."""

    cuda: CudaVersion
    source: str
    """Where it was read: ``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION`` or the label."""
    alternatives: tuple[str, ...] = ()
    """Other OR-ed clauses of ``NVIDIA_REQUIRE_CUDA`` (driver branches it also accepts)."""
    disabled: bool = False
    """``NVIDIA_DISABLE_REQUIRE`` is set: nvidia-container-cli checks nothing."""


@dataclass(frozen=True)
class DriverCuda:
    """The host's driver, as NVML reports it."""

    version: str | None
    """``535.104.05``; None when NVML could not say."""
    cuda: CudaVersion | None
    """The highest CUDA it supports; None when NVML could not say."""


def need_of(env: Mapping[str, str] | Sequence[str], labels: Mapping[str, str]) -> CudaNeed | None:
    """What an image needs, from its ``Config.Env`` and labels; None when it declares nothing."""
    required = require_cuda_of_env(env)
    if required is not None and required.cuda is not None:
        source = "NVIDIA_REQUIRE_CUDA" if required.raw else "CUDA_VERSION"
        return CudaNeed(required.cuda, source, required.alternatives, required.disabled)
    label = re.match(r"\s*(\d+)\.(\d+)", labels.get(CUDA_LABEL, ""))
    if label is None:
        return None
    disabled = required.disabled if required is not None else _disabled(env)
    return CudaNeed((int(label.group(1)), int(label.group(2))), LABEL_SOURCE, (), disabled)


def _disabled(env: Mapping[str, str] | Sequence[str]) -> bool:
    items = env.items() if isinstance(env, Mapping) else (e.partition("=")[::2] for e in env)
    value = dict(items).get("NVIDIA_DISABLE_REQUIRE", "")
    return value.strip().lower() not in ("", "0", "false")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _compare(have: tuple[int, ...], op: str, want: tuple[int, ...]) -> bool:
    # Compare as many fields as the condition names: "driver<536" is about the branch.
    have = have[: len(want)]
    return {
        ">=": have >= want,
        "<=": have <= want,
        ">": have > want,
        "<": have < want,
        "=": have == want,
    }[op]


def _clause_met(clause: str, driver: DriverCuda) -> bool:
    """Whether the driver meets one AND-ed clause (``brand=…`` and ``arch=…`` are not read)."""
    checked = False
    for condition in clause.split(","):
        match = _CONDITION.match(condition.strip())
        if match is None:
            continue
        key, op, want = match.groups()
        have_text = driver.version if key == "driver" else _cuda_text(driver.cuda)
        if not have_text:
            return False
        if not _compare(_version(have_text), op, _version(want)):
            return False
        checked = True
    return checked


def _cuda_text(cuda: CudaVersion | None) -> str:
    return f"{cuda[0]}.{cuda[1]}" if cuda else ""


def refusal(image: str, need: CudaNeed | None, driver: DriverCuda | None) -> str | None:
    """Why this driver cannot start ``image``, with the fix; None when it may start.

    Args:
        image: The configured image reference (the fix proposes a tag beside it).
        need: From `need_of`; None when the image declares nothing.
        driver: From NVML; None on a host without NVML (or slots without GPUs).
    """
    if need is None or need.disabled or driver is None:
        return None
    driver_cuda = driver.cuda or cuda_of_driver(driver.version)
    if driver_cuda is None:
        return None
    compat = check_compatibility(need.cuda, driver_cuda, driver.version)
    if compat.verdict in (Verdict.OK, Verdict.UNKNOWN):
        return None
    if compat.verdict is Verdict.MINOR_COMPAT and need.source == LABEL_SOURCE:
        # Only the environment makes nvidia-container-cli refuse a minor-compatible image;
        # one that declares its CUDA in our label alone starts, and its programs run.
        return None
    if any(_clause_met(clause, driver) for clause in need.alternatives):
        return None
    have = _cuda_text(driver_cuda)
    who = f"driver {driver.version}" if driver.version else "the driver"
    return (
        f"image needs CUDA {_cuda_text(need.cuda)} ({need.source}); {who} supports up to "
        f"CUDA {have}: {_fix(image, need.cuda, driver_cuda, driver.version)}"
    )


def _fix(image: str, cuda: CudaVersion, driver_cuda: CudaVersion, version: str | None) -> str:
    """The two ways out: an image the driver runs, or the driver the image needs."""
    upgrade = driver_for(cuda)
    driver_words = f"upgrade the driver to {upgrade} or newer" if upgrade else "upgrade the driver"
    return f"{_other_image(image, driver_cuda, version)}, or {driver_words}"


def _other_image(image: str, driver_cuda: CudaVersion, version: str | None) -> str:
    repo, _, tag = image.rpartition(":")
    ours = _OUR_TAG.match(tag) if repo and "/" not in tag and "@" not in image else None
    if ours is not None:
        flavor = ours.group("flavor") or "runtime"
        arch, ubuntu = ours.group("arch"), ours.group("ubuntu")
        # The same Ubuntu first, then any: a 12.4 image on 22.04 beats none at all.
        for on in (ubuntu, ""):
            proposed = suggest_image(
                repo, driver_cuda, on, arch, flavor=flavor, driver_version=version
            )
            fits = cuda_of_tag(proposed)
            if fits is not None and fits <= driver_cuda:
                return f"use {proposed}"
        return (
            f"build an image for CUDA {_cuda_text(driver_cuda)} (a row in "
            "dockeragent/matrix.txt, then dockeragent/build.sh)"
        )
    return f"use an image built for CUDA {_cuda_text(driver_cuda)} or older"
