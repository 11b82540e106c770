"""``metadata``: decoding into ObjectMeta (root and embedded resources) and its validation.

The apiserver round-trips every ``metadata`` through Go's ``metav1.ObjectMeta``: unknown
fields are dropped (reported as unknown), a wrongly typed field fails decoding with
``encoding/json``'s message, empty fields disappear.
"""

from __future__ import annotations

from typing import Any

from webhook.apiversion import version_of
from webhook.gocompat.fmt import go_quote
from webhook.schema import fielderrors as fe
from webhook.validation import names

# ObjectMeta's JSON fields -> Go type name (for decode errors and normalisation)
_STRING_FIELDS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion")
_FIELDS: dict[str, str] = {
    **{f: "string" for f in _STRING_FIELDS},
    "generation": "int64",
    "creationTimestamp": "v1.Time",
    "deletionTimestamp": "v1.Time",
    "deletionGracePeriodSeconds": "int64",
    "labels": "map[string]string",
    "annotations": "map[string]string",
    "ownerReferences": "[]v1.OwnerReference",
    "finalizers": "[]string",
    "managedFields": "[]v1.ManagedFieldsEntry",
}
_STANDARD_FINALIZERS = {"kubernetes", "orphan", "foregroundDeletion"}


class MetadataDecodeError(ValueError):
    """``json: cannot unmarshal ...`` for a field of ObjectMeta."""


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_error(value: Any, field: str, go_type: str) -> MetadataDecodeError:
    kind = _json_kind(value)
    if kind == "number" and go_type == "int64":
        kind = f"number {value}"
    return MetadataDecodeError(
        f"json: cannot unmarshal {kind} into Go struct field ObjectMeta.{field} of type {go_type}")


def _decode_field(key: str, value: Any) -> Any:
    """One ObjectMeta field as Go would decode and re-encode it; ``None`` when it comes out empty."""
    go_type = _FIELDS[key]
    if value is None:
        return None
    if go_type == "string":
        if not isinstance(value, str):
            raise _type_error(value, key, go_type)
        return value or None
    if go_type == "int64":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise _type_error(value, key, go_type)
        return int(value) or (None if key == "generation" else 0)
    if go_type == "v1.Time":
        if not isinstance(value, str):
            raise _type_error(value, key, go_type)
        return value or None
    if go_type == "map[string]string":
        if not isinstance(value, dict):
            raise _type_error(value, key, go_type)
        for v in value.values():
            if v is not None and not isinstance(v, str):
                raise _type_error(v, key, "string")
        return {k: ("" if v is None else v) for k, v in value.items()} or None
    if go_type == "[]string":
        if not isinstance(value, list):
            raise _type_error(value, key, go_type)
        for v in value:
            if v is not None and not isinstance(v, str):
                raise _type_error(v, key, "string")
        return ["" if v is None else v for v in value] or None
    # lists of structs: kept as given when shaped like a list of objects
    if not isinstance(value, list):
        raise _type_error(value, key, go_type)
    for v in value:
        if v is not None and not isinstance(v, dict):
            raise _type_error(v, key, go_type[2:])
    return value or None


def coerce_object_meta(metadata: Any, parent_path: str) -> tuple[dict[str, Any] | None, list[str]]:
    """Decode ``metadata`` as ObjectMeta: (normalised metadata, unknown field paths).

    Raises ``MetadataDecodeError`` when a known field has the wrong JSON type.
    """
    prefix = f"{parent_path}.metadata" if parent_path else "metadata"
    if metadata is None:
        return None, []
    if not isinstance(metadata, dict):
        raise MetadataDecodeError(
            f"json: cannot unmarshal {_json_kind(metadata)} into Go value of type v1.ObjectMeta")
    unknown: list[str] = []
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if key not in _FIELDS:
            unknown.append(f"{prefix}.{key}")
            continue
        decoded = _decode_field(key, value)
        if decoded is not None:
            out[key] = decoded
    unknown.sort()
    return out, unknown


def validate_object_meta(meta: dict[str, Any], *, namespaced: bool, name_fn=names.name_is_dns_subdomain,
                         path: str = "metadata") -> list[fe.FieldError]:
    """``ValidateObjectMetaAccessor`` (name, generateName, namespace, labels, annotations, finalizers)."""
    errs: list[fe.FieldError] = []
    generate_name = meta.get("generateName") or ""
    name = meta.get("name") or ""
    if generate_name:
        errs += [fe.invalid(f"{path}.generateName", generate_name, m) for m in name_fn(generate_name, True)]
    if not name:
        errs.append(fe.required(f"{path}.name", "name or generateName is required"))
    else:
        errs += [fe.invalid(f"{path}.name", name, m) for m in name_fn(name, False)]
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(fe.required(f"{path}.namespace"))
        else:
            errs += [fe.invalid(f"{path}.namespace", namespace, m) for m in names.dns1123_label(namespace)]
    elif namespace:
        errs.append(fe.forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(fe.invalid(f"{path}.generation", generation, "must be greater than or equal to 0"))
    if meta.get("labels"):
        errs += validate_labels(meta["labels"], f"{path}.labels")
    if meta.get("annotations"):
        errs += validate_annotations(meta["annotations"], f"{path}.annotations")
    if meta.get("ownerReferences"):
        errs += validate_owner_references(meta["ownerReferences"], f"{path}.ownerReferences")
    if meta.get("finalizers"):
        errs += validate_finalizers(meta["finalizers"], f"{path}.finalizers")
    return errs


def validate_object_meta_update(meta: dict[str, Any], old: dict[str, Any], path: str = "metadata"
                                ) -> list[fe.FieldError]:
    """``ValidateObjectMetaAccessorUpdate`` (immutable identity, labels, annotations)."""
    errs: list[fe.FieldError] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        new_value, old_value = meta.get(key) or "", old.get(key) or ""
        if key in ("uid", "creationTimestamp") and not new_value:
            continue  # the apiserver carries these over from the stored object
        if new_value != old_value:
            errs.append(fe.invalid(f"{path}.{key}", new_value, "field is immutable"))
    errs += validate_labels(meta.get("labels") or {}, f"{path}.labels")
    errs += validate_annotations(meta.get("annotations") or {}, f"{path}.annotations")
    errs += validate_owner_references(meta.get("ownerReferences") or [], f"{path}.ownerReferences")
    return errs


def validate_owner_references(refs: list[Any], path: str) -> list[fe.FieldError]:
    """``ValidateOwnerReferences``: apiVersion (with a version), kind, name, uid; one controller."""
    errs: list[fe.FieldError] = []
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version = str(ref.get("apiVersion") or "")
        if not version_of(api_version):
            errs.append(fe.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(fe.invalid(f"{path}.{key}", str(ref.get(key) or ""), "must not be empty"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                errs.append(fe.invalid(path, refs, "Only one reference can have Controller set to true. Found "
                                                   f'"true" in references for {controller} and {current}'))
            else:
                controller = current
    return errs


def validate_labels(labels: dict[str, str], path: str) -> list[fe.FieldError]:
    errs: list[fe.FieldError] = []
    for key in sorted(labels):
        errs += [fe.invalid(path, key, m) for m in names.qualified_name(key)]
        errs += [fe.invalid(path, labels[key], m) for m in names.label_value(labels[key])]
    return errs


def validate_annotations(annotations: dict[str, str], path: str) -> list[fe.FieldError]:
    errs: list[fe.FieldError] = []
    total = 0
    for key in sorted(annotations):
        errs += [fe.invalid(path, key, m) for m in names.qualified_name(key.lower())]
        total += len(key.encode()) + len(annotations[key].encode())
    if total > 256 * 1024:
        errs.append(fe.FieldError(fe.TOO_LONG, path, fe.OMIT, "must have at most 262144 bytes"))
    return errs


def validate_finalizers(finalizers: list[str], path: str) -> list[fe.FieldError]:
    errs: list[fe.FieldError] = []
    for finalizer in finalizers:
        errs += [fe.invalid(path, finalizer, m) for m in names.qualified_name(finalizer)]
    return errs


def finalizer_warnings(meta: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """Warnings for newly added finalizers that are not domain-qualified."""
    added = set(meta.get("finalizers") or ())
    if old is not None:
        added -= set(old.get("finalizers") or ())
    path = "metadata.finalizers"
    warnings: list[str] = []
    for finalizer in sorted(added):
        warnings += [f"{path}: {go_quote(finalizer)}: {m}" for m in names.qualified_name(finalizer)]
        if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            warnings.append(f"{path}: {go_quote(finalizer)}: prefer a domain-qualified finalizer name to avoid "
                            "accidental conflicts with other finalizer writers")
    return warnings


def validate_embedded_resource(path: str, obj: dict[str, Any]) -> list[fe.FieldError]:
    """``validateEmbeddedResource``: apiVersion and kind present and well-formed, metadata valid."""
    errs: list[fe.FieldError] = []
    if "apiVersion" not in obj:
        errs.append(fe.required(f"{path}.apiVersion"))
    if "kind" not in obj:
        errs.append(fe.required(f"{path}.kind"))
    for key in sorted(obj):
        value = obj[key]
        if key == "apiVersion":
            if not isinstance(value, str):
                errs.append(fe.invalid(f"{path}.apiVersion", value, "must be a string"))
            elif not value:
                errs.append(fe.invalid(f"{path}.apiVersion", value, "must not be empty"))
            elif value.count("/") > 1:
                errs.append(fe.invalid(f"{path}.apiVersion", value,
                                       f"unexpected GroupVersion string: {value}"))
        elif key == "kind":
            if not isinstance(value, str):
                errs.append(fe.invalid(f"{path}.kind", value, "must be a string"))
            elif not value:
                errs.append(fe.invalid(f"{path}.kind", value, "must not be empty"))
            else:
                msgs = names.dns1035_label(value.lower())
                if msgs:
                    errs.append(fe.invalid(f"{path}.kind", value,
                                           "may have mixed case, but should otherwise match: " + ",".join(msgs)))
        elif key == "metadata":
            try:
                meta, _ = coerce_object_meta(value, "")
            except MetadataDecodeError as exc:
                errs.append(fe.invalid(f"{path}.metadata", value, str(exc)))
                continue
            meta = dict(meta or {})
            meta.setdefault("name", "fakename")
            errs += validate_object_meta(meta, namespaced=bool(meta.get("namespace")),
                                         name_fn=names.path_segment_name, path=f"{path}.metadata")
    return errs
