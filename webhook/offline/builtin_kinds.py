"""Built-in kinds (ConfigMap, Service, Deployment, ...) against Kubernetes' own OpenAPI schemas.

``infergate validate`` meets them in every real repository. The CRDs' kinds get the apiserver's
whole answer (``webhook.schema``); a built-in kind gets what kubeconform and kubectl-validate
give: its object checked against the JSON schema of the Kubernetes release infergate models.
A field the schema does not have is the apiserver's strict decoding's business
(``webhook.schema.field_validation``: under ``Strict``, kubectl's default, a 400 naming every
unknown field as ``unknown field "spec.x"``; under ``Warn`` warnings). Besides the schema, the
one limit of Kubernetes' own validation a manifest meets most: a ConfigMap's or Secret's data
over 1 MiB (``MaxSecretSize``). The schemas are the ones the ``kubernetes-validate`` package
ships, each compiled once per process into a validator and kept.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from webhook.apiversion import group_of, split, version_of
from webhook.schema.field_validation import MAX_STRICT_ERRORS, FieldValidation, StrictDecodingError
from webhook.schema.field_validation import apply as apply_field_validation
from webhook.schema.fielderrors import bad_request_status

KUBERNETES_VERSION = "1.36"  # the apiserver release infergate answers as


# The built-in kinds with a ``status`` subresource: the ``*/status`` resources of kube-apiserver
# v1.36.2's discovery (``/api/v1``, ``/apis/<group>/<version>``; read 2026-12-08, default API set).
# Their storage's PrepareForCreate and PrepareForUpdate set ``status`` (to its zero value, to
# the stored object's) after the mutating admission plugins ran: a mutation of it is not kept.
_STATUS_SUBRESOURCE: frozenset[tuple[str, str]] = frozenset({
    ("", "Namespace"), ("", "Node"), ("", "PersistentVolumeClaim"), ("", "PersistentVolume"), ("", "Pod"),
    ("", "ReplicationController"), ("", "ResourceQuota"), ("", "Service"),
    ("apps", "DaemonSet"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
    ("autoscaling", "HorizontalPodAutoscaler"), ("batch", "CronJob"), ("batch", "Job"),
    ("apiregistration.k8s.io", "APIService"), ("certificates.k8s.io", "CertificateSigningRequest"),
    ("networking.k8s.io", "Ingress"), ("networking.k8s.io", "ServiceCIDR"), ("policy", "PodDisruptionBudget"),
    ("storage.k8s.io", "VolumeAttachment"), ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"), ("resource.k8s.io", "ResourceClaim"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"), ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
})


def status_as_admitted(admitted: dict[str, Any], mutated: dict[str, Any]) -> dict[str, Any]:
    """``mutated`` (a write of the main resource as the admission mutations left it) with the
    ``status`` of ``admitted`` (the object before them) when its kind has a status subresource:
    the storage's PrepareForCreate/PrepareForUpdate, which runs after admission, sets status
    whatever a mutation put there (recorded: a MutatingAdmissionPolicy's ``status.replicas``
    on a Deployment's CREATE is not stored)."""
    if (group_of(admitted.get("apiVersion")), admitted.get("kind")) not in _STATUS_SUBRESOURCE \
            or admitted.get("status") == mutated.get("status"):
        return mutated
    out = {key: value for key, value in mutated.items() if key != "status"}
    if "status" in admitted:
        out["status"] = admitted["status"]
    return out


def is_builtin_group(api_version: str) -> bool:
    """Whether ``api_version`` can be a built-in API: the core group, a group without a dot
    (apps, batch, policy, autoscaling) or a ``*.k8s.io`` one. A CRD's group always has a dot, so
    ``apps.example.com`` is never taken for ``apps``."""
    group = group_of(api_version)
    return group == "" or "." not in group or group.endswith(".k8s.io")


@dataclass(frozen=True)
class Cause:
    field: str
    message: str
    reason: str = "FieldValueInvalid"


# k8s.io/kubernetes/pkg/apis/core/types.go: the most data a ConfigMap or Secret may hold
MAX_SECRET_SIZE = 1024 * 1024


@dataclass
class BuiltinAnswer:
    """The apiserver's answer to writing a built-in object: allowed, else its ``metav1.Status``."""

    allowed: bool
    status: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


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

        group, version = split(api_version)
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

    def group_kinds(self) -> frozenset[tuple[str, str]]:
        """(group, kind) of every kind the release serves built in (its definitions' group-version-kinds)."""
        from kubernetes_validate import utils

        if self._definitions is None:
            self._definitions = utils.schema_contents(f"{self._schema_directory()}/_definitions.json", self.version)
        return frozenset((gvk["group"], gvk["kind"]) for definition in self._definitions.get("$defs", {}).values()
                         if isinstance(definition, dict)
                         for gvk in definition.get("x-kubernetes-group-version-kind", ()))

    def causes(self, obj: dict[str, Any]) -> list[Cause] | None:
        """What is wrong with ``obj`` by its kind's schema and the size limit ([] when nothing),
        None when its kind is not a built-in one. Unknown fields are not among them:
        :meth:`unknown_fields` finds those."""
        validator = self.validator(str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None:
            return None
        out = []
        for error in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
            if error.validator == "additionalProperties" and error.validator_value is False:
                continue  # an unknown field: the strict decoding's, worded as the apiserver does
            out.append(Cause(_field(error.absolute_path), error.message))
        return out + size_causes(obj)

    def unknown_fields(self, obj: dict[str, Any]) -> list[str]:
        """The fields of ``obj`` its kind does not have, as the apiserver's strict JSON decoding
        lists them (``sigs.k8s.io/json``): in the order of the body kubectl sends (keys sorted,
        depth first), ``spec.containers[0].bogus``, at most 100."""
        validator = self.validator(str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None:
            return []
        out: list[str] = []
        _unknown(obj, validator.schema, "", self._definitions["$defs"], out)
        return out[:MAX_STRICT_ERRORS]

    def decoded(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as the apiserver decodes it under ``Warn`` or ``Ignore``: without the fields
        its kind does not have (dropped before admission: a MutatingAdmissionPolicy never sees
        them; recorded), ``obj`` itself when it has none."""
        validator = self.validator(str(obj.get("apiVersion")), str(obj.get("kind")))
        if validator is None or not self.unknown_fields(obj):
            return obj
        return _known(obj, validator.schema, self._definitions["$defs"])

    def answer(self, obj: dict[str, Any], field_validation: FieldValidation) -> BuiltinAnswer | None:
        """The apiserver's answer to writing ``obj`` under ``field_validation``: strict decoding
        first (a 400 under ``Strict``), then validation (a 422); None when its kind is not a
        built-in one."""
        causes = self.causes(obj)
        if causes is None:
            return None
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        try:
            warnings = apply_field_validation(field_validation, kind, version_of(api_version),
                                              self.unknown_fields(obj))
        except StrictDecodingError as exc:
            return BuiltinAnswer(False, bad_request_status(str(exc)))
        if causes:
            return BuiltinAnswer(False, invalid_status(obj, causes), warnings)
        return BuiltinAnswer(True, None, warnings)


def _resolve(schema: Any, definitions: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = definitions.get(schema["$ref"].rpartition("/")[2])
    return schema


def _unknown(value: Any, schema: Any, path: str, definitions: dict[str, Any], out: list[str]) -> None:
    schema = _resolve(schema, definitions)
    if not isinstance(schema, dict) or len(out) >= MAX_STRICT_ERRORS:
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key in sorted(value, key=str):
            where = f"{path}.{key}" if path else str(key)
            if isinstance(properties, dict) and key in properties:
                _unknown(value[key], properties[key], where, definitions, out)
            elif isinstance(additional, dict):
                _unknown(value[key], additional, where, definitions, out)
            elif additional is False:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _unknown(item, schema["items"], f"{path}[{i}]", definitions, out)


def _known(value: Any, schema: Any, definitions: dict[str, Any]) -> Any:
    """``value`` without what :func:`_unknown` finds (a copy where something is dropped)."""
    schema = _resolve(schema, definitions)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            if isinstance(properties, dict) and key in properties:
                out[key] = _known(item, properties[key], definitions)
            elif isinstance(additional, dict):
                out[key] = _known(item, additional, definitions)
            elif additional is not False:
                out[key] = item
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_known(item, schema["items"], definitions) for item in value]
    return value


def _data_size(values: Any, *, encoded: bool) -> int:
    """The bytes of a data map's values as the apiserver holds them (base64 decoded when
    ``encoded``; a value that does not decode counts as its text: the schema says what is wrong)."""
    if not isinstance(values, dict):
        return 0
    total = 0
    for value in values.values():
        if not isinstance(value, str):
            continue
        if encoded:
            try:
                total += len(base64.b64decode(value, validate=True))
                continue
            except (binascii.Error, ValueError):
                pass
        total += len(value.encode("utf-8", "surrogatepass"))
    return total


def size_causes(obj: dict[str, Any]) -> list[Cause]:
    """``ValidateConfigMap``/``ValidateSecret``'s size check (``core.MaxSecretSize``, 1 MiB): a
    ConfigMap's ``data`` and ``binaryData`` together (the error at the whole object, ``[]``), a
    Secret's ``data`` with ``stringData`` merged in as the conversion does (at ``data``)."""
    if obj.get("apiVersion") != "v1":
        return []
    kind = obj.get("kind")
    if kind == "ConfigMap":
        total, where = _data_size(obj.get("data"), encoded=False) + _data_size(obj.get("binaryData"), encoded=True), "[]"
    elif kind == "Secret":
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        strings = obj.get("stringData") if isinstance(obj.get("stringData"), dict) else {}
        kept = {k: v for k, v in data.items() if k not in strings}
        total = _data_size(kept, encoded=True) + _data_size(strings, encoded=False)
        where = "data"
    else:
        return []
    if total <= MAX_SECRET_SIZE:
        return []
    return [Cause(where, f"Too long: may not be more than {MAX_SECRET_SIZE} bytes", "FieldValueTooLong")]


def _field(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<root>"


def invalid_status(obj: dict[str, Any], causes: list[Cause]) -> dict[str, Any]:
    """The 422 Status the apiserver's answer would take (as a CRD's denial does)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    kind, name = str(obj.get("kind")), str(meta.get("name") or "")
    group = group_of(obj.get("apiVersion"))
    lines = [f"{c.field}: {c.message}" for c in causes]
    qualified = f"{kind}.{group}" if group else kind  # as the apiserver names it: Deployment.apps "web"
    message = f'{qualified} "{name}" is invalid: ' + (lines[0] if len(lines) == 1 else f"[{', '.join(lines)}]")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Invalid", "code": 422,
            "details": {"name": name, "group": group, "kind": kind,
                        "causes": [{"reason": c.reason, "message": c.message, "field": c.field}
                                   for c in causes]}}
