"""One served version of a CustomResourceDefinition, compiled for validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webhook.schema.celrules import CelValidator
from webhook.schema.openapi import SchemaValidator
from webhook.schema.structural import Node, compile_schema

if TYPE_CHECKING:
    from webhook.cel import Evaluator


@dataclass(eq=False)
class ServedVersion:
    """What the apiserver needs to handle writes of one group/version/kind."""

    crd_name: str
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    schema: Node
    status_subresource: bool
    scale: dict[str, Any] | None
    evaluator: Evaluator = field(repr=False)   # evaluates the CEL rules
    short_names: tuple[str, ...] = ()
    crd: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.validator = SchemaValidator(self.schema)
        status = self.schema.properties.get("status")
        self.status_validator = SchemaValidator(status, "status") if status is not None else None
        self.cel = CelValidator(self.schema, self.evaluator) if self.schema.has_rules else None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_rules(self) -> bool:
        return self.schema.has_rules


def served_versions(crd: dict[str, Any], evaluator: Evaluator) -> list[ServedVersion]:
    """The served versions of a CRD (``apiextensions.k8s.io/v1``), schemas compiled; ``evaluator``
    evaluates their CEL rules."""
    spec = crd.get("spec") if isinstance(crd.get("spec"), dict) else {}
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    out = []
    top_schema = (spec.get("validation") or {}).get("openAPIV3Schema")
    top_subresources = spec.get("subresources")
    for version in spec.get("versions") or ():
        if not isinstance(version, dict) or not version.get("served", True):
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or top_schema or {}
        subresources = version.get("subresources", top_subresources) or {}
        out.append(ServedVersion(
            crd_name=(crd.get("metadata") or {}).get("name", ""),
            group=spec.get("group", ""),
            version=version.get("name", ""),
            kind=names.get("kind", ""),
            plural=names.get("plural", ""),
            namespaced=spec.get("scope", "Namespaced") != "Cluster",
            schema=compile_schema(schema),
            status_subresource="status" in subresources,
            scale=subresources.get("scale"),
            short_names=tuple(names.get("shortNames") or ()),
            crd=crd,
            evaluator=evaluator,
        ))
    return out
