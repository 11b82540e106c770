"""CEL type names: parsing cel-go's spelling (``list(int)``) and printing checked types."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
# Go's dynamic type of a CEL value of each kind, as a failed type assertion in cel-go names it
# (lists and maps built by CEL itself; data the apiserver hands over has wrapper types of its own)
GO_VALUE_TYPES = {
    "string": "types.String", "uint": "types.Uint", "double": "types.Double", "bool": "types.Bool",
    "bytes": "types.Bytes", "null_type": "types.Null", TIMESTAMP: "types.Timestamp", DURATION: "types.Duration",
    "list": "*types.baseList", "map": "*types.baseMap",
}


def not_an_int(go_type: str) -> str:
    """The apiserver's error for a ``flatten(depth)`` depth of another type: its runtime cost
    tracker asserts ``args[1].(types.Int)`` and cel-go's interpreter turns the panic into an error."""
    return f"internal error: interface conversion: ref.Val is {go_type}, not types.Int"


# cel-go's operators, size() and sort() dispatch on a trait of the first operand (common/types: each
# type's trait mask); a value without it fails as "no such overload: <function>", unless it
# is a receiver type, whose Receive() answers "no such overload" like a wrong second operand
_TRAITS = {
    "adder": {"int", "uint", "double", "string", "bytes", "list", TIMESTAMP, DURATION},
    "subtractor": {"int", "uint", "double", TIMESTAMP, DURATION},
    "multiplier": {"int", "uint", "double"},
    "divider": {"int", "uint", "double"},
    "modder": {"int", "uint"},
    "negator": {"int", "double", "bool", DURATION},
    "comparer": {"int", "uint", "double", "string", "bytes", "bool", TIMESTAMP, DURATION},
    "sizer": {"string", "bytes", "list", "map"},
    "lister": {"list"},
}
_OPERATOR_TRAITS = {
    "_+_": "adder", "_-_": "subtractor", "_*_": "multiplier", "_/_": "divider", "_%_": "modder", "-_": "negator",
    "_<_": "comparer", "_<=_": "comparer", "_>_": "comparer", "_>=_": "comparer", "size": "sizer",
    "sort": "lister",  # the lists extension's sort(): one binding for its overloads, on lists
}
_RECEIVERS = {"string", TIMESTAMP, DURATION}
TRAIT_DISPATCHED = frozenset(_OPERATOR_TRAITS)


def operator_error(function: str, first: str) -> str:
    """cel-go's error for an operator (or ``size``, ``sort``) that fails on its operands, the first
    operand's CEL type name given."""
    if first in _TRAITS[_OPERATOR_TRAITS[function]] or first in _RECEIVERS:
        return "no such overload"
    return f"no such overload: {function}"


_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: TIMESTAMP, 3: DURATION}


@dataclass(frozen=True)
class TypeName:
    """``name(params...)``; single upper-case names are type parameters."""

    name: str
    params: tuple[TypeName, ...] = ()

    @property
    def is_type_param(self) -> bool:
        return len(self.name) == 1 and self.name.isupper()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})" if self.params else self.name


@lru_cache(maxsize=None)
def parse_type(text: str) -> TypeName:
    parsed, rest = _parse(text.replace(" ", ""))
    if rest:
        raise ValueError(f"trailing text in type {text!r}")
    return parsed


def _parse(text: str) -> tuple[TypeName, str]:
    i = 0
    while i < len(text) and text[i] not in "(),":
        i += 1
    name, rest = text[:i], text[i:]
    if not rest.startswith("("):
        return TypeName(name), rest
    params = []
    rest = rest[1:]
    while True:
        param, rest = _parse(rest)
        params.append(param)
        if rest.startswith(","):
            rest = rest[1:]
            continue
        if rest.startswith(")"):
            return TypeName(name, tuple(params)), rest[1:]
        raise ValueError(f"bad type syntax near {rest!r}")


def yaml_type(t: TypeName) -> dict[str, Any]:
    """The env-config YAML form (``type_name``/``params``/``is_type_param``)."""
    node: dict[str, Any] = {"type_name": t.name}
    if t.is_type_param:
        node["is_type_param"] = True
    if t.params:
        node["params"] = [yaml_type(p) for p in t.params]
    return node


def format_checked(t: Any) -> str:
    """A ``cel.expr.Type`` as cel-go's ``FormatCELType`` prints it."""
    kind = t.WhichOneof("type_kind")
    if kind == "primitive":
        return _PRIMITIVES.get(t.primitive, "unknown")
    if kind == "well_known":
        return _WELL_KNOWN.get(t.well_known, "unknown")
    if kind == "list_type":
        return f"list({format_checked(t.list_type.elem_type)})"
    if kind == "map_type":
        return f"map({format_checked(t.map_type.key_type)}, {format_checked(t.map_type.value_type)})"
    if kind == "message_type":
        return t.message_type
    if kind == "dyn":
        return "dyn"
    if kind == "null":
        return "null_type"
    if kind == "type_param":
        return t.type_param
    if kind == "abstract_type":
        params = ", ".join(format_checked(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else t.abstract_type.name
    if kind == "type":
        return f"type({format_checked(t.type)})"
    if kind == "wrapper":
        return f"wrapper({_PRIMITIVES.get(t.wrapper, 'unknown')})"
    if kind == "error":
        return "*error*"
    return "unknown"
