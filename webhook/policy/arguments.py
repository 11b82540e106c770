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

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from webhook.cel.syntax.ast import Call, Expr, Ident, Literal, Select
from webhook.cel.syntax.parser import CelSyntaxError, parse
from webhook.apiversion import group_of
from webhook.state.knowledge import EVERYTHING
from webhook.state.selectors import SelectorError, from_label_selector

UNREAD = object()  # "ask CEL"
_ROOTS = frozenset({"object", "oldObject", "request", "namespaceObject", "params"})
_LITERALS = frozenset({"string", "int", "bool", "null"})

Reader = Callable[[Mapping[str, Any]], Any]  # activation -> value or UNREAD


def reader(source: str) -> Reader | None:
    """A Python reader of ``source``, or None when it is not one of the shapes above: one
    argument as ``review_lookups`` writes it (that is what the server runs; this single
    form lets tests check each shape against CEL)."""
    try:
        tree = parse(source)
        writer = _Writer()
        result = writer.value(tree, 1)
    except (CelSyntaxError, _Unsupported):
        return None
    lines = ["def read(activation):", *writer.lines, f"    return {result}"]
    namespace = {"UNREAD": UNREAD, **writer.constants}
    exec(compile("\n".join(lines), f"<lookup argument {source!r}>", "exec"), namespace)  # noqa: S102
    return namespace["read"]


def review_lookups(lookups: Sequence[ReviewLookup], order: Sequence[str], remember: Callable[[Any], None]
                   ) -> Callable[[Mapping[str, Any], Any, Mapping[str, Any]], Any] | None:
    """The lookups a review reads, as one generated function ``(activation, state, kept) ->
    {name: result}`` in ``order`` (the names it does not read come from ``kept``), or UNREAD
    when an argument is one CEL must answer; None when an argument is not of the shapes above.

    What ``CompiledPolicy`` does for each lookup (a ``get`` with a non-empty string name, a
    ``list`` in a namespace or all, with a label selector or none; ``remember`` each stored
    object found; a ``list`` by a ``selector`` value through ``list_selected``), written out:
    every review of a policy with lookups runs it."""
    writer = _Writer()
    try:
        arguments = [{field: writer.value(parse(source), 1) for field, source in lookup.fields.items()}
                     for lookup in lookups]
    except (CelSyntaxError, _Unsupported):
        return None
    lines = ["def read(activation, state, kept):", *writer.lines]
    found: dict[str, str] = {}
    for i, (lookup, values) in enumerate(zip(lookups, arguments)):
        out = found[lookup.name] = f"r{i}"
        api_version, kind = writer.constant(lookup.api_version), writer.constant(lookup.kind)
        if lookup.get:
            name, namespace = values.get("name", "None"), values.get("namespace", "None")
            lines += [f"    if isinstance({name}, str) and {name}:",
                      f"        {out} = state.get({api_version}, {kind}, {name}, {namespace} or None)",
                      f"        if {out} is not None:",
                      f"            remember({out})",
                      "    else:",
                      f"        {out} = None"]
        elif "selector" in values:
            namespace, selector = values.get("namespace", "None"), values["selector"]
            lines += [f"    {out} = list_by_selector(state, {api_version}, {kind}, {namespace} or None, {selector})",
                      f"    if {out} is UNREAD:",
                      "        return UNREAD",
                      f"    for o in {out}:",
                      "        remember(o)"]
        else:
            namespace, selector = values.get("namespace", "None"), values.get("labelSelector", "None")
            lines += [f"    {out} = list_labelled(state, {api_version}, {kind}, {namespace} or None, {selector} or None)",
                      f"    for o in {out}:",
                      "        remember(o)"]
    entries = ", ".join(f"{name!r}: {found[name]}" if name in found else f"{name!r}: kept[{name!r}]" for name in order)
    lines.append(f"    return {{{entries}}}")
    globals_ = {"UNREAD": UNREAD, "remember": remember, "list_by_selector": _list_by_selector,
                "list_labelled": list_labelled, **writer.constants}
    exec(compile("\n".join(lines), "<review lookups>", "exec"), globals_)  # noqa: S102
    return globals_["read"]


def unknown_list(state: Any, api_version: str, kind: str) -> bool:
    """Whether a list of this kind is unknown in ``state`` (it does not hold the kind whole:
    ``webhook.state.knowledge``): such a list is not read at all, its answer is ``[]`` and the
    rules that read it are left out (``webhook.policy.unknown``). A partial view's list would say
    "these are all", and reading it for every review of a large repository costs N × N."""
    knowledge = getattr(state, "knowledge", EVERYTHING)
    return knowledge.partial and not knowledge.holds_whole(group_of(api_version), kind)


def list_labelled(state: Any, api_version: str, kind: str, namespace: str | None, label_selector: str | None
                  ) -> list[Any]:
    """A list lookup's objects by a label selector string (or all), ``[]`` where unknown."""
    if unknown_list(state, api_version, kind):
        return []
    return state.list(api_version, kind, namespace, label_selector)


def list_selected(state: Any, api_version: str, kind: str, namespace: str | None, selector: Any) -> list[Any]:
    """A list lookup's objects by a ``metav1.LabelSelector`` value (its ``selector``): null
    selects nothing, ``{}`` everything; raises ``SelectorError`` for one that is not a selector;
    ``[]`` where unknown (``unknown_list``)."""
    if selector is None or unknown_list(state, api_version, kind):
        return []
    if not isinstance(selector, Mapping):
        raise SelectorError(f"a label selector is a map (matchLabels, matchExpressions), not {type(selector).__name__}")
    try:
        compiled = from_label_selector(selector)
    except (KeyError, TypeError, AttributeError) as exc:
        raise SelectorError(f"not a label selector: {exc}") from None
    return state.list(api_version, kind, namespace, selector=compiled)


def _list_by_selector(state: Any, api_version: str, kind: str, namespace: str | None, selector: Any) -> Any:
    """``list_selected`` for the generated reader: UNREAD for a value that is not a selector
    (the CEL path then reports the error)."""
    try:
        return list_selected(state, api_version, kind, namespace, selector)
    except SelectorError:
        return UNREAD


@dataclass(frozen=True)
class ReviewLookup:
    """A lookup as ``review_lookups`` reads it: its arguments' CEL sources by field."""

    name: str
    get: bool  # else a list
    api_version: str
    kind: str
    fields: Mapping[str, str]


class _Unsupported(Exception):
    pass


class _Writer:
    """The statements of a reader: each ``value`` call writes code that leaves the node's value
    in a fresh local (returning ``UNREAD`` wherever CEL would answer an error) and names it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self._names = 0

    def constant(self, value: Any) -> str:
        name = f"k{len(self.constants)}"
        self.constants[name] = value
        return name

    def _local(self) -> str:
        self._names += 1
        return f"v{self._names}"

    def _emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def value(self, node: Expr, depth: int) -> str:
        """A plain value (never an optional)."""
        if isinstance(node, Literal) and node.kind in _LITERALS:
            return self.constant(node.value)
        if isinstance(node, Call) and node.function == "orValue" and node.target is not None and len(node.args) == 1:
            return self._or_value(node, depth)
        if isinstance(node, Call) and node.function in ("_==_", "_!=_") and len(node.args) == 2:
            return self._comparison(node, depth)
        if isinstance(node, Call) and node.function == "_?_:_" and len(node.args) == 3:
            condition = self.value(node.args[0], depth)
            out = self._local()
            self._emit(depth, f"if type({condition}) is not bool:")  # an error in CEL
            self._emit(depth + 1, "return UNREAD")
            self._emit(depth, f"if {condition}:")  # only the branch taken is read
            self._emit(depth + 1, f"{out} = {self.value(node.args[1], depth + 1)}")
            self._emit(depth, "else:")
            self._emit(depth + 1, f"{out} = {self.value(node.args[2], depth + 1)}")
            return out
        return self._path(node, depth)

    def _path(self, node: Expr, depth: int) -> str:
        """``root.a.b``: each field present in a map, else CEL's error (UNREAD)."""
        fields: list[str] = []
        while isinstance(node, Select) and not node.optional and not node.test_only:
            fields.append(node.field)
            node = node.operand
        if not isinstance(node, Ident) or node.name not in _ROOTS:
            raise _Unsupported()
        out = self._local()
        self._emit(depth, f"{out} = activation.get({node.name!r})")
        for name in reversed(fields):
            self._emit(depth, f"if type({out}) is not dict or {name!r} not in {out}:")
            self._emit(depth + 1, "return UNREAD")
            self._emit(depth, f"{out} = {out}[{name!r}]")
        return out

    def _or_value(self, node: Call, depth: int) -> str:
        """``path.?a.?b.orValue(default)``: the value when every optional field is there, else
        the default (CEL evaluates both; ``.?`` on a value that is not a map is an error)."""
        target: Expr = node.target
        fields: list[str] = []
        while isinstance(target, Select) and target.optional and not target.test_only:
            fields.append(target.field)
            target = target.operand
        if not fields:
            raise _Unsupported()
        found = self._path(target, depth)
        present = self._local()
        self._emit(depth, f"{present} = True")
        for name in reversed(fields):
            self._emit(depth, f"if {present}:")
            self._emit(depth + 1, f"if type({found}) is not dict:")
            self._emit(depth + 2, "return UNREAD")
            self._emit(depth + 1, f"if {name!r} in {found}:")
            self._emit(depth + 2, f"{found} = {found}[{name!r}]")
            self._emit(depth + 1, "else:")
            self._emit(depth + 2, f"{present} = False")
        otherwise = self.value(node.args[0], depth)
        out = self._local()
        self._emit(depth, f"{out} = {found} if {present} else {otherwise}")
        return out

    def _comparison(self, node: Call, depth: int) -> str:
        """``value == 'text'`` (or ``!=``): CEL's equality of a string with any value (other
        types are simply not equal)."""
        left, right = node.args
        if isinstance(right, Literal) and right.kind == "string":
            operand, text = left, right.value
        elif isinstance(left, Literal) and left.kind == "string":
            operand, text = right, left.value
        else:
            raise _Unsupported()
        found = self.value(operand, depth)
        out = self._local()
        test = f"type({found}) is str and {found} == {text!r}"
        self._emit(depth, f"{out} = {test}" if node.function == "_==_" else f"{out} = not ({test})")
        return out
