"""CEL types as the type checker sees them (cel-go's ``types.Type``): what error messages print."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CelType:
    """A CEL type as the type checker sees it (cel-go's ``types.Type``)."""

    kind: str                       # int uint double bool string bytes null_type timestamp duration
                                    # dyn error list map object type optional_type opaque typeparam
    params: tuple["CelType", ...] = ()
    name: str = ""                  # object / opaque / type-parameter name

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if self.kind == "optional_type":
            return f"optional_type({self.params[0]})"
        if self.kind in ("object", "typeparam"):
            return self.name
        if self.kind == "null_type":
            return "null"
        if self.kind == "timestamp":
            return "google.protobuf.Timestamp"
        if self.kind == "duration":
            return "google.protobuf.Duration"
        if self.kind == "opaque":
            if self.params:
                return f"{self.name}({', '.join(map(str, self.params))})"
            return self.name
        return self.kind


INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
BOOL = CelType("bool")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null_type")
TIMESTAMP = CelType("timestamp")
DURATION = CelType("duration")
DYN = CelType("dyn")
ERROR = CelType("error")


def list_of(elem: CelType) -> CelType:
    return CelType("list", (elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


def type_of(t: CelType) -> CelType:
    return CelType("type", (t,))


def optional_of(t: CelType) -> CelType:
    return CelType("optional_type", (t,))


def opaque(name: str, *params: CelType) -> CelType:
    return CelType("opaque", tuple(params), name)
