"""GPU capabilities of a slot under NVIDIA GPU-feature-discovery names, for agent demands.

An Azure Pipelines agent reports its environment as system capabilities, and a
pipeline routes a job with ``demands:`` on them (``gpu.product -equals
NVIDIA-H100-80GB-HBM3``, ``cuda.runtime.major -gtVersion 12``). The names and
value formats are those of NVIDIA's gpu-feature-discovery (GFD) node labels
without their ``nvidia.com/`` prefix, so a lab that routes Kubernetes pods by
GFD labels writes the same words for its pipelines:

- ``gpu.product``: the board's NVML name, sanitised as GFD does (characters
  outside ``[A-Za-z0-9-_. ]`` dropped, runs of spaces become one dash):
  ``NVIDIA H100 80GB HBM3`` → ``NVIDIA-H100-80GB-HBM3``.
- ``gpu.memory``: total memory in MiB (NVML's bytes // 2**20; GFD says "MB").
- ``gpu.count``: GPUs of the slot.
- ``gpu.family``: architecture family from the compute capability (``hopper``).
- ``gpu.compute.major`` / ``gpu.compute.minor``: compute capability (9 / 0).
- ``cuda.driver-version.full`` / ``.major`` / ``.minor`` / ``.revision``: the
  NVIDIA *driver* version and its parts (580.159.04 / 580 / 159 / 04: GFD keeps
  the text, leading zero included); GFD's older names ``cuda.driver.major`` /
  ``.minor`` / ``.rev`` too, which it still writes.
- ``cuda.runtime-version.full`` / ``.major`` / ``.minor``: the highest CUDA
  version the driver supports (13.0 / 13 / 0), which GFD calls the runtime
  version; and the older ``cuda.runtime.major`` / ``.minor``.

The ``.full`` values are the ones to compare with ``-gtVersion``: the service
parses versions as .NET's ``System.Version``, which needs at least
``major.minor``; a bare ``13`` does not parse, and two unparsed versions
compare equal, so ``cuda.runtime.major -gtVersion 12`` is met by any value.
- ``mig.capable``: ``true`` / ``false``.
- ``gpuci.host``: the host's name (GFD has none: a node name is Kubernetes'),
  so a pipeline can pin a machine of a mixed fleet.

A fact NVML could not read is left out rather than guessed: a demand on it then
waits, which is better than a job landing on the wrong card. A slot of several
GPUs advertises a fact only when all its GPUs agree on it (a job demanding an
H100 must not land on a slot that also holds an A100).

Pure: the facts are read once per GPU at start (`nvml_facts`), not per sample.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PRODUCT = "gpu.product"
MEMORY = "gpu.memory"
COUNT = "gpu.count"
FAMILY = "gpu.family"
COMPUTE_MAJOR = "gpu.compute.major"
COMPUTE_MINOR = "gpu.compute.minor"
DRIVER_MAJOR = "cuda.driver.major"
DRIVER_MINOR = "cuda.driver.minor"
DRIVER_REV = "cuda.driver.rev"
RUNTIME_MAJOR = "cuda.runtime.major"
RUNTIME_MINOR = "cuda.runtime.minor"
DRIVER_FULL = "cuda.driver-version.full"
DRIVER_V_MAJOR = "cuda.driver-version.major"
DRIVER_V_MINOR = "cuda.driver-version.minor"
DRIVER_V_REVISION = "cuda.driver-version.revision"
RUNTIME_FULL = "cuda.runtime-version.full"
RUNTIME_V_MAJOR = "cuda.runtime-version.major"
RUNTIME_V_MINOR = "cuda.runtime-version.minor"
MIG_CAPABLE = "mig.capable"
HOST = "gpuci.host"

NAMES = (
    PRODUCT, MEMORY, COUNT, FAMILY, COMPUTE_MAJOR, COMPUTE_MINOR, DRIVER_MAJOR, DRIVER_MINOR,
    DRIVER_REV, RUNTIME_MAJOR, RUNTIME_MINOR, DRIVER_FULL, DRIVER_V_MAJOR, DRIVER_V_MINOR,
    DRIVER_V_REVISION, RUNTIME_FULL, RUNTIME_V_MAJOR, RUNTIME_V_MINOR, MIG_CAPABLE, HOST,
)  # fmt: skip
"""Every capability this module may advertise (an agent's env must not ignore them)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9\-_. ]")


@dataclass(frozen=True)
class GpuFacts:
    """What NVML says of one GPU that does not change while the host runs (None: not read)."""

    index: int
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None
    compute_capability: tuple[int, int] | None = None
    mig_capable: bool | None = None


@dataclass(frozen=True)
class HostGpuFacts:
    """The driver's facts and each GPU's, read once at start."""

    driver_version: str | None = None
    cuda_driver_version: tuple[int, int] | None = None
    gpus: tuple[GpuFacts, ...] = ()


def product_name(name: str) -> str:
    """GFD's ``gpu.product`` value of an NVML device name (spaces become dashes)."""
    return "-".join(_UNSAFE.sub("", name).split())


def arch_family(major: int, minor: int) -> str | None:
    """GFD's ``gpu.family`` of a compute capability; None where GFD says "undefined"."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    # Blackwell is split over compute capabilities 10.x and 12.x.
    return {
        1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
        10: "blackwell", 12: "blackwell",
    }.get(major)  # fmt: skip


def select_gpus(facts: HostGpuFacts, gpus: str | Sequence[str]) -> tuple[GpuFacts, ...]:
    """The GPUs a slot's selection names: ``"all"``, ``"none"`` or indexes / UUIDs.

    An id that names no known GPU is skipped: its facts are unknown, and an
    unknown GPU is not counted either.
    """
    if gpus == "all":
        return facts.gpus
    if isinstance(gpus, str):
        return ()
    picked: list[GpuFacts] = []
    for wanted in gpus:
        for gpu in facts.gpus:
            if wanted in (str(gpu.index), gpu.uuid) and gpu not in picked:
                picked.append(gpu)
                break
    return tuple(picked)


def _agreed(values: Iterable[object]) -> object | None:
    """The value every GPU has; None when one is unknown or two differ."""
    seen = set()
    for value in values:
        if value is None:
            return None
        seen.add(value)
    return seen.pop() if len(seen) == 1 else None


def slot_capabilities(
    facts: HostGpuFacts, gpus: Sequence[GpuFacts], hostname: str | None = None
) -> dict[str, str]:
    """Capability name → value for a slot holding ``gpus`` (see the module's list).

    A slot without GPUs advertises only the host: driver facts would promise a
    GPU the job does not get.
    """
    caps: dict[str, str] = {}
    if hostname:
        caps[HOST] = hostname
    if not gpus:
        return caps
    caps[COUNT] = str(len(gpus))
    name = _agreed(g.name for g in gpus)
    if isinstance(name, str) and product_name(name):
        caps[PRODUCT] = product_name(name)
    memory = _agreed(g.memory_total_mib for g in gpus)
    if isinstance(memory, int):
        caps[MEMORY] = str(memory)
    compute = _agreed(g.compute_capability for g in gpus)
    if isinstance(compute, tuple):
        major, minor = compute
        caps[COMPUTE_MAJOR], caps[COMPUTE_MINOR] = str(major), str(minor)
        family = arch_family(major, minor)
        if family is not None:
            caps[FAMILY] = family
    mig = _agreed(g.mig_capable for g in gpus)
    if isinstance(mig, bool):
        caps[MIG_CAPABLE] = "true" if mig else "false"
    caps.update(_driver(facts))
    return caps


def _driver(facts: HostGpuFacts) -> Mapping[str, str]:
    out: dict[str, str] = {}
    parts = (facts.driver_version or "").strip().split(".")
    # GFD accepts X.Y or X.Y.Z and refuses anything else; so do we (nothing said).
    if 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
        out[DRIVER_FULL] = ".".join(parts)
        out[DRIVER_MAJOR] = out[DRIVER_V_MAJOR] = parts[0]
        out[DRIVER_MINOR] = out[DRIVER_V_MINOR] = parts[1]
        if len(parts) == 3:
            out[DRIVER_REV] = out[DRIVER_V_REVISION] = parts[2]
    if facts.cuda_driver_version is not None:
        major, minor = (str(part) for part in facts.cuda_driver_version)
        out[RUNTIME_FULL] = f"{major}.{minor}"
        out[RUNTIME_MAJOR] = out[RUNTIME_V_MAJOR] = major
        out[RUNTIME_MINOR] = out[RUNTIME_V_MINOR] = minor
    return out


__all__ = [
    "NAMES",
    "GpuFacts",
    "HostGpuFacts",
    "arch_family",
    "product_name",
    "select_gpus",
    "slot_capabilities",
]
