"""A lookup's arguments of the common shapes, read in Python instead of by a CEL call.

A lookup names what it reads with short expressions over the request, such as
``object.spec.?poolRef.?name.orValue('')``, ``request.namespace`` or
``x.?kind.orValue('') == 'Model' ? x.name : ''``. Handing the request to the CEL engine for
them costs more than the lookup itself (the object is converted into CEL values for the
call, and again for the policy's batch), so these shapes are read directly:

- string, int, bool and null literals;
- a variable and field selections (``a.b``), optional ones (``a.?b``) after the plain ones,
  ended by ``.orValue(default)``;
- ``==`` / ``!=`` between such a value and a string literal;
- ``condition ? a : b``.

Anything else, and any value for which CEL would answer an error (a field missing or
selected on a non-map, a condition that is not a bool), gives ``UNREAD``: the caller then
asks CEL, which gives the exact answer or error.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from webhook.cel.syntax import Call, CelSyntaxError, Expr, Ident, Literal, Select, parse

UNREAD = object()  # "ask CEL"
_ROOTS = frozenset({"object", "oldObject", "request", "namespaceObject", "params"})
_LITERALS = frozenset({"string", "int", "bool", "null"})

Reader = Callable[[Mapping[str, Any]], Any]  # activation -> value or UNREAD


class _Absent:
    """An optional selection that found nothing (``a.?b`` without ``b``)."""


_ABSENT = _Absent()


def reader(source: str) -> Reader | None:
    """A Python reader of ``source``, or None when it is not one of the shapes above."""
    try:
        return _value(parse(source))
    except (CelSyntaxError, _Unsupported):
        return None


class _Unsupported(Exception):
    pass


def _value(node: Expr) -> Reader:
    """A reader of a plain value (never an optional)."""
    if isinstance(node, Literal) and node.kind in _LITERALS:
        value = node.value
        return lambda activation: value
    if isinstance(node, Call) and node.function == "orValue" and node.target is not None and len(node.args) == 1:
        optional, default = _optional(node.target), _value(node.args[0])

        def or_value(activation: Mapping[str, Any]) -> Any:
            found, otherwise = optional(activation), default(activation)  # CEL evaluates both
            if found is UNREAD or otherwise is UNREAD:
                return UNREAD
            return otherwise if found is _ABSENT else found
        return or_value
    if isinstance(node, Call) and node.function in ("_==_", "_!=_") and len(node.args) == 2:
        return _comparison(node)
    if isinstance(node, Call) and node.function == "_?_:_" and len(node.args) == 3:
        condition, when_true, when_false = (_value(arg) for arg in node.args)

        def choose(activation: Mapping[str, Any]) -> Any:
            decided = condition(activation)
            if type(decided) is not bool:  # an error in CEL (or UNREAD)
                return UNREAD
            return (when_true if decided else when_false)(activation)  # only the branch taken
        return choose
    return _path(node)


def _path(node: Expr) -> Reader:
    """``root.a.b``: each field present in a map, else CEL's error (UNREAD)."""
    fields: list[str] = []
    while isinstance(node, Select) and not node.optional and not node.test_only:
        fields.append(node.field)
        node = node.operand
    if not isinstance(node, Ident) or node.name not in _ROOTS:
        raise _Unsupported()
    root, fields = node.name, fields[::-1]

    def select(activation: Mapping[str, Any]) -> Any:
        value = activation.get(root)
        for name in fields:
            if type(value) is not dict or name not in value:
                return UNREAD
            value = value[name]
        return value
    return select


def _optional(node: Expr) -> Reader:
    """``path.?a.?b``: the value, ``_ABSENT``, or UNREAD (``.?`` on a value that is not a map)."""
    fields: list[str] = []
    while isinstance(node, Select) and node.optional and not node.test_only:
        fields.append(node.field)
        node = node.operand
    if not fields:
        raise _Unsupported()
    base, fields = _path(node), fields[::-1]

    def select(activation: Mapping[str, Any]) -> Any:
        value = base(activation)
        if value is UNREAD:
            return UNREAD
        for name in fields:
            if type(value) is not dict:
                return UNREAD
            if name not in value:
                return _ABSENT
            value = value[name]
        return value
    return select


def _comparison(node: Call) -> Reader:
    """``value == 'text'`` (or ``!=``): CEL's equality of a string with any value."""
    left, right = node.args
    if isinstance(right, Literal) and right.kind == "string":
        value, text = _value(left), right.value
    elif isinstance(left, Literal) and left.kind == "string":
        value, text = _value(right), left.value
    else:
        raise _Unsupported()
    equal = node.function == "_==_"

    def compare(activation: Mapping[str, Any]) -> Any:
        found = value(activation)
        if found is UNREAD:
            return UNREAD
        return (type(found) is str and found == text) == equal  # other types are simply not equal
    return compare
