"""Kubernetes' mutation library for MutatingAdmissionPolicy expressions
(``k8s.io/apiserver/pkg/cel/mutation`` and ``cel/library/jsonpatch.go``, the environment's
``HasPatchTypes``): typed construction ``Object{...}`` / ``Object.<field path>{...}`` (dynamic
types: every field is there, typed ``dyn``), ``JSONPatch{op, path, from, value}`` (``op``,
``path`` and ``from`` strings) and ``jsonpatch.escapeKey``.

Checking: cel-go's checker (``webhook.cel.checker``) with these types and the function
declared, so a construction's errors are cel-go's. Evaluating: neither engine knows these
types, so the expression is spelled anew (by source span) as what both run — a construction as
a map literal of ``dyn`` values tagged with its type name under ``TYPE_KEY``, ``escapeKey`` as
the two replacements it is — and the tagged maps of a result are read back by
``object_value`` and ``json_patches`` with the apiserver's run-time checks and errors
(``dynamic.ObjectVal.CheckTypeNamesMatchFieldPathNames``, ``JSONPatchType.Val``).

What the map spelling cannot give: a constructed value is a map while the expression runs
(``Object{}`` equals a map with the same tag and fields; reading a field of it works where
cel-go's object does not). MutatingAdmissionPolicies build values to return them, not to read
them back.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from webhook.cel.checker.checker import Checked, check
from webhook.cel.checker.declarations import Overload
from webhook.cel.common.types import DYN, STRING, CelType, list_of
from webhook.cel.syntax.ast import Call, CreateStruct, Expr, Ident, children, walk
from webhook.cel.syntax.parser import CelSyntaxError, parse_with_spans

OBJECT = "Object"
JSON_PATCH = "JSONPatch"
TYPE_KEY = "@cel-type"  # the tag of a constructed value in its map spelling (never a CEL field name)
JSON_PATCH_FIELDS: Mapping[str, CelType] = {"op": STRING, "from": STRING, "path": STRING, "value": DYN}
FUNCTIONS = {"jsonpatch.escapeKey": (Overload("string_jsonpatch_escapeKey_string", (STRING,), STRING, False),)}


def object_type(name: str = OBJECT) -> CelType:
    return CelType("object", name=name)


JSON_PATCH_TYPE = CelType("object", name=JSON_PATCH)
APPLY_RESULT = object_type()  # what an ApplyConfiguration expression returns
JSON_PATCH_RESULT = list_of(JSON_PATCH_TYPE)  # what a JSONPatch expression returns


def structs(name: str) -> tuple[CelType, Mapping[str, CelType] | None] | None:
    """``mutation.DynamicTypeResolver``: JSONPatch, and Object and every ``Object.<path>``."""
    if name == JSON_PATCH:
        return JSON_PATCH_TYPE, JSON_PATCH_FIELDS
    if name == OBJECT or name.startswith(OBJECT + "."):
        return object_type(name), None
    return None


def check_mutation(source: str, variables: Mapping[str, CelType]) -> Checked:
    """``source`` type-checked with the patch types and ``jsonpatch.escapeKey`` declared."""
    expr, _ = parse_with_spans(source)
    return check(expr, variables, {}, extra_functions=FUNCTIONS, structs=structs)


def construction_errors(source: str) -> list[tuple[int, str]]:
    """In an environment without the patch types (a variable, a matchCondition, a validation):
    each outermost construction is an undeclared reference, as cel-go reports it (the parser
    being ours, the engines never see one)."""
    if "{" not in source:
        return []
    try:
        expr, _ = parse_with_spans(source)
    except CelSyntaxError:
        return []
    found: list[tuple[int, str]] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, CreateStruct):
            name = node.name[1:] if node.name.startswith(".") else node.name
            found.append((node.offset, f"undeclared reference to '{name}' (in container '')"))
            continue  # cel-go does not check the fields of a type it cannot resolve
        stack.extend(children(node))
    return sorted(found)


class MutationError(ValueError):
    """A mutation's value the apiserver refuses, in its words."""


# -- the spelling both engines run ---------------------------------------------------------------

def runtime_source(source: str) -> str:
    """``source`` with constructions as tagged map literals and ``jsonpatch.escapeKey(x)`` as
    ``x.replace("~", "~0").replace("/", "~1")`` (``strings.NewReplacer("/", "~1", "~", "~0")``:
    replacing ``~`` first gives the same text)."""
    if "{" not in source and "escapeKey" not in source:
        return source
    expr, spans = parse_with_spans(source)
    rewritten = {node.id for node in walk(expr) if _rewritten(node)}
    return _Renderer(source, spans, rewritten).render(expr) if rewritten else source


def _rewritten(node: Expr) -> bool:
    return isinstance(node, CreateStruct) or _is_escape_key(node)


def _is_escape_key(node: Expr) -> bool:
    return (isinstance(node, Call) and node.function == "escapeKey" and isinstance(node.target, Ident)
            and node.target.name == "jsonpatch" and len(node.args) == 1)


class _Renderer:
    def __init__(self, source: str, spans: dict[int, tuple[int, int]], rewritten: set[int]) -> None:
        self.source = source
        self.spans = spans
        self.rewritten = rewritten

    def render(self, node: Expr) -> str:
        if node.id not in self.rewritten:
            return self._verbatim(node)
        if isinstance(node, CreateStruct):
            name = node.name[1:] if node.name.startswith(".") else node.name
            entries = [f"{_string(TYPE_KEY)}: dyn({_string(name)})"]
            entries += [f"{_string(field)}: dyn({self.render(value)})" for field, value in node.fields]
            return "{" + ", ".join(entries) + "}"
        assert isinstance(node, Call)
        return f'({self.render(node.args[0])}).replace("~", "~0").replace("/", "~1")'

    def _verbatim(self, node: Expr) -> str:
        start, end = self.spans[node.id]
        pieces, position = [], start
        for inner in self._outermost_rewritten(node):
            inner_start, inner_end = self.spans[inner.id]
            pieces.append(self.source[position:inner_start])
            pieces.append(self.render(inner))
            position = inner_end
        pieces.append(self.source[position:end])
        return "".join(pieces)

    def _outermost_rewritten(self, node: Expr) -> list[Expr]:
        found: dict[int, Expr] = {}
        stack = children(node)
        while stack:
            child = stack.pop()
            if child.id in self.rewritten:
                found[child.id] = child
            else:
                stack.extend(children(child))
        return sorted(found.values(), key=lambda child: self.spans[child.id][0])


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


# -- reading a result back -----------------------------------------------------------------------

def _type_name(value: Any) -> str | None:
    return value.get(TYPE_KEY) if isinstance(value, dict) and isinstance(value.get(TYPE_KEY), str) else None


def _type_errors(value: Any, path: list[str]) -> list[str]:
    """``dynamic.typeCheck``: each constructed object's type name must spell the field path
    from the root Object (a list's or a map's elements share their field's path)."""
    errors: list[str] = []
    name = _type_name(value)
    if name is not None:
        if ".".join(path) != name:
            errors.append(f'unexpected type name "{name}", expected "{".".join(path)}", which matches field name '
                          "path from root Object type")
        for key, field in value.items():
            if key != TYPE_KEY:
                errors += _type_errors(field, [*path, key])
    elif isinstance(value, list):
        for item in value:
            errors += _type_errors(item, path)
    elif isinstance(value, dict):
        for item in value.values():
            errors += _type_errors(item, path)
    return errors


def plain(value: Any) -> Any:
    """A value with its constructions as the plain maps they stand for (tags dropped), as JSON
    gives it back: an integral double is an integer (Go marshals ``3.0`` as ``3``, which decodes
    as an int64)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != TYPE_KEY}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        return int(value)
    return value


def object_value(value: Any) -> dict[str, Any]:
    """An ApplyConfiguration expression's value as the patch object it gives (``applyConfigPatcher``)."""
    name = _type_name(value)
    if name is None or name == JSON_PATCH:
        raise MutationError(f"unsupported return type from ApplyConfiguration expression: {_cel_type(value)}")
    errors = _type_errors(value, [name])
    if errors:
        raise MutationError("type mismatch: " + "\n".join(errors))
    return plain(value)


def json_patches(value: Any) -> list[dict[str, Any]]:
    """A JSONPatch expression's value as JSON Patch operations (``jsonPatcher.evaluatePatchExpression``)."""
    if not isinstance(value, list):
        raise MutationError("type mismatch: JSONPatchType.expression should evaluate to array")
    out = []
    for item in value:
        if _type_name(item) != JSON_PATCH:
            raise MutationError("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: "
                                f"unsupported type conversion to '{_go_type(item)}'")
        operation: dict[str, Any] = {}
        for field in ("op", "path", "from"):
            text = item.get(field, "")
            if not isinstance(text, str):
                raise MutationError(f"unexpected type {_go_type(text)} for JSONPatchType '{field}' field")
            if text or field != "from":
                operation[field] = text
        if "value" in item:
            found = item["value"]
            if _type_name(found) is not None:
                errors = _type_errors(found, [_type_name(found)])
                if errors:
                    raise MutationError("type mismatch: " + "\n".join(errors))
            operation["value"] = plain(found)
        out.append(operation)
    return out


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return _type_name(value) or "map"
    if value is None:
        return "null_type"
    return type(value).__name__


def _go_type(value: Any) -> str:
    """Go's ``%T`` of what cel-go's ``Value()`` holds for ``value``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]ref.Val"
    if isinstance(value, dict):
        return "map[ref.Val]ref.Val"
    if value is None:
        return "structpb.NullValue"
    return type(value).__name__
