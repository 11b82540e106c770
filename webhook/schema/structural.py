"""A CRD version's OpenAPI schema, compiled once into a tree of ``Node`` objects.

Every keyword is read and normalised here (patterns compiled, enum values typed,
formats resolved, flags for "anything below needs defaulting / CEL / list checks"),
so the per-object passes only walk the tree and never interpret the raw schema.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import re2

from webhook.gocompat.regexp import GoRegexp
from webhook.validation.strfmt import FORMAT_CHECKERS, kept_format

ABSENT: Any = object()  # "no default", "no old value"

_PLAIN_PYTHON_TYPES = {"string": frozenset((str,)), "boolean": frozenset((bool,)), "integer": frozenset((int,)),
                       "number": frozenset((int, float))}
_FLOAT32_MAX = 3.4028235677973366e38  # values at or beyond this overflow ParseFloat(s, 32)
_INT_RANGES = {"int32": (-(2 ** 31), 2 ** 31 - 1)}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


# the formats kube-openapi's numberValidator passes on, per type (SchemaValidator.numberValidator)
_NUMBER_FORMATS = {"integer": ("int32", "int64"), "number": ("float", "double")}


def fits_type(value: int | float, typ: str, fmt: str) -> bool:
    """kube-openapi's ``IsValueValidAgainstRange``: can ``typ``/``fmt`` hold the number?"""
    if typ == "integer":
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value) or not value.is_integer():
                return False
            value = int(value)
        low, high = _INT_RANGES.get(fmt, _INT64)
        return low <= value <= high
    if fmt in ("float", "float32"):
        return abs(float(value)) < _FLOAT32_MAX
    return True


def _compile_pattern(pattern: str) -> GoRegexp | None:
    try:
        return GoRegexp(pattern)
    except re2.error:  # the apiserver would have rejected the CRD; never match
        return None


@dataclass(eq=False, slots=True)
class Node:
    """One schema node (structural part plus value validations)."""

    path: str = ""  # where it sits in the schema, for messages about the schema itself
    types: tuple[str, ...] = ()  # () = any; int-or-string = ("integer", "string")
    nullable: bool = False
    format: str = ""
    properties: dict[str, "Node"] = field(default_factory=dict)
    sorted_properties: tuple[tuple[str, "Node"], ...] = ()
    additional: "Node | None" = None  # additionalProperties schema
    additional_allowed: bool = True  # additionalProperties: false
    items: "Node | None" = None
    required: tuple[str, ...] = ()
    enum: list[Any] | None = None
    default: Any = ABSENT
    preserve_unknown: bool = False
    embedded: bool = False
    int_or_string: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str | None = None
    # value validations
    pattern: Any = None
    pattern_text: str = ""
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    all_of: tuple["Node", ...] = ()
    any_of: tuple["Node", ...] = ()
    one_of: tuple["Node", ...] = ()
    not_: "Node | None" = None
    format_checker: Any = None
    # CEL
    rules: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    # subtree summaries, for skipping whole passes
    has_defaults: bool = False
    has_rules: bool = False
    has_list_types: bool = False
    has_embedded: bool = False
    compiled_rules: Any = None  # set lazily by the CEL layer
    # whether multipleOf/minimum/maximum themselves fit the type and format (else the
    # apiserver reports that, and compares as plain floats)
    multiple_of_fits: bool = True
    minimum_fits: bool = True
    maximum_fits: bool = True
    has_combinators: bool = False
    has_string_checks: bool = False
    has_number_checks: bool = False
    # kube-openapi's numberValidator type and format: the schema's one type (integer or number)
    # and a format valid for it, else none (int-or-string, two types: no range of a type applies)
    number_type: str = ""
    number_format: str = ""
    enum_strings: frozenset | None = None  # the enum's string members, for a quick string check
    # JSON types a value may have to pass this node with nothing else to check (a plain leaf)
    plain_types: frozenset = frozenset()
    # an object (array) here needs only the object's (array's) own checks: no type error
    # possible, no format, combinators or enum
    plain_object: bool = False
    plain_array: bool = False
    plain_string: bool = False  # a string here needs only the string checks and the enum

    @property
    def type(self) -> str:
        return self.types[0] if len(self.types) == 1 else ""

    def child(self, key: str) -> "Node | None":
        node = self.properties.get(key)
        return node if node is not None else self.additional


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    return None


def _schemas(schema: dict[str, Any], key: str) -> list[Any]:
    value = schema.get(key)
    return value if isinstance(value, list) else []


def compile_schema(schema: dict[str, Any] | None, path: str = "") -> Node:
    """Compile an ``openAPIV3Schema`` (or any sub-schema) into a ``Node`` tree."""
    if not isinstance(schema, dict):  # a malformed schema constrains nothing (the apiserver would refuse it)
        schema = {}
    node = Node(path=path, raw=schema)
    typ = schema.get("type")
    node.int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    if node.int_or_string:
        node.types = ("integer", "string")
    elif isinstance(typ, str) and typ:
        node.types = (typ,)
    elif isinstance(typ, list):
        node.types = tuple(t for t in typ if isinstance(t, str))
    node.nullable = bool(schema.get("nullable"))
    fmt = schema.get("format") if isinstance(schema.get("format"), str) else ""
    node.format = kept_format(typ if isinstance(typ, str) else "", fmt)
    node.format_checker = FORMAT_CHECKERS.get(node.format.replace("-", ""))
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    node.properties = {k: compile_schema(v, f"{path}.properties[{k}]") for k, v in props.items()}
    node.sorted_properties = tuple(sorted(node.properties.items()))
    addl = schema.get("additionalProperties")
    if isinstance(addl, dict):
        node.additional = compile_schema(addl, f"{path}.additionalProperties")
    elif addl is False:
        node.additional_allowed = False
    items = schema.get("items")
    if isinstance(items, dict):
        node.items = compile_schema(items, f"{path}.items")
    node.required = tuple(r for r in (schema.get("required") or ()) if isinstance(r, str)) \
        if isinstance(schema.get("required"), list) else ()
    if "enum" in schema and isinstance(schema["enum"], list):
        node.enum = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in schema["enum"]]
    if schema.get("default") is not None:  # a null default is no default
        node.default = schema["default"]
    node.preserve_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    node.embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    node.list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys")
    node.list_map_keys = tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else ()
    node.map_type = schema.get("x-kubernetes-map-type")
    if isinstance(schema.get("pattern"), str):
        node.pattern_text = schema["pattern"]
        node.pattern = _compile_pattern(node.pattern_text)
    for attr, key in (("min_length", "minLength"), ("max_length", "maxLength"), ("min_items", "minItems"),
                      ("max_items", "maxItems"), ("min_properties", "minProperties"),
                      ("max_properties", "maxProperties")):
        value = schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(node, attr, value)
    node.minimum = _number(schema.get("minimum"))
    node.maximum = _number(schema.get("maximum"))
    node.exclusive_minimum = bool(schema.get("exclusiveMinimum"))
    node.exclusive_maximum = bool(schema.get("exclusiveMaximum"))
    multiple = _number(schema.get("multipleOf"))
    node.multiple_of = float(multiple) if multiple is not None else None
    node.unique_items = bool(schema.get("uniqueItems"))
    node.all_of = tuple(compile_schema(s, f"{path}.allOf[{i}]") for i, s in enumerate(_schemas(schema, "allOf")))
    node.any_of = tuple(compile_schema(s, f"{path}.anyOf[{i}]") for i, s in enumerate(_schemas(schema, "anyOf")))
    node.one_of = tuple(compile_schema(s, f"{path}.oneOf[{i}]") for i, s in enumerate(_schemas(schema, "oneOf")))
    if isinstance(schema.get("not"), dict):
        node.not_ = compile_schema(schema["not"], f"{path}.not")
    rules = schema.get("x-kubernetes-validations")
    node.rules = [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []
    node.has_combinators = bool(node.all_of or node.any_of or node.one_of or node.not_ is not None)
    node.has_string_checks = bool(node.max_length is not None or node.min_length is not None or node.pattern_text
                                  or node.format_checker is not None)
    if len(node.types) == 1 and node.types[0] in _NUMBER_FORMATS:
        node.number_type = node.types[0]
        node.number_format = node.format if node.format in _NUMBER_FORMATS[node.number_type] else ""
    for attr in ("multiple_of", "minimum", "maximum"):
        bound = getattr(node, attr)
        if bound is not None:
            setattr(node, f"{attr}_fits", fits_type(bound, node.number_type, node.number_format))
    node.has_number_checks = bool(node.multiple_of is not None or node.minimum is not None
                                  or node.maximum is not None or node.number_type == "integer"
                                  or node.number_format in ("int32", "float"))
    if node.enum is not None:
        node.enum_strings = frozenset(v for v in node.enum if isinstance(v, str))
    plain = (not node.format and node.enum is None and not node.has_combinators and not node.has_string_checks
             and node.multiple_of is None and node.minimum is None and node.maximum is None
             and len(node.types) == 1)
    if plain:
        node.plain_types = _PLAIN_PYTHON_TYPES.get(node.types[0], frozenset())
    bare = not node.format and node.enum is None and not node.has_combinators
    node.plain_object = bare and node.types in ((), ("object",))
    node.plain_array = bare and node.types in ((), ("array",))
    node.plain_string = node.types == ("string",) and not node.has_combinators  # (formats never fail a type check)

    children = [*node.properties.values(), *(n for n in (node.additional, node.items) if n is not None)]
    node.has_defaults = any(c.default is not ABSENT or c.has_defaults for c in children)
    node.has_rules = bool(node.rules) or any(c.has_rules for c in children)
    node.has_list_types = node.list_type in ("set", "map") or any(c.has_list_types for c in children)
    node.has_embedded = node.embedded or any(c.has_embedded for c in children)
    return node
