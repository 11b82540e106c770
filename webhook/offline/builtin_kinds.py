"""Built-in kinds (ConfigMap, Service, Deployment, ...) against Kubernetes' own OpenAPI schemas.

``infergate validate`` meets them in every real repository. The CRDs' kinds get the apiserver's
whole answer (``webhook.schema``); a built-in kind gets what kubeconform and kubectl-validate
give: its object checked against the JSON schema of the Kubernetes release infergate models,
strict (a field the schema does not have is an error, as ``kubectl apply`` refuses it with
server-side field validation). The schemas are the ones the ``kubernetes-validate`` package
ships, each compiled once per process into a validator and kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KUBERNETES_VERSION = "1.36"  # the apiserver release infergate answers as


def is_builtin_group(api_version: str) -> bool:
    """Whether ``api_version`` can be a built-in API: the core group, a group without a dot
    (apps, batch, policy, autoscaling) or a ``*.k8s.io`` one. A CRD's group always has a dot, so
    ``apps.example.com`` is never taken for ``apps``."""
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")


@dataclass(frozen=True)
class Cause:
    field: str
    message: str


class BuiltinSchemas:
    """The validators of Kubernetes' built-in kinds, built on first use."""

    def __init__(self, version: str = KUBERNETES_VERSION) -> None:
        self.version = version
        self._validators: dict[tuple[str, str], Any] = {}
        self._directory: str | None = None
        self._definitions: Any = None

    def _schema_directory(self) -> str:
        if self._directory is None:
            from kubernetes_validate import utils

            wanted = tuple(int(p) for p in self.version.split("."))
            versions = [v for v in utils.all_versions() if tuple(int(p) for p in v.split(".")[:2]) <= wanted]
            self._directory = f"kubernetes-json-schema/v{versions[-1]}-local-strict"
        return self._directory

    def validator(self, api_version: str, kind: str) -> Any | None:
        """The validator of ``kind`` in ``api_version``, or None when Kubernetes has no such kind."""
        key = (api_version, kind)
        if key in self._validators:
            return self._validators[key]
        found = None
        if is_builtin_group(api_version):
            found = self._build(api_version, kind)
        self._validators[key] = found
        return found

    def _build(self, api_version: str, kind: str) -> Any | None:
        import jsonschema
        from kubernetes_validate import utils
        from referencing import Registry, Resource

        group, _, version = api_version.rpartition("/")
        name = f"{kind.lower()}-{group.split('.')[0]}-{version}" if group else f"{kind.lower()}-{version}"
        directory = self._schema_directory()
        try:
            schema = utils.schema_contents(f"{directory}/{name}.json", self.version)
        except (FileNotFoundError, OSError):
            return None
        if self._definitions is None:
            self._definitions = utils.schema_contents(f"{directory}/_definitions.json", self.version)
        registry = Resource.from_contents(self._definitions) @ (Resource.from_contents(schema) @ Registry())
        return jsonschema.validators.Draft202012Validator(schema, registry=registry)

    def causes(self, obj: dict[str, Any]) -> list[Cause] | None:
        """What is wrong with ``obj`` by its kind's schema ([] when nothing), None when its kind is
        not a built-in one."""
        validator = self.validator(str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None:
            return None
        out = []
        for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
            out.append(Cause(_field(error.absolute_path), error.message))
        return out


def _field(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def invalid_status(obj: dict[str, Any], causes: list[Cause]) -> dict[str, Any]:
    """The 422 Status the apiserver's answer would take (as a CRD's denial does)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    kind, name = str(obj.get("kind")), str(meta.get("name") or "")
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    lines = [f"{c.field}: {c.message}" for c in causes]
    qualified = f"{kind}.{group}" if group else kind  # as the apiserver names it: Deployment.apps "web"
    message = f'{qualified} "{name}" is invalid: ' + (lines[0] if len(lines) == 1 else f"[{', '.join(lines)}]")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Invalid", "code": 422,
            "details": {"name": name, "group": group, "kind": kind,
                        "causes": [{"reason": "FieldValueInvalid", "message": c.message, "field": c.field}
                                   for c in causes]}}
