"""Small CRDs built in tests, one schema keyword at a time; paths into JSON values; recorded
cases replayed as plain outcomes."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from webhook.offline.recorded_suites import request_path
from webhook.schema import CRDRegistry, Outcome
from tests.support.cel import EVALUATOR

API = "test.infergate.io/v1"


def crd(spec_schema: dict[str, Any], *, root_extra: dict[str, Any] | None = None, scope: str = "Namespaced",
        subresources: dict[str, Any] | None = None, status_schema: dict[str, Any] | None = None,
        kind: str = "Thing") -> dict[str, Any]:
    properties: dict[str, Any] = {"spec": spec_schema}
    if status_schema is not None:
        properties["status"] = status_schema
    root = {"type": "object", "properties": properties, **(root_extra or {})}
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": root}}
    if subresources is not None:
        version["subresources"] = subresources
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.test.infergate.io"},
        "spec": {"group": "test.infergate.io", "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": kind + "List"},
                 "versions": [version]},
    }


def registry(spec_props: dict[str, Any], **kwargs: Any) -> CRDRegistry:
    required = kwargs.pop("required", None)
    spec_schema = {"type": "object", "properties": spec_props}
    if required:
        spec_schema["required"] = required
    return CRDRegistry([crd(spec_schema, **kwargs)], evaluator=EVALUATOR)


def thing(spec: Any, name: str = "t1", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Thing", "metadata": {"name": name, "namespace": "default", **meta},
            "spec": spec}


def create(reg: CRDRegistry, spec: Any, **meta: Any) -> Outcome:
    return reg.handle("CREATE", thing(spec, **meta))


def errors(outcome: Outcome) -> list[str]:
    return [str(e) for e in outcome.errors]


def json_paths(value: Any, prefix: tuple = ()):
    """Every path into ``value`` (keys and indexes), ``()`` for the value itself first."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_paths(item, prefix + (i,))


# The recorded suites whose cases are objects (not CRDs): what the fast paths are compared on.
OBJECT_SUITES = ("kubeai-model.yaml", "gateway-inference.yaml", "kitchensink.yaml")


def recorded_outcome(registry: CRDRegistry, data: dict[str, Any]) -> dict[str, Any]:
    """A recorded case's request through ``registry.handle``, its Outcome as plain fields."""
    outcome = registry.handle(str(data.get("operation", "CREATE")), copy.deepcopy(data.get("object")),
                              copy.deepcopy(data.get("old")), data.get("subresource"), request=request_path(data))
    # errors as the apiserver prints them (their fields hold sentinels that do not deep-copy)
    return {**{f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)},
            "errors": [str(e) for e in outcome.errors]}
