"""Validators built from the schema test data in tests/data/k8s (see its PROVENANCE.md)."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
K8S_DEFS = DATA / "kubernetes" / "v1.34.0-strict-defs.json"
SCALEDJOB_CRD = DATA / "keda" / "keda.sh_scaledjobs.excerpt.yaml"
TRIGGERAUTH_CRD = DATA / "keda" / "keda.sh_triggerauthentications.excerpt.yaml"
SCALER_DOC = DATA / "keda" / "azure-pipelines.2.20.excerpt.md"
ELIDED = "x-gpuci-elided"

# Kubernetes resource.Quantity: sign, digits with optional fraction, then a
# binary (Ki..Ei) or decimal (n, u, m, k, M..E) suffix or an exponent.
QUANTITY = re.compile(
    r"[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?"
)
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@cache
def _k8s_document() -> dict[str, Any]:
    return json.loads(K8S_DEFS.read_text(encoding="utf-8"))


@cache
def k8s_validator(definition: str) -> Draft202012Validator:
    """A strict validator for one Kubernetes definition, e.g. ``io.k8s.api.batch.v1.JobSpec``."""
    document = _k8s_document()
    assert definition in document["$defs"], definition
    schema = {
        "$schema": document["$schema"],
        "$defs": document["$defs"],
        "$ref": f"#/$defs/{definition}",
    }
    return Draft202012Validator(schema)


def _strict(node: Any) -> Any:
    """An openAPIV3Schema as JSON Schema, rejecting unknown fields like strict field validation."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {ELIDED}:
        return {}  # elided in the excerpt: anything (checked elsewhere when gpuci-tui writes it)
    out = {key: _strict(value) for key, value in node.items() if not key.startswith("x-kubernetes")}
    out.pop("description", None)
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if "properties" in out:  # a property may be called "description"
        out["properties"] = {k: _strict(v) for k, v in node["properties"].items()}
    if node.get("format") == "int32":
        out.update(minimum=-(2**31), maximum=2**31 - 1)
    return out


@cache
def crd_validator(path: Path) -> Draft202012Validator:
    """A strict validator for the storage version of a CRD file (or excerpt)."""
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    """Every validation error as ``path: message`` (empty when valid)."""
    found: list[ValidationError] = sorted(validator.iter_errors(instance), key=str)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]


def documented_trigger_parameters() -> set[str]:
    """Trigger metadata names in KEDA's azure-pipelines page: its YAML example and parameter list."""
    text = SCALER_DOC.read_text(encoding="utf-8")
    spec = text.split("### Trigger Specification", 1)[1].split("### Authentication Parameters")[0]
    block = spec.split("```yaml", 1)[1].split("```", 1)[0]
    example = yaml.safe_load(block)["triggers"][0]["metadata"]
    listed = spec.split("**Parameter list:**", 1)[1]
    bullets = set(re.findall(r"^- `([A-Za-z]+)` - ", listed, re.M))
    # The list leaves out requireAllDemands*, which the example and "Supporting
    # demands" describe; it names nothing the example lacks.
    assert bullets <= set(example), bullets - set(example)
    return bullets | set(example)


def documented_auth_parameters() -> set[str]:
    """TriggerAuthentication parameter names in KEDA's azure-pipelines page."""
    text = SCALER_DOC.read_text(encoding="utf-8")
    section = text.split("### Authentication Parameters", 1)[1]
    return set(re.findall(r"^- `([A-Za-z]+)` - ", section, re.M))
