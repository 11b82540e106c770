"""The validators Kubernetes adds to cel-go's checker (they run once an expression checks):
homogeneous aggregate literals; constant timestamp, duration and regex arguments; the regex
a program compiles when it is created."""

from __future__ import annotations

from typing import Mapping

import re2

from webhook.cel.common.types import DYN, CelType
from webhook.cel.common.values import parse_duration
from webhook.cel.library.regex import RegexError, compile_pattern
from webhook.cel.syntax.ast import Call, CreateList, CreateMap, Expr, Literal, walk
from webhook.gocompat.time import valid_rfc3339

_EXEMPT_HOMOGENEOUS = frozenset({"format", "string_format"})


def _equivalent(a: CelType, b: CelType) -> bool:
    if a.kind == "typeparam" or b.kind == "typeparam":
        return True
    return a == b


def _display(t: CelType) -> CelType:
    if t.kind == "typeparam":
        return DYN
    if t.params:
        return CelType(t.kind, tuple(_display(p) for p in t.params), t.name)
    return t


def literal_errors(expr: Expr, types: Mapping[int, CelType]) -> list[tuple[int, str]]:
    """Kubernetes' AST validators over a checked expression (``types``: each node's type):
    homogeneous list and map literals, constant timestamp, duration and regex arguments."""
    errors: list[tuple[int, str]] = []
    exempt: set[int] = set()
    for node in walk(expr):
        if isinstance(node, Call) and node.function in _EXEMPT_HOMOGENEOUS:
            for sub in node.args:
                exempt.update(n.id for n in walk(sub))
        if isinstance(node, CreateList) and node.id not in exempt:
            first: CelType | None = None
            for index, element in enumerate(node.elements):
                et = types.get(element.id, DYN)
                if index in node.optional_indices and et.kind == "optional_type":
                    et = et.params[0]
                if first is None:
                    first = et
                    continue
                if not _equivalent(first, et):
                    errors.append((element.offset, f"expected type '{_display(first)}' but found "
                                                           f"'{_display(et)}'"))
                    break
        elif isinstance(node, CreateMap) and node.id not in exempt:
            key_type: CelType | None = None
            value_type: CelType | None = None
            for entry in node.entries:
                kt, vt = types.get(entry.key.id, DYN), types.get(entry.value.id, DYN)
                if entry.optional and vt.kind == "optional_type":
                    vt = vt.params[0]
                if key_type is None and value_type is None:
                    key_type, value_type = kt, vt
                    continue
                if not _equivalent(key_type, kt):
                    errors.append((entry.key.offset, f"expected type '{_display(key_type)}' but found "
                                                             f"'{_display(kt)}'"))
                if not _equivalent(value_type, vt):
                    errors.append((entry.value.offset, f"expected type '{_display(value_type)}' but "
                                                               f"found '{_display(vt)}'"))
        elif isinstance(node, Call):
            _check_constant_argument(errors, node)
    return errors


def _check_constant_argument(errors: list[tuple[int, str]], call: Call) -> None:
    name = call.function
    if name in ("timestamp", "duration") and call.target is None and len(call.args) == 1:
        arg = call.args[0]
        if isinstance(arg, Literal) and arg.kind == "string":
            ok = (valid_rfc3339(arg.value) if name == "timestamp" else _valid_duration(arg.value))
            if not ok:
                errors.append((arg.offset, f"invalid {name} argument"))
        elif isinstance(arg, Literal) and arg.kind == "int" and name == "timestamp":
            if not _MIN_UNIX_SECONDS <= arg.value <= _MAX_UNIX_SECONDS:
                errors.append((arg.offset, "invalid timestamp argument"))
    elif name == "matches":
        pattern = call.args[-1] if call.args else None
        if isinstance(pattern, Literal) and pattern.kind == "string" and not _valid_regex(pattern.value):
            errors.append((pattern.offset, "invalid matches argument"))


def instantiation_error(expr: Expr) -> str | None:
    """What creating the program of a checked expression fails on, as the apiserver words it
    after "program instantiation failed: ": Kubernetes' regex library compiles a constant
    ``find``/``findAll`` pattern then (``matches`` patterns are checked with the literals)."""
    for node in walk(expr):
        if isinstance(node, Call) and node.function in ("find", "findAll") and node.target is not None and node.args:
            pattern = node.args[0]
            if isinstance(pattern, Literal) and pattern.kind == "string":
                try:
                    compile_pattern(pattern.value)
                except RegexError as err:
                    return str(err)
    return None


_DURATION_MAX_SECONDS = 315_576_000_000
_MIN_UNIX_SECONDS = -62_135_596_800   # 0001-01-01T00:00:00Z
_MAX_UNIX_SECONDS = 253_402_300_799   # 9999-12-31T23:59:59Z


def _valid_duration(text: str) -> bool:
    parsed = parse_duration(text)
    return parsed is not None and abs(parsed.total_seconds()) <= _DURATION_MAX_SECONDS


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def _valid_regex(pattern: str) -> bool:
    """RE2 syntax, as Go's regexp parses it."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        return False
    return True
