"""A schema's structural validation as one generated predicate: the fast path for values that pass.

``SchemaValidator`` walks the ``Node`` tree generically, building a path string and an error
list at every node it visits. Most objects it sees are valid, and for those the walk's only
answer is "no errors". Here a schema becomes Python source — one small function per schema
node, the node's keywords as inline tests — that answers whether a value surely passes.

It is a fast path, never the authority: True only when every keyword the walk checks passes
(so the walk, ratcheting or not, would report nothing); False whenever anything fails or is
outside what it checks for certain — combinators (``allOf``/``anyOf``/``oneOf``/``not``),
``multipleOf``, ``uniqueItems``, a type or format decided by kube-openapi's number rules, a
value that is not plain JSON — and the caller then runs the walk, which writes the errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from webhook.schema.codegen import NodeCodegen, surely
from webhook.schema.equality import enum_matches
from webhook.schema.structural import Node, fits_type

_PYTHON_TYPES = {"string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float),
                 "array": (list,), "object": (dict,)}
_JSON_TYPES = (str, bool, int, float, list, dict)
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


class _Codegen(NodeCodegen):
    def __init__(self) -> None:
        super().__init__({"enum_matches": enum_matches})
        self.tables: list[str] = []  # module-level lookup tables, after the functions

    def source(self) -> str:
        return "\n".join(self.lines + self.tables)

    def define(self, node: Node, name: str) -> list[str]:
        """The function for ``node``: the walk's checks in its order, False on the first doubt."""
        if node.has_combinators:
            return [f"def {name}(v):", "    return False"]
        body: list[str] = []
        null_ok = (not node.types or node.nullable) and (node.enum is None or any(c is None for c in node.enum))
        body.append(f"if v is None: return {null_ok!r}")
        body.append("t = type(v)")
        if node.types:
            allowed = tuple(dict.fromkeys(t for name_ in node.types for t in _PYTHON_TYPES.get(name_, ())))
        elif node.format:
            return [f"def {name}(v):", "    return False"]  # a format with no type: kube-openapi's number rules
        else:
            allowed = _JSON_TYPES
        body.append(f"if t not in {self.value(frozenset(allowed))}: return False")
        if node.has_string_checks and str in allowed:
            body += ["if t is str:"] + ["    " + line for line in self.string(node)]
        if node.has_number_checks and (int in allowed or float in allowed):
            check = self.value(_number_check(node))
            integer = self.integer(node)  # integers, the usual numbers, inline
            if integer is None:
                body.append(f"if (t is int or t is float) and not {check}(v): return False")
            else:
                if integer:
                    body += ["if t is int:"] + ["    " + line for line in integer]
                body.append(f"if t is float and not {check}(v): return False")
        if node.enum is not None:
            strings, members = self.value(node.enum_strings or frozenset()), self.value(tuple(node.enum))
            body.append(f"if (v not in {strings}) if t is str else not any(enum_matches(v, c) for c in {members}): "
                        "return False")
        if list in allowed:
            body += ["if t is list:"] + ["    " + line for line in self.array(node)]
        if dict in allowed:
            body += ["if t is dict:"] + ["    " + line for line in self.object(node)]
        body.append("return True")
        return [f"def {name}(v):"] + ["    " + line for line in body]

    def integer(self, node: Node) -> list[str] | None:
        """``_number_check`` for an ``int`` as inline tests (None: leave it to the check)."""
        if node.multiple_of is not None:
            return None
        out = []
        if node.number_format == "int32":
            low, high = _INT32
            out.append(f"if v < {low} or v > {high}: return False")
        for bound, fits, exclusive, low in ((node.minimum, node.minimum_fits, node.exclusive_minimum, True),
                                            (node.maximum, node.maximum_fits, node.exclusive_maximum, False)):
            if bound is None:
                continue
            if not fits or not math.isfinite(bound) or not float(bound).is_integer():
                return None
            name = self.value(bound)
            if low:
                out.append(f"if v {'<=' if exclusive else '<'} {name}: return False")
            else:
                out.append(f"if v {'>=' if exclusive else '>'} {name}: return False")
        return out

    def string(self, node: Node) -> list[str]:
        out = _length(node.min_length, node.max_length)
        if node.pattern_text:
            if node.pattern is None:
                return ["return False"]
            out.append(f"if not {self.value(node.pattern)}.search(v): return False")
        if node.format_checker is not None:
            out.append(f"if not {self.value(node.format_checker)}(v): return False")
        return out or ["pass"]

    def array(self, node: Node) -> list[str]:
        if node.unique_items:
            return ["return False"]
        out = _length(node.min_items, node.max_items)
        if node.items is not None:
            item = self.function(node.items)
            plain = self.value(node.items.plain_types)
            out += ["for x in v:", f"    if type(x) not in {plain} and not {item}(x): return False"]
        return out or ["pass"]

    def object(self, node: Node) -> list[str]:
        out = _length(node.min_properties, node.max_properties)
        # property -> (types needing no check, its node's function), built after every function
        entries = ", ".join(f"{key!r}: ({self.value(child.plain_types)}, {self.function(child)})"
                            for key, child in node.properties.items())
        table = f"_t{len(self.tables)}"
        self.tables.append(f"{table} = {{{entries}}}")
        if not node.additional_allowed:
            other = "return False"
        elif node.additional is not None:
            additional, plain = self.function(node.additional), self.value(node.additional.plain_types)
            other = f"if type(x) not in {plain} and not {additional}(x): return False"
        else:
            other = "continue"
        out += [
            "for k, x in v.items():",
            f"    c = {table}.get(k)",
            "    if c is None:",
            f"        {other}",
            "    elif type(x) not in c[0] and not c[1](x): return False",
        ]
        if node.required:
            out.append(f"if not {self.value(frozenset(node.required))} <= v.keys(): return False")
        return out


def _length(low: int | None, high: int | None) -> list[str]:
    """minLength/maxLength, minItems/maxItems, minProperties/maxProperties."""
    return ([f"if len(v) < {low}: return False"] if low is not None else []) + \
        ([f"if len(v) > {high}: return False"] if high is not None else [])


def _number_check(node: Node) -> Callable[[Any], bool]:
    """The walk's number checks (range of the type and format, minimum, maximum), True only
    where it surely reports nothing; ``multipleOf`` and non-integral bounds on integers are left
    to it."""
    typ, fmt = node.number_type, node.number_format
    if node.multiple_of is not None:
        return lambda v: False
    bounds = []
    for bound, fits, exclusive, low in ((node.minimum, node.minimum_fits, node.exclusive_minimum, True),
                                        (node.maximum, node.maximum_fits, node.exclusive_maximum, False)):
        if bound is None:
            continue
        if not fits or not math.isfinite(bound):
            return lambda v: False
        bounds.append((bound, float(bound).is_integer(), exclusive, low))

    def check(value: Any) -> bool:
        if not (type(value) is int and fmt != "int32") and not fits_type(value, typ, fmt):
            return False
        for bound, integral, exclusive, low in bounds:
            if type(value) is int and not integral:
                return False  # the walk compares an int with the bound truncated
            if low and (value <= bound if exclusive else value < bound):
                return False
            if not low and (value >= bound if exclusive else value > bound):
                return False
        return True

    return check


@lru_cache(maxsize=256)
def compile_fast(root: Node) -> Callable[[Any], bool] | None:
    """``root``'s predicate: True when ``SchemaValidator(root).validate`` surely finds nothing;
    None when the schema cannot be written as one (nested past Python's limits)."""
    try:
        return surely(_Codegen().build(root, "<schema fast path>"))
    except (RecursionError, SyntaxError, MemoryError):
        return None
