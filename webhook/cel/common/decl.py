"""CEL types of CRD schema nodes (Kubernetes' ``DeclType`` from ``common.SchemaDeclType``).

A ``DeclType`` adds to a node's ``CelType`` what the schema knows about it: its object fields
(by escaped CEL name), bounds used by the cost estimator (``max_elements``) and the minimum
serialized size the unbounded defaults derive from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from webhook.cel.common.escaping import RESERVED_SYMBOLS, escape
from webhook.cel.common.types import (
    BOOL, BYTES, DOUBLE, DURATION, DYN, INT, STRING, TIMESTAMP, CelType, list_of, map_of)
from webhook.cel.limits import MAX_REQUEST_SIZE_BYTES

# the request size limit (``limits``) bounds every unbounded list, map and string
MIN_STRING_SIZE = 2               # ""
MIN_DURATION_SIZE_JSON = 3        # "0"
MAX_DURATION_SIZE_JSON = 32
JSON_DATE_SIZE = 12               # "2006-01-02"
MIN_DATETIME_SIZE_JSON = 21
MAX_DATETIME_SIZE_JSON = 32


@dataclass(eq=False)
class DeclType:
    """The declared CEL type of one schema node."""

    cel: CelType
    max_elements: int = 0
    min_serialized_size: int = 1
    fields: dict[str, "DeclType"] = field(default_factory=dict)   # objects: escaped name -> type
    field_names: dict[str, str] = field(default_factory=dict)     # objects: escaped -> property
    by_property: dict[str, tuple[str, "DeclType"]] = field(default_factory=dict)  # property -> (escaped, type)
    required: frozenset[str] = frozenset()
    elem: "DeclType | None" = None        # lists: items; maps: values
    list_type: str | None = None          # lists: atomic | set | map
    map_keys: tuple[str, ...] = ()        # listType=map keys
    format: str | None = None             # strings converted to timestamp/duration/bytes
    int_or_string: bool = False
    nullable: bool = False
    plain: bool = False                   # JSON values of this type need no conversion for CEL

    @property
    def kind(self) -> str:
        return self.cel.kind


_SIMPLE = {"boolean": (BOOL, 4), "number": (DOUBLE, 1), "integer": (INT, 1)}


def decl_type(schema: Mapping[str, Any], *, is_root: bool = False, name: str = "selfType") -> DeclType | None:
    """The DeclType of a structural schema node, or None when CEL cannot see the node."""
    decl = _decl_type(schema, is_root, name)
    if decl is not None:
        decl.nullable = bool(schema.get("nullable"))
    return decl


def _decl_type(schema: Mapping[str, Any], is_root: bool, name: str) -> DeclType | None:
    if schema.get("x-kubernetes-int-or-string"):
        max_length = schema.get("maxLength")
        bound = _zero_if_negative(max_length) * 4 if max_length is not None else MAX_REQUEST_SIZE_BYTES - 2
        return DeclType(DYN, max_elements=bound, min_serialized_size=1, int_or_string=True, plain=True)
    if is_root:
        schema = with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return None
        elem = decl_type(items, is_root=bool(items.get("x-kubernetes-embedded-resource")), name=f"{name}.@idx")
        if elem is None:
            return None
        max_items = schema.get("maxItems")
        bound = _zero_if_negative(max_items) if max_items is not None else (
            (MAX_REQUEST_SIZE_BYTES - 2) // (elem.min_serialized_size + 1))
        return DeclType(list_of(elem.cel), max_elements=bound, min_serialized_size=2, elem=elem,
                        list_type=schema.get("x-kubernetes-list-type"),
                        map_keys=tuple(schema.get("x-kubernetes-list-map-keys") or ()), plain=elem.plain)
    if kind == "object":
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            elem = decl_type(additional, is_root=bool(additional.get("x-kubernetes-embedded-resource")),
                             name=f"{name}.@elem")
            if elem is None:
                return None
            max_props = schema.get("maxProperties")
            bound = _zero_if_negative(max_props) if max_props is not None else (
                (MAX_REQUEST_SIZE_BYTES - 2) // (elem.min_serialized_size + 6))
            return DeclType(map_of(STRING, elem.cel), max_elements=bound, min_serialized_size=2, elem=elem,
                            plain=elem.plain)
        required = set(schema.get("required") or ())
        fields: dict[str, DeclType] = {}
        names: dict[str, str] = {}
        min_size = 2
        for prop_name, prop in (schema.get("properties") or {}).items():
            escaped = escape(prop_name)
            prop_type = decl_type(prop, is_root=bool(prop.get("x-kubernetes-embedded-resource")),
                                  name=f"{name}.{escaped or prop_name}")
            if prop_type is None:
                continue
            if escaped is not None:
                fields[escaped] = prop_type
                names[escaped] = prop_name
            if prop_name in required and prop.get("default") is None:
                min_size += len(prop_name) + prop_type.min_serialized_size + 4
        # plain: property names are CEL names, no field needs conversion, no null can stand in
        plain = all(escaped == prop and prop not in RESERVED_SYMBOLS for escaped, prop in names.items()) and all(
            field.plain for field in fields.values()) and not any(
            isinstance(prop, Mapping) and prop.get("nullable") for prop in (schema.get("properties") or {}).values())
        return DeclType(CelType("object", name=name), min_serialized_size=min_size, fields=fields,
                        field_names=names, required=frozenset(required),
                        by_property={prop: (escaped, fields[escaped]) for escaped, prop in names.items()},
                        plain=plain)
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "byte":
            max_length = schema.get("maxLength")
            bound = _zero_if_negative(max_length) if max_length is not None else MAX_REQUEST_SIZE_BYTES - 2
            return DeclType(BYTES, max_elements=bound, min_serialized_size=MIN_STRING_SIZE, format=fmt)
        if fmt == "duration":
            return DeclType(DURATION, max_elements=MAX_DURATION_SIZE_JSON,
                            min_serialized_size=MIN_DURATION_SIZE_JSON, format=fmt)
        if fmt == "date":
            return DeclType(TIMESTAMP, max_elements=JSON_DATE_SIZE, min_serialized_size=JSON_DATE_SIZE, format=fmt)
        if fmt == "date-time":
            return DeclType(TIMESTAMP, max_elements=MAX_DATETIME_SIZE_JSON,
                            min_serialized_size=MIN_DATETIME_SIZE_JSON, format=fmt)
        max_length = schema.get("maxLength")
        if max_length is not None:
            bound = _zero_if_negative(max_length) * 4
        elif schema.get("enum"):
            bound = max((len(v.encode()) for v in schema["enum"] if isinstance(v, str)), default=0)
        else:
            bound = MAX_REQUEST_SIZE_BYTES - 2
        return DeclType(STRING, max_elements=bound, min_serialized_size=MIN_STRING_SIZE, plain=True)
    simple = _SIMPLE.get(kind)  # type: ignore[arg-type]
    if simple is not None:
        return DeclType(simple[0], min_serialized_size=simple[1], plain=simple[0] is not DOUBLE)
    return None


def with_type_and_object_meta(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """Resource roots always expose apiVersion, kind, metadata.name and metadata.generateName."""
    props = schema.get("properties") or {}
    meta = props.get("metadata") or {}
    meta_props = meta.get("properties") or {}
    if (_has_type(props.get("kind"), "string") and _has_type(props.get("apiVersion"), "string")
            and _has_type(meta, "object") and _has_type(meta_props.get("name"), "string")
            and _has_type(meta_props.get("generateName"), "string")):
        return schema
    string = {"type": "string"}
    result = dict(schema)
    result["properties"] = {
        **props,
        "kind": string,
        "apiVersion": string,
        "metadata": {"type": "object", "properties": {"name": string, "generateName": string}},
    }
    return result


def _has_type(schema: Any, kind: str) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == kind


def _zero_if_negative(value: Any) -> int:
    return max(int(value), 0)
