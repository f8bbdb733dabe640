"""``gpuci-tui export kubernetes``: the configured agents as KEDA manifests for a cluster.

The manifests come from `gpuci_tui.core.export.k8s`; this module parses the
options, picks the group and writes the files: into a temporary directory
beside the target first, then moved into place, so a failure leaves nothing
half-written and an earlier export is replaced only as a whole (``--force``).
The PAT is never read: the cluster gets it from a Secret the operator creates.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gpuci_tui.core.config.loader import agent_groups
from gpuci_tui.core.export.k8s import DEFAULT_GROUP, DEFAULT_NAMESPACE, DEFAULT_SECRET_NAME
from gpuci_tui.core.wording import plural

from . import exitcodes
from .common import CliExit, fail, load

DEFAULT_OUTPUT = "gpuci-k8s"

DESCRIPTION = """\
Write Kubernetes manifests that run the configured agents on a cluster with
KEDA: a ScaledJob whose azure-pipelines trigger starts one single-job agent pod
per pending pipeline job (0 to agents.count at once), its
TriggerAuthentication, and a NOTES file with the exact kubectl steps.

The PAT is not read and not written: create the Secret the manifests refer to
from a file (see the NOTES file). Nothing is applied to any cluster.
"""

EPILOG = """\
exit codes: 0 written, 2 usage, 4 configuration or options cannot be exported
(unknown group, gpus = "all" without --gpus-per-agent, docker_socket, ...),
1 the output directory cannot be written or is not empty (see --force).
"""


def add_export_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``export kubernetes`` on the top-level subcommands."""
    export = sub.add_parser("export", help="write the agents as manifests for another platform")
    targets = export.add_subparsers(dest="export_target", metavar="TARGET", required=True)
    k8s = targets.add_parser(
        "kubernetes",
        help="KEDA ScaledJob + TriggerAuthentication for a Kubernetes cluster",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    k8s.add_argument(
        "--group",
        default=DEFAULT_GROUP,
        help=f"agent group to export (default: {DEFAULT_GROUP}, the [agents] table)",
    )
    k8s.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        default=DEFAULT_OUTPUT,
        help=f"directory to create (default: ./{DEFAULT_OUTPUT})",
    )
    k8s.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="default: %(default)s")
    k8s.add_argument(
        "--secret-name",
        default=DEFAULT_SECRET_NAME,
        help="the Secret holding the PAT under the key 'token' (default: %(default)s)",
    )
    k8s.add_argument(
        "--gpus-per-agent",
        type=int,
        metavar="N",
        help='GPUs per agent pod; required when agents.gpus = "all"',
    )
    k8s.add_argument(
        "--dataset-pvc",
        action="append",
        default=[],
        metavar="HOSTPATH=CLAIM",
        help="mount the [[agents.volumes]] entry with this host path from a "
        "PersistentVolumeClaim instead of hostPath (repeatable)",
    )
    k8s.add_argument(
        "--host-gpus",
        action="store_true",
        help="advertise this host's GPU (read through NVML) as the pods' gpu.* capabilities, "
        "pin the pods to nodes labelled with that nvidia.com/gpu.product and let KEDA count "
        "jobs demanding it",
    )
    k8s.add_argument(
        "--gpu-capability",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a GPU capability the pods advertise, e.g. gpu.product=NVIDIA-H100-80GB-HBM3 "
        "(repeatable; with --host-gpus it overrides what NVML says)",
    )
    k8s.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty output directory (only one holding just files)",
    )


def run_export(args: argparse.Namespace) -> int:
    """Write the manifests of one agent group; print what was written and what to do next."""
    from gpuci_tui.core.export.k8s import (
        ExportError,
        ExportOptions,
        gpus_per_pod,
        render_manifests,
        resource_name,
    )

    try:
        config = load(args, host_paths_here=False)  # the paths are on the cluster's nodes
        groups = {group.name: group for group in agent_groups(config)}
        if args.group not in groups:
            names = ", ".join(sorted(groups))
            raise CliExit(
                exitcodes.CONFIG,
                f'unknown agent group "{args.group}"; this configuration has: {names}',
            )
        group = groups[args.group]
        agents = group.agents
        azure = dataclasses.replace(config.azure, pool=group.pool)
        options = ExportOptions(
            namespace=args.namespace,
            secret_name=args.secret_name,
            gpus_per_agent=args.gpus_per_agent,
            dataset_pvcs=_dataset_pvcs(args.dataset_pvc),
            capabilities=_capabilities(args.host_gpus, args.gpu_capability),
        )
        files = render_manifests(azure, agents, args.group, options)
        target = Path(args.output)
        write_directory(target, files, force=args.force)
    except CliExit as exc:
        return fail(exc)
    except ExportError as exc:
        print(f"gpuci-tui: cannot export group {args.group!r}:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return exitcodes.CONFIG
    name = resource_name(agents, args.group)
    gpus = gpus_per_pod(agents, options)
    auth = config.azure.auth
    source = {
        "pat": f"PAT from Secret {options.secret_name}, key token",
        "service-principal": f"service principal {config.azure.client_id}, Secret "
        f"{options.secret_name}",
        "managed-identity": "Azure Workload Identity, no Secret",
    }[auth]
    what = {
        "triggerauthentication.yaml": f"TriggerAuthentication {name}-azp ({source})",
        "scaledjob.yaml": f"ScaledJob {name}: pool '{config.azure.pool}', 0-{agents.count} "
        f"agents, {plural(gpus, 'GPU')} each",
        "NOTES.md": "the Secret to create, kubectl steps, the placeholder-agent rule",
    }
    print(f"wrote {len(files)} files to {target}/ (namespace {options.namespace}):")
    width = max(len(file) for file in files)
    for file in sorted(files):
        label = next((text for suffix, text in what.items() if file.endswith(suffix)), "")
        print(f"  {file:<{width}}  {label}")
    print("next:")
    if auth != "managed-identity":  # workload identity: the service account (see NOTES)
        print(
            f"  kubectl -n {options.namespace} create secret generic {options.secret_name} "
            + ("--from-file=token=PATFILE" if auth == "pat" else "--from-file=token=SECRETFILE")
        )
    print(f"  kubectl apply -f {target}/")
    print(f"  then read {target / (args.group + '-NOTES.md')}")
    return exitcodes.OK


def _capabilities(host: bool, values: list[str]) -> dict[str, str]:
    """The pods' GPU capabilities: this host's first GPU's (``--host-gpus``), then the options."""
    caps: dict[str, str] = {}
    if host:
        from gpuci_tui.core.gpu.capabilities import slot_capabilities
        from gpuci_tui.core.gpu.nvml_facts import read_nvml_facts
        from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler

        sampler = NvmlSampler()
        try:
            facts = read_nvml_facts(sampler)
        finally:
            sampler.close()
        if not facts.gpus:
            raise CliExit(exitcodes.CONFIG, "--host-gpus: NVML sees no GPU on this host")
        caps = slot_capabilities(facts, facts.gpus[:1])
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise CliExit(
                exitcodes.CONFIG,
                f'--gpu-capability "{value}" must be NAME=VALUE, '
                "e.g. gpu.product=NVIDIA-H100-80GB-HBM3",
            )
        caps[name.strip()] = text.strip()
    return caps


def _dataset_pvcs(values: list[str]) -> dict[str, str]:
    """``HOSTPATH=CLAIM`` options as host path → claim (paths normalised as in the config)."""
    pvcs: dict[str, str] = {}
    for value in values:
        host, sep, claim = value.rpartition("=")
        if not sep or not host.strip() or not claim.strip():
            raise CliExit(
                exitcodes.CONFIG,
                f'--dataset-pvc "{value}" must be HOSTPATH=CLAIM, e.g. /data/imagenet=imagenet',
            )
        path = "/" + posixpath.normpath(host.strip()).lstrip("/")
        if path in pvcs:
            raise CliExit(exitcodes.CONFIG, f"--dataset-pvc names {path} twice")
        pvcs[path] = claim.strip()
    return pvcs


def write_directory(target: Path, files: Mapping[str, str], *, force: bool) -> None:
    """Create ``target`` holding exactly ``files``, all at once or not at all.

    The files are written to a temporary directory beside ``target`` which is
    then renamed into place; with ``force`` an existing directory of plain
    files (an earlier export) is swapped out and removed only after that.

    Raises:
        CliExit: (code 1) ``target`` is a file, is not empty and ``force`` is
            not set, holds more than files, or cannot be written.
    """
    target = Path(os.path.abspath(target))
    _check_target(target, force=force)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as exc:
        raise CliExit(exitcodes.FAILED, f"cannot write into {parent}: {_reason(exc)}") from None
    old: Path | None = None
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp made it 0700; manifests are not secret
        if target.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
            target.rename(old / "previous")
        try:
            staging.rename(target)
        except OSError:
            if old is not None:
                (old / "previous").rename(target)
            raise
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if old is not None and not (old / "previous").exists():
            shutil.rmtree(old, ignore_errors=True)
        raise CliExit(exitcodes.FAILED, f"cannot write {target}: {_reason(exc)}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _check_target(target: Path, *, force: bool) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise CliExit(
            exitcodes.FAILED, f"{target} exists and is not a directory; choose another -o DIR"
        )
    if not target.exists():
        return
    try:
        entries = sorted(target.iterdir())
    except OSError as exc:
        raise CliExit(exitcodes.FAILED, f"cannot read {target}: {_reason(exc)}") from None
    if not entries:
        return
    if not force:
        raise CliExit(
            exitcodes.FAILED,
            f"{target} is not empty ({len(entries)} entries); choose another -o DIR, or "
            "add --force to replace it with the new export",
        )
    others = [e.name for e in entries if e.is_symlink() or not e.is_file()]
    if others or target == Path.cwd():
        why = f"it holds {', '.join(others[:3])}" if others else "it is the current directory"
        raise CliExit(
            exitcodes.FAILED,
            f"--force replaces only a directory of plain files such as an earlier export; "
            f"{target} is left alone because {why}",
        )


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__
