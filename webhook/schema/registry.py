"""``CRDRegistry``: the apiserver's handling of a custom resource write, offline.

``handle`` runs the whole pipeline; ``prepare`` (decode: prune, nulls, defaults, status
subresource rules) and ``validate`` (metadata, structural schema, scale, embedded
resources, list types, CEL, ratcheting) are the two phases an admission chain runs
mutating webhooks between.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from webhook import documents
from webhook.apiversion import group_of, split
from webhook.documents import Document
from webhook.kinds import CUSTOM_RESOURCE_DEFINITION
from webhook.gocompat.fmt import go_json, go_type_name, go_value
from webhook.schema import fielderrors as fe
from webhook.schema.crd import ServedVersion, served_versions
from webhook.schema.decode import EmbeddedMetadataError, apply_defaults, coerce_embedded, copy_json, prune
from webhook.schema.field_validation import SERVER_DEFAULT, FieldValidation, StrictDecodingError
from webhook.schema.field_validation import apply as apply_field_validation
from webhook.schema.fielderrors import FieldError, Outcome
from webhook.schema.listtype import validate_list_types
from webhook.schema.objectmeta import (MetadataDecodeError, coerce_object_meta, finalizer_warnings,
                                       validate_embedded_resource, validate_object_meta,
                                       validate_object_meta_update)
from webhook.schema.structural import ABSENT, Node

if TYPE_CHECKING:
    from webhook.cel import Evaluator

_TOO_DEEP = "the object is nested too deeply to be decoded"
MARKER = fe.invalid(None, None, "some validation rules were not checked because the object was invalid; correct "
                                "the existing errors to complete validation")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class RequestPath:
    """Where a write was sent: ``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>]``."""

    api_version: str
    plural: str
    namespace: str | None = None
    name: str | None = None


class CRDLoadError(ValueError):
    """A CRD file could not be read or parsed."""


class RequestError(ValueError):
    """The apiserver refuses the request before validating it (HTTP 400/404)."""

    def __init__(self, code: int, message: str, warnings: list[str] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.warnings = list(warnings or ())

    def status(self) -> dict[str, Any]:
        if self.code == 404:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": "NotFound", "code": 404}
        if self.code == 405:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": "MethodNotAllowed", "code": 405}
        return fe.bad_request_status(self.message)


def crd_documents(path: Path) -> list[Document]:
    """The documents of CRD files and directories through ``webhook.documents``: ``List`` and
    ``CustomResourceDefinitionList`` (``kubectl get crd -o yaml``, the API's answer) unwrapped,
    the one nesting limit; the first problem is a ``CRDLoadError``, and so is a path that holds
    no CustomResourceDefinition at all (a manifest given for a CRD would add nothing, silently)."""
    if not path.exists():
        raise CRDLoadError(f"{path}: no such file or directory")
    found, errors = documents.read([path])
    if errors:
        raise CRDLoadError(str(errors[0]))
    if not any(isinstance(doc.content, dict) and doc.content.get("kind") == CUSTOM_RESOURCE_DEFINITION.kind
               for doc in found):
        kinds = sorted({str(doc.content.get("kind")) for doc in found if isinstance(doc.content, dict)
                        and doc.content.get("kind")})
        held = f" (it holds {', '.join(kinds)})" if kinds else " (it holds no Kubernetes object)"
        raise CRDLoadError(f"{path}: no CustomResourceDefinition in it{held}")
    return found


def one_crd_per_name(docs: Iterable[Document]) -> None:
    """Raise ``CRDLoadError`` naming both places when two different CRDs share a name (a
    cluster serves one CRD of a name); the same CRD twice is fine."""
    first: dict[str, Document] = {}
    for doc in docs:
        meta = doc.content.get("metadata") if isinstance(doc.content, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            continue
        seen = first.setdefault(name, doc)
        if seen is not doc and seen.content != doc.content:
            raise CRDLoadError(f"two different CustomResourceDefinitions named {name!r}: {seen.where} and {doc.where} "
                               f"(a cluster serves one CRD of a name: keep one)")


class CRDRegistry:
    """Custom resource definitions by group/version/kind, compiled once. ``evaluator``: the CEL
    engine and routes their rules are evaluated with (``webhook.cel.Evaluator``)."""

    def __init__(self, crds: Iterable[dict[str, Any]] = (), *, evaluator: Evaluator):
        self.evaluator = evaluator
        self.crds: list[dict[str, Any]] = []
        self._served: dict[tuple[str, str], ServedVersion] = {}
        self._by_plural: dict[tuple[str, str], ServedVersion] = {}
        for crd in crds:
            self.add(crd)

    @classmethod
    def load(cls, paths: Iterable[str | Path], *, evaluator: Evaluator, check: bool = False) -> "CRDRegistry":
        """CRDs from YAML/JSON files and directories (searched recursively).

        ``check``: refuse, with the apiserver's message, a CRD the apiserver would not admit
        (for CRDs that never went through one; recorded and shipped CRDs are known good).
        """
        registry = cls(evaluator=evaluator)
        for raw in paths:
            for doc in crd_documents(Path(raw)):
                crd = doc.content
                if not isinstance(crd, dict) or crd.get("kind") != CUSTOM_RESOURCE_DEFINITION.kind:
                    continue
                if check:
                    registry.add_checked(crd, doc.where)
                else:
                    registry._add(crd, doc.where)
        return registry

    def add_checked(self, crd: dict[str, Any], where: str = "", *, replace: bool = False) -> list[str]:
        """Add a CRD if the apiserver would admit it; returns its warnings, raises ``CRDLoadError``.
        ``replace``: it takes the place of the CRD of its name already here (as an apply of a CRD
        does in a cluster), every version of that one with it."""
        from webhook.schema.crd_admission import check_crd, rejection_message

        try:
            errors, warnings = check_crd(crd, self.evaluator)
        except Exception as exc:  # a fault of the checker must not hide the CRD's own problems
            raise CRDLoadError(f"{where}: the CRD could not be checked: {type(exc).__name__}: {exc}") from None
        if errors:
            raise CRDLoadError(f"{where}: {rejection_message(crd, errors)}")
        if replace:
            self.remove((crd.get("metadata") or {}).get("name"))
        self._add(crd, where)
        return warnings

    def remove(self, name: Any) -> None:
        """Stop serving the CRD named ``name`` (``metadata.name``), if one is here."""
        def named(c: dict[str, Any]) -> bool:
            return isinstance(c.get("metadata"), dict) and c["metadata"].get("name") == name

        if not any(named(c) for c in self.crds):
            return
        self.crds = [c for c in self.crds if not named(c)]
        self._served = {k: v for k, v in self._served.items() if v.crd_name != name}
        self._by_plural = {k: v for k, v in self._by_plural.items() if v.crd_name != name}

    def _add(self, crd: dict[str, Any], where: str) -> None:
        try:
            self.add(crd)
        except (TypeError, ValueError, AttributeError) as exc:
            raise CRDLoadError(f"{where}: not a usable CustomResourceDefinition: {exc}") from None

    @classmethod
    def shipped(cls, kubeai_crd: str | None = None, *, evaluator: Evaluator) -> "CRDRegistry":
        """The bundled CRDs (``webhook.schema.bundled.crds``): infergate's own, the current upstream
        ones, the schema-only ones and the earlier versions, one CRD per name; KubeAI's Model at
        ``kubeai_crd`` (default: the current one)."""
        from webhook.schema import bundled

        return cls([crd for _, _, crd in bundled.crds(kubeai_crd or bundled.DEFAULT_KUBEAI_CRD)], evaluator=evaluator)

    def add(self, crd: dict[str, Any], compiled: list[ServedVersion] | None = None) -> None:
        """Serve ``crd``'s versions (``compiled``: its ``served_versions``, when already made)."""
        self.crds.append(crd)
        for served in served_versions(crd, self.evaluator) if compiled is None else compiled:
            self._served[(served.api_version, served.kind)] = served
            self._by_plural[(served.api_version, served.plural)] = served

    def current(self) -> "CRDRegistry":
        """The registry in force for one review: this one (it never changes once loaded;
        ``webhook.schema.watched.WatchedCRDs`` hands out a new one per change of a cluster's CRDs)."""
        return self

    def served(self, api_version: str, kind: str) -> ServedVersion | None:
        """The version serving ``apiVersion``/``kind``, or None when no CRD serves it."""
        return self._served.get((api_version, kind))

    def by_resource(self, api_version: str, plural: str) -> ServedVersion | None:
        return self._by_plural.get((api_version, plural))

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self._served)

    # -- the pipeline -------------------------------------------------------------------
    def handle(self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
               subresource: str | None = None, *, namespace: str | None = None,
               request: RequestPath | None = None, field_validation: FieldValidation = SERVER_DEFAULT,
               mutated: bool = False, served_as: tuple[str, str] | None = None) -> Outcome:
        """The apiserver's whole answer to one CREATE or UPDATE (no admission webhooks).

        ``namespace`` is the request's namespace; ``request`` the full request path, when known
        (the endpoint then decides the kind, the namespace and, on UPDATE, the name);
        ``field_validation`` the request's directive for unknown fields (``field_validation.py``);
        ``mutated``: ``obj`` is a decoded object as admission mutations left it, whose nulls
        are validated, not pruned; ``served_as``: the (apiVersion, kind) its write was served as
        before they ran (a mutation that changed its kind is then refused by validation, as the
        apiserver's storage refuses it: ``kind: Invalid value: ...: must be <Kind>``).
        """
        if request is not None and request.namespace is not None:
            namespace = request.namespace
        try:
            served = self.served(*served_as) if served_as is not None else None
            if served is None:
                served = self._target(obj, request, field_validation)
            endpoint = self.by_resource(request.api_version, request.plural) if request is not None else None
            if endpoint is None or endpoint.kind != served.kind:
                endpoint = served
            stored = self._stored(endpoint, operation, old, subresource)
            prepared, warnings = self._prepare(served, operation, obj, stored, subresource, namespace,
                                               field_validation, keep_nulls=mutated)
            if endpoint is not served:
                prepared = _convert(prepared, endpoint)
            errors, more = self._validate(endpoint, operation, prepared, stored, subresource)
            served = endpoint
        except RequestError as exc:
            return Outcome(False, exc.code, exc.status(), exc.warnings, None, [])
        except RecursionError:
            exc = RequestError(400, _TOO_DEEP)
            return Outcome(False, exc.code, exc.status(), [], None, [])
        warnings += more
        warnings = list(dict.fromkeys(warnings))  # the apiserver sends each warning text once
        kind = prepared.get("kind") if isinstance(prepared.get("kind"), str) else served.kind
        name = (prepared.get("metadata") or {}).get("name") or ""
        if errors:
            status = fe.invalid_status(kind, group_of(prepared.get("apiVersion")), name, errors)
            return Outcome(False, 422, status, warnings, None, errors)
        old_meta = (old or {}).get("metadata") if operation == "UPDATE" else None
        warnings += [w for w in finalizer_warnings(prepared.get("metadata") or {}, old_meta) if w not in warnings]
        return Outcome(True, 201 if operation == "CREATE" else 200, None, warnings, prepared, [])

    def prepare(self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
                subresource: str | None = None, *, namespace: str | None = None,
                field_validation: FieldValidation = SERVER_DEFAULT) -> tuple[dict[str, Any], list[str]]:
        """Decode a request body as the apiserver would store it; raises ``RequestError`` on 400/404
        (under ``field_validation`` Strict, unknown fields are a 400)."""
        served = self._target(obj, None)
        try:
            stored = self._stored(served, operation, old, subresource)
            return self._prepare(served, operation, obj, stored, subresource, namespace, field_validation)
        except RecursionError:
            raise RequestError(400, _TOO_DEEP) from None

    def validate(self, operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None,
                 subresource: str | None = None) -> tuple[list[FieldError], list[str]]:
        """Validate a prepared object (``old`` as stored); returns (errors, warnings).

        Raises ``RequestError`` only when no CRD serves the object. A write to a subresource
        other than ``status`` (``scale``) is validated as a write of the whole object.
        """
        served = self._target(obj, None)
        if subresource != "status" or not served.status_subresource:
            subresource = None
        try:
            stored = self.decode_stored(served, old) if operation == "UPDATE" and isinstance(old, dict) else None
            return self._validate(served, operation, obj, stored, subresource)
        except RecursionError:
            raise RequestError(400, _TOO_DEEP) from None

    # -- internals ----------------------------------------------------------------------
    def _target(self, obj: Any, request: RequestPath | None,
                field_validation: FieldValidation = SERVER_DEFAULT) -> ServedVersion:
        """The served version a write goes to (the endpoint's, when the request path is known)."""
        if not isinstance(obj, dict):
            raise RequestError(400, "the object is not a JSON/YAML mapping")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        # unstructured decoding needs both, and says so with the object's JSON
        if not isinstance(kind, str) or not kind:
            raise RequestError(400, f"Object 'Kind' is missing in '{go_json(obj)}'")
        if not isinstance(api_version, str) or not api_version:
            raise RequestError(400, f"Object 'apiVersion' is missing in '{go_json(obj)}'")
        if request is not None:
            served = self.by_resource(request.api_version, request.plural)
            if served is None:
                raise RequestError(404, "the server could not find the requested resource")
            other = self.served(api_version, kind) if api_version != served.api_version else served
            if other is None or (other.group, other.kind) != (served.group, served.kind):
                raise _foreign_body(obj, served, field_validation)
            if request.name is not None and isinstance(obj.get("metadata"), dict):
                body_name = obj["metadata"].get("name")
                if body_name and body_name != request.name:
                    raise RequestError(400, f"the name of the object ({body_name}) does not match the name on "
                                            f"the URL ({request.name})")
            if api_version == served.api_version:
                return served
        served = self.served(api_version, kind)
        if served is None:
            raise RequestError(404, f"no CustomResourceDefinition serves {kind} in {api_version}")
        return served

    def decode_stored(self, served: ServedVersion, old: dict[str, Any]) -> dict[str, Any]:
        """An object read back from storage: pruned and defaulted under the current schema."""
        stored = copy_json(old)
        prune(stored, served.schema, root=True)
        apply_defaults(stored, served.schema)
        return stored

    def _stored(self, served: ServedVersion, operation: str, old: Any, subresource: str | None
                ) -> dict[str, Any] | None:
        """Check the request's shape; on UPDATE, the old object as read back from storage."""
        if operation not in ("CREATE", "UPDATE"):
            raise RequestError(400, f"unsupported operation {operation!r}: expected CREATE or UPDATE")
        if subresource not in (None, "", "status") or (subresource == "status" and not served.status_subresource):
            raise RequestError(404, "the server could not find the requested resource")
        if subresource == "status" and operation != "UPDATE":
            raise RequestError(405, "the /status subresource only takes updates")
        if operation == "CREATE":
            return None
        if not isinstance(old, dict):
            raise RequestError(400, "an UPDATE needs the old object (a mapping)")
        return self.decode_stored(served, old)

    def _prepare(self, served: ServedVersion, operation: str, obj: dict[str, Any], stored: dict[str, Any] | None,
                 subresource: str | None, namespace: str | None,
                 field_validation: FieldValidation = SERVER_DEFAULT,
                 keep_nulls: bool = False) -> tuple[dict[str, Any], list[str]]:
        obj = copy_json(obj)
        warnings: list[str] = []
        cannot = f'{obj.get("kind")} in version "{served.version}" cannot be handled as a {obj.get("kind")}'
        try:
            meta, unknown = coerce_object_meta(obj.get("metadata"), "")
        except MetadataDecodeError as exc:
            raise RequestError(400, f"{cannot}: {exc}") from None
        if obj.get("kind") == served.kind:  # the apiserver prunes only objects of the served kind
            unknown += prune(obj, served.schema, root=True, keep_nulls=keep_nulls)
            embedded_unknown: list[str] = []
            try:
                coerce_embedded(obj, served.schema, "", embedded_unknown)
            except EmbeddedMetadataError as exc:
                error = fe.invalid(exc.path, exc.value, exc.message)
                warned = _unknown_field_warnings(unknown) if field_validation == "Warn" else []
                raise RequestError(400, f"{cannot}: {error}", warned) from None
            unknown += sorted(embedded_unknown)
        try:
            warnings += apply_field_validation(field_validation, str(obj.get("kind")), served.version, unknown)
        except StrictDecodingError as exc:
            raise RequestError(400, str(exc)) from None
        if meta is None:
            obj.pop("metadata", None)
        else:
            obj["metadata"] = meta
        if obj.get("kind") == served.kind:
            apply_defaults(obj, served.schema)
        meta = obj.setdefault("metadata", {})
        if served.namespaced:
            if namespace is not None:
                if meta.get("namespace") and meta["namespace"] != namespace:
                    raise RequestError(
                        400, "the namespace of the provided object does not match the namespace sent on the request",
                        warnings)
                meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName") and operation == "CREATE":
            meta["name"] = meta["generateName"] + _name_suffix(obj)
        if not meta:
            obj.pop("metadata")
        if not served.status_subresource:
            return obj, warnings
        if operation == "CREATE":
            obj.pop("status", None)
        elif subresource == "status":
            merged = copy_json(stored)
            if "status" in obj:
                merged["status"] = obj["status"]
            else:
                merged.pop("status", None)
            obj = merged
        else:
            if "status" in stored:
                obj["status"] = copy_json(stored["status"])
            else:
                obj.pop("status", None)
        return obj, warnings

    def _validate(self, served: ServedVersion, operation: str, obj: dict[str, Any], stored: dict[str, Any] | None,
                  subresource: str | None) -> tuple[list[FieldError], list[str]]:
        update = stored is not None
        old_value: Any = stored if stored is not None else ABSENT
        errors: list[FieldError] = []
        type_errors = _type_meta_errors(served, obj)
        status_write = update and subresource == "status" and served.status_subresource
        if type_errors:
            errors += type_errors
        else:
            meta = obj.get("metadata") or {}
            if stored is not None:
                errors += validate_object_meta_update(meta, stored.get("metadata") or {})
            else:
                errors += validate_object_meta(meta, namespaced=served.namespaced)
            if status_write:
                if "status" in obj and served.status_validator is not None:
                    errors += served.status_validator.validate(obj["status"], stored.get("status", ABSENT))
            else:
                errors += served.validator.validate(obj, old_value)
                errors += _scale_errors(served.scale, obj, spec=True)
            errors += _scale_errors(served.scale, obj, spec=False)
        if status_write:
            errors += list_type_errors(served.schema, obj, stored)
            errors += _embedded_errors(served.schema, obj, None)
        else:
            errors += _embedded_errors(served.schema, obj, None)
            errors += list_type_errors(served.schema, obj, stored)
        warnings: list[str] = []
        if served.cel is not None:
            if any(err.blocking for err in errors):
                errors.append(MARKER)
            else:
                cel_errors, warnings = served.cel.validate(obj, old_value)
                errors += cel_errors
        return errors, warnings


def _foreign_body(obj: dict[str, Any], endpoint: ServedVersion, field_validation: FieldValidation) -> RequestError:
    """The 400 for a body whose apiVersion is none of the endpoint CRD's versions, as the apiserver
    answers it after decoding the body: the CRD's decoder has no schema for that version, so an
    object of its group and kind keeps nothing but apiVersion, kind and metadata (every other
    field is unknown), and one of another group or kind is not pruned at all; its metadata is
    decoded as ObjectMeta either way. Under Strict those unknown fields are the error, named
    in the body's own kind and version; else the version's 400 carries them as warnings
    (``customresource_handler.go``, ``schemaCoercingDecoder``; ``handlers/create.go``)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    group, version = split(api_version)
    try:
        _, unknown = coerce_object_meta(obj.get("metadata"), "")
    except MetadataDecodeError as exc:
        return RequestError(400, f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}')
    if (group, kind) == (endpoint.group, endpoint.kind):  # pruned by no schema: only the type and metadata stay
        unknown += sorted(key for key in obj if key not in ("apiVersion", "kind", "metadata"))
    mismatch = (f"the API version in the data ({api_version}) does not match the expected API version "
                f"({endpoint.api_version})")
    try:
        return RequestError(400, mismatch, apply_field_validation(field_validation, kind, version, unknown))
    except StrictDecodingError as exc:
        return RequestError(400, str(exc))


def _convert(obj: dict[str, Any], endpoint: ServedVersion) -> dict[str, Any]:
    """A body of another served version, decoded (pruned and defaulted, its unknown fields
    warned about) in its own version, converted to the endpoint's: the ``None`` strategy sets
    the apiVersion, and the converter's schema coercion prunes what the endpoint's version does
    not know, reporting nothing (``schemaCoercingConverter`` discards the pruned paths)."""
    obj["apiVersion"] = endpoint.api_version
    if obj.get("kind") == endpoint.kind:
        prune(obj, endpoint.schema, root=True)
    return obj


def _unknown_field_warnings(paths: list[str]) -> list[str]:
    return [f'unknown field "{path}"' for path in paths]


def _name_suffix(obj: dict[str, Any]) -> str:
    """Five characters from the apiserver's alphabet; derived from the object, so runs repeat."""
    digest = hashlib.sha256(repr(sorted((obj.get("metadata") or {}).items())).encode()).digest()
    return "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])


def _type_meta_errors(served: ServedVersion, obj: dict[str, Any]) -> list[FieldError]:
    errs = []
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind != served.kind:
        errs.append(fe.invalid("kind", kind, f"must be {served.kind}"))
    if api_version != served.api_version:
        errs.append(fe.invalid("apiVersion", api_version, f"must be {served.api_version}"))
    return errs


def _nested(obj: dict[str, Any], json_path: str, expected: str) -> tuple[Any, bool, str | None]:
    """``unstructured.NestedFieldNoCopy`` plus the final type check of ``NestedInt64``/``NestedString``."""
    fields = json_path.lstrip(".").split(".")
    value: Any = obj
    for i, name in enumerate(fields):
        if value is None:
            return None, False, None
        if not isinstance(value, dict):
            where = "." + ".".join(fields[:i + 1])
            return None, False, (f"{where} accessor error: {go_value(value)} is of the type {go_type_name(value)}, "
                                 "expected map[string]interface{}")
        if name not in value:
            return None, False, None
        value = value[name]
    if value is None:
        return None, False, None
    if expected == "int64" and (isinstance(value, bool) or not isinstance(value, int)):
        return None, True, f".{'.'.join(fields)} accessor error: {go_value(value)} is of the type " \
                           f"{go_type_name(value)}, expected int64"
    if expected == "string" and not isinstance(value, str):
        return None, True, f".{'.'.join(fields)} accessor error: {go_value(value)} is of the type " \
                           f"{go_type_name(value)}, expected string"
    return value, True, None


def _scale_errors(scale: dict[str, Any] | None, obj: dict[str, Any], *, spec: bool) -> list[FieldError]:
    if not scale:
        return []
    errs: list[FieldError] = []
    paths = [scale.get("specReplicasPath")] if spec else [scale.get("statusReplicasPath")]
    for json_path in paths:
        if not json_path:
            continue
        value, _, problem = _nested(obj, json_path, "int64")
        if problem:
            errs.append(fe.invalid(json_path, 0, problem))
        elif value is not None and value < 0:
            errs.append(fe.invalid(json_path, value, "should be a non-negative integer"))
        elif value is not None and value > 2 ** 31 - 1:
            errs.append(fe.invalid(json_path, value, "should be less than or equal to 2147483647"))
    selector = scale.get("labelSelectorPath")
    if not spec and selector:
        _, _, problem = _nested(obj, selector, "string")
        if problem:
            errs.append(fe.invalid(selector, "", problem))
    return errs


def _embedded_errors(node: Node, value: Any, path: str | None) -> list[FieldError]:
    if not node.has_embedded:
        return []
    errs: list[FieldError] = []
    if isinstance(value, dict):
        if node.embedded:
            errs += validate_embedded_resource(path or "", value)
        for key in sorted(value):
            child = node.properties.get(key)
            if child is not None:
                errs += _embedded_errors(child, value[key], f"{path}.{key}" if path else key)
            elif node.additional is not None:
                errs += _embedded_errors(node.additional, value[key], f"{path or ''}[{key}]")
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            errs += _embedded_errors(node.items, item, f"{path or ''}[{i}]")
    return errs


def list_type_errors(schema: Node, obj: dict[str, Any], stored: dict[str, Any] | None) -> list[FieldError]:
    """List-type checks; skipped on UPDATE when the stored object already fails them (ratcheting)."""
    if stored is not None and validate_list_types(schema, stored):
        return []
    return validate_list_types(schema, obj)


__all__ = ["CRDRegistry", "CRDLoadError", "RequestError", "RequestPath", "Outcome", "FieldError"]
