"""Checked-AST passes for the cel-expr backend: Kubernetes' extra compile-time checks and
the rewrite of Kubernetes library calls into what the C++ runtime evaluates.

* **validate**: homogeneous aggregate literals, constant regexes (``matches``, ``find``,
  ``findAll``), constant ``duration``/``timestamp`` literals (Go's parsers) and literal
  ``format`` calls, as the apiserver rejects them, and the conversions cel-cpp declares and
  cel-go does not (``duration(int)``, ``int(duration)``);
* **fold**: a library call whose arguments are all constants is evaluated once, here
  (Kubernetes' ``OptOptimize`` does the same), so it costs no Python call per evaluation;
* **native**: ``isSorted``/``sum``/``min``/``max``/``indexOf``/``lastIndexOf``,
  ``optional.unwrap``/``unwrapOpt`` and ``find``/``findAll`` with a constant pattern become
  plain CEL (comprehensions, cel-cpp's ``regex`` extension): no Python call at all;
* **guard**: cel-go's range checks and messages around cel-cpp's ``charAt``/``substring``/
  ``indexOf``/``lastIndexOf``, and a cap on a computed ``lists.range(n)``; where cel-cpp and
  cel-go part ways on dyn values: the list functions and string functions on a value of
  another type (cel-go's ``no such overload: f(types)``), a ``flatten`` depth that is no int,
  ``optional.ofNonZeroValue`` of Go's zero time, strings parsed as Go's strconv,
  ``time.ParseDuration`` and ``time.Parse(time.RFC3339)`` read them (``uint``, ``double``,
  ``duration``, ``timestamp``; ``int`` and ``sum``
  only where it keeps a program on the native fast path, see ``go_number_syntax``);
* **hoist** (``hoist=True``): a library call on data selected from a variable
  (``quantity(self.memory)``) becomes a hidden variable the backend computes in Python
  before the evaluation, and so is ``string(dyn(self.ts))``, a CRD rule's ``string()`` of a
  date-time field (its offset, which cel-go prints, is in the Python value only);
* **private**: any other library call becomes a call of the runtime env's ``@k8s.<name>``.

Calling Python from cel-expr-python 0.1.3 leaks memory on every call, so all but the last
keep steady-state evaluation in C++.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from webhook.cel import protos
from webhook.cel.env import FAIL_FUNCTION, KEY_FIELD, MAP_INSERT_FUNCTION, library_value, private_name
from webhook.cel.library import OPAQUE_TYPES, OVERLOADS, LibraryError, Overload
from webhook.cel.library.base import NONE, OpaqueValue, OptionalValue
from webhook.cel.limits import RANGE_LIMIT
from webhook.cel.library.regex import RegexError, compile_pattern
from webhook.cel.library.regex import matches as regex_matches
from webhook.cel.library.strings_format import ExactDuration, MapEntries, check_format
from webhook.cel.common.typenames import DURATION, GO_VALUE_TYPES, TIMESTAMP, TypeName, format_checked, not_an_int, parse_type
from webhook.gocompat.strconv import go_parse_float, go_parse_int
from webhook.gocompat.time import go_rfc3339_nano, parse_go_duration, parse_rfc3339

OVERLOAD_BY_ID = {o.id: o for o in OVERLOADS}
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
_OPAQUE_NAMES = {t.cel_type for t in OPAQUE_TYPES}
_NATIVE_LISTS = {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf"}
# functions whose failed dispatch on a dyn value reads as cel-go's ``no such overload: f(types)``:
# Kubernetes' list functions (but ``sum``, which stays on the native fast path) and the cel-go
# extensions whose overloads carry their own bindings (type-guarded; ``sort`` and ``flatten``
# are not: a trait check, an implementation that tests its arguments)
SIGNED_DISPATCH = frozenset(_NATIVE_LISTS - {"sum"} | {
    "charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split", "substring", "trim",
    "join", "strings.quote", "reverse", "slice", "distinct", "lists.range", "first", "last",
    "sets.contains", "sets.equivalent", "sets.intersects",
})
_OPTIONAL_RESULT = {"format-named", "format-validate"}
_GO_DURATION_MAX = 2**63 - 1  # nanoseconds: Go's time.Duration
# conversions cel-cpp declares and cel-go does not
_CEL_CPP_ONLY = frozenset({"int64_to_duration", "duration_to_int64"})
_STRING_TO_NUMBER = {"int": "string_to_int64", "uint": "string_to_uint64", "double": "string_to_double"}
_DOUBLE_MAX = 1.7976931348623157e308
# the kinds a value checked as dyn may have at runtime, most likely first
_TYPE_NAMES = ("map", "list", "string", "int", "double", "bool", "uint", "bytes", "null_type",
               TIMESTAMP, DURATION)
_ZERO = {"int": 0, "uint": ("uint", 0), "double": 0.0}
# Kubernetes' list functions' element types (library/lists.go summableTypes, comparableTypes)
_NUMERIC = ("int", "uint", "double")
_SUMMABLE = (*_NUMERIC, DURATION)
_COMPARABLE = (*_NUMERIC, "bool", "string", "bytes", DURATION, TIMESTAMP)
_TIME_TO_STRING = {"timestamp_to_string", "duration_to_string"}


@dataclass
class Issue:
    node_id: int
    message: str


@dataclass(frozen=True)
class Hoist:
    """A library call on selected data, computed in Python before the C++ evaluation.

    ``args`` are ``("const", value)``, ``("hoisted", variable)`` (an earlier hoist's result)
    or ``("path", variable, steps)`` with steps ``("field", name)`` / ``("index", value)``;
    the result is bound to ``variable``.
    """

    variable: str
    overloads: tuple[Overload, ...]
    args: tuple[tuple, ...]


HOIST_VARIABLES = tuple(f"@h{i}" for i in range(16))


@dataclass
class Result:
    checked: Any
    issues: list[Issue] = field(default_factory=list)
    optional_root: bool = False
    python_calls: int = 0  # library calls left to Python at runtime (per evaluation, statically)
    hoists: tuple[Hoist, ...] = ()


class Optimizer:
    def __init__(self, checked: Any, hoist: bool = False, mixed_literals: bool = False) -> None:
        self.checked = checked
        self.mixed_literals = mixed_literals
        self.types = checked.type_map
        self.refs = checked.reference_map
        self.issues: list[Issue] = []
        self.python_calls = 0
        self.hoist = hoist
        self.hoists: list[Hoist] = []
        self._scope: list[str] = []  # comprehension variables around the visited node
        self._exempt = False  # inside format()'s arguments
        self._next_id = max([0, *self._ids(checked.expr)]) + 1

    # -- node construction -----------------------------------------------------------

    def _ids(self, expr: Any) -> list[int]:
        ids = [expr.id]
        stack = [expr]
        while stack:
            node = stack.pop()
            for child in children(node):
                ids.append(child.id)
                stack.append(child)
        return ids

    def new(self) -> Any:
        node = protos.Expr(id=self._next_id)
        self._next_id += 1
        return node

    def ident(self, name: str) -> Any:
        node = self.new()
        node.ident_expr.name = name
        return node

    def const(self, value: Any) -> Any:
        node = self.new()
        c = node.const_expr
        if value is None:
            c.null_value = 0
        elif isinstance(value, bool):
            c.bool_value = value
        elif isinstance(value, tuple) and value[0] == "uint":
            c.uint64_value = value[1]
        elif isinstance(value, int):
            c.int64_value = value
        elif isinstance(value, float):
            c.double_value = value
        elif isinstance(value, str):
            c.string_value = value
        elif isinstance(value, bytes):
            c.bytes_value = value
        else:
            raise TypeError(f"not a constant: {value!r}")
        return node

    def call(self, function: str, *args: Any, target: Any = None) -> Any:
        node = self.new()
        node.call_expr.function = function
        if target is not None:
            node.call_expr.target.CopyFrom(target)
        for arg in args:
            node.call_expr.args.add().CopyFrom(arg)
        return node

    def list_of(self, *elements: Any) -> Any:
        node = self.new()
        node.list_expr.SetInParent()
        for element in elements:
            node.list_expr.elements.add().CopyFrom(element)
        return node

    def comprehension(self, iter_var: str, iter_range: Any, accu_var: str, accu_init: Any, condition: Any, step: Any, result: Any) -> Any:
        node = self.new()
        c = node.comprehension_expr
        c.iter_var, c.accu_var = iter_var, accu_var
        c.iter_range.CopyFrom(iter_range)
        c.accu_init.CopyFrom(accu_init)
        c.loop_condition.CopyFrom(condition)
        c.loop_step.CopyFrom(step)
        c.result.CopyFrom(result)
        return node

    def bind(self, name: str, value: Any, body: Callable[[Callable[[], Any]], Any]) -> Any:
        """``cel.bind(name, value, body)``: ``body`` receives a factory of ``name`` references."""
        return self.comprehension("#unused", self.list_of(), name, value, self.const(False), self.ident(name), body(lambda: self.ident(name)))

    def fold(self, items: Any, init: Any, step: Callable[[Any, Any], Any], result: Callable[[Any], Any]) -> Any:
        """A left fold over ``items`` (what ``sum``/``min``/``max`` need; CEL has no macro for it)."""
        return self.comprehension(
            "@x", items, "@acc", init, self.const(True),
            step(self.ident("@acc"), self.ident("@x")), result(self.ident("@acc")),
        )

    def op(self, function: str, *args: Any) -> Any:
        return self.call(function, *args)

    def cond(self, test: Any, then: Any, otherwise: Any) -> Any:
        return self.call("_?_:_", test, then, otherwise)

    def value_node(self, value: Any) -> Any:
        """A folded Python value as an AST node."""
        if isinstance(value, OpaqueValue):
            node = self.new()
            node.struct_expr.message_name = value.cel_type
            entry = node.struct_expr.entries.add(id=self._next_id, field_key=KEY_FIELD)
            self._next_id += 1
            entry.value.CopyFrom(self.const(value.key))
            return node
        if isinstance(value, OptionalValue):
            if value.has_value:
                return self.call("optional.of", self.value_node(value.value))
            return self.call("optional.none")
        if isinstance(value, list):
            return self.list_of(*(self.value_node(v) for v in value))
        if isinstance(value, dict):
            node = self.new()
            node.struct_expr.SetInParent()
            for key, item in value.items():
                entry = node.struct_expr.entries.add(id=self._next_id)
                self._next_id += 1
                entry.map_key.CopyFrom(self.const(key))
                entry.value.CopyFrom(self.value_node(item))
            return node
        return self.const(value)

    # -- the pass --------------------------------------------------------------------

    def type_of(self, node: Any) -> str:
        return format_checked(self.types[node.id]) if node.id in self.types else "dyn"

    def run(self) -> Result:
        root = self.checked.expr
        root_type = self.type_of(root)
        # cel-cpp's checker types an optional index of a dyn value (``x[?0]``) as dyn
        optional_root = root_type.startswith("optional_type") or (
            root.WhichOneof("expr_kind") == "call_expr" and root.call_expr.function == "_[?_]")
        expr = self.visit(root)
        if optional_root:
            expr = self.bind("@root", expr, lambda o: self.cond(
                self.call("hasValue", target=o()), self.list_of(self.call("value", target=o())), self.list_of()))
        self.checked.expr.CopyFrom(expr)
        return Result(self.checked, self.issues, optional_root, self.python_calls, tuple(self.hoists))

    def visit(self, node: Any) -> Any:
        kind = node.WhichOneof("expr_kind")
        if kind == "select_expr":
            operand = self.visit(node.select_expr.operand)
            node.select_expr.operand.CopyFrom(operand)
            if self.type_of(operand) in _OPAQUE_NAMES:
                self.issues.append(Issue(node.id, f"undefined field '{node.select_expr.field}'"))
        elif kind == "call_expr":
            return self.visit_call(node)
        elif kind == "list_expr":
            for element in node.list_expr.elements:
                element.CopyFrom(self.visit(element))
            self.check_homogeneous(list(node.list_expr.elements), node.list_expr.optional_indices, first_only=True)
        elif kind == "struct_expr":
            for entry in node.struct_expr.entries:
                if entry.HasField("map_key"):
                    entry.map_key.CopyFrom(self.visit(entry.map_key))
                entry.value.CopyFrom(self.visit(entry.value))
            if not node.struct_expr.message_name:
                entries = list(node.struct_expr.entries)
                optional = [i for i, e in enumerate(entries) if e.optional_entry]
                keys = self.check_homogeneous([e.map_key for e in entries], [], first_only=False)
                values = self.check_homogeneous([e.value for e in entries], optional, first_only=False)
                # cel-go reports an entry's key, then its value
                self.issues += sorted(keys + values, key=lambda issue: self._entry_of(entries, issue.node_id))
        elif kind == "comprehension_expr":
            c = node.comprehension_expr
            for part in ("iter_range", "accu_init"):
                getattr(c, part).CopyFrom(self.visit(getattr(c, part)))
            self._scope += [c.iter_var, c.iter_var2, c.accu_var]
            for part in ("loop_condition", "loop_step", "result"):
                getattr(c, part).CopyFrom(self.visit(getattr(c, part)))
            del self._scope[-3:]
        return node

    def check_homogeneous(self, elements: list[Any], optional_indices: Any, *, first_only: bool) -> list[Issue]:
        """Kubernetes' HomogeneousAggregateLiterals (cel-go's validator): the elements (or keys,
        or values) of a literal all have the first one's type, ``dyn`` included; ``format``'s
        argument list is exempt. A list reports its first mismatch (appended here), a map
        every one (returned, for the caller to order). With ``mixed_literals``, ``dyn`` matches
        any type."""
        issues: list[Issue] = []
        if self._exempt:
            return issues
        first = None
        for i, element in enumerate(elements):
            t = self.type_of(element)
            if i in optional_indices and t.startswith("optional_type("):
                t = t[len("optional_type(") : -1]
            if first is None:
                first = t
            elif t != first and not (self.mixed_literals and "dyn" in (t, first)):
                issues.append(Issue(element.id, f"expected type '{first}' but found '{t}'"))
                if first_only:
                    break
        if first_only:
            self.issues += issues
        return issues

    @staticmethod
    def _entry_of(entries: list[Any], node_id: int) -> int:
        return next(i for i, e in enumerate(entries) if node_id in (e.map_key.id, e.value.id))

    def visit_call(self, node: Any) -> Any:
        call = node.call_expr
        if call.HasField("target"):
            call.target.CopyFrom(self.visit(call.target))
        saved = self._exempt
        self._exempt = saved or (call.function == "format" and call.HasField("target"))
        for arg in call.args:
            arg.CopyFrom(self.visit(arg))
        self._exempt = saved
        self.check_literals(node)
        if call.function == "format" and call.HasField("target") and len(call.args) == 1 \
                and call.args[0].WhichOneof("expr_kind") == "list_expr":
            self.exact_arguments(call.args[0].list_expr)
        ref = self.refs.get(node.id)
        ids = list(ref.overload_id) if ref is not None else []
        if ids and set(ids) <= _CEL_CPP_ONLY:
            types = ", ".join(self.type_of(arg) for arg in call.args)
            self.issues.append(Issue(node.id, f"found no matching overload for '{call.function}' applied to '({types})'"))
        if call.function == "cel.@mapInsert":
            # the two-variable comprehension macros' helper has no runtime in cel-expr-python
            self.refs.pop(node.id, None)
            self.python_calls += 1
            call.function = MAP_INSERT_FUNCTION
            return node
        if call.function in ("optional.unwrap", "unwrapOpt"):
            return self.native_unwrap(node)
        if "duration_to_milliseconds" in ids:
            return self.duration_milliseconds(node, maybe_timestamp="timestamp_to_milliseconds" in ids)
        if call.function == "string" and _TIME_TO_STRING & set(ids):
            hoisted = self.hoist_date_time_string(node) if self.hoist else None
            if hoisted is not None:
                return hoisted
            return self.go_time_string(node, only_time=set(ids) <= _TIME_TO_STRING)
        if self.hoist and call.function == "matches":
            hoisted = self.hoist_matches(node)
            if hoisted is not None:
                return hoisted
        if call.function == "lists.range" and len(call.args) == 1 and call.args[0].WhichOneof("expr_kind") != "const_expr":
            return self.guard_range(node)
        if call.function == "optional.ofNonZeroValue" and len(call.args) == 1 \
                and self.type_of(call.args[0]) in ("dyn", TIMESTAMP):
            return self.go_zero_timestamp(node)
        if call.function == "duration" and "string_to_duration" in ids and len(call.args) == 1:
            return self.go_duration(node)
        if call.function == "timestamp" and "string_to_timestamp" in ids and len(call.args) == 1:
            return self.go_timestamp(node)
        parsed_as = _STRING_TO_NUMBER.get(call.function)
        if parsed_as is not None and parsed_as in ids and len(call.args) == 1:
            return self.go_number_syntax(node)
        if call.function == "flatten" and len(call.args) == 1 and self.type_of(call.args[0]) != "int":
            return self.guard_flatten_depth(node)
        if len(ids) == 1 and ids[0] in _STRING_GUARDS:
            return self.guard_string_call(node, ids[0])
        candidates = [OVERLOAD_BY_ID[i] for i in ids if i in OVERLOAD_BY_ID]
        if not candidates:
            return node
        if len(candidates) < len(ids):
            return self.mixed_call(node, candidates)
        args = ([call.target] if call.HasField("target") else []) + list(call.args)
        folded = self.try_fold(candidates, args)
        if folded is not None:
            folded.id = node.id
            return folded
        function = candidates[0].function
        if function in _NATIVE_LISTS:
            rewritten = self.native_list(function, args, node)
        elif function in ("find", "findAll"):
            rewritten = self.native_regex(function, args)
        else:
            rewritten = None
        if rewritten is None:
            rewritten = self.private_call(candidates, args)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    # -- Kubernetes' compile-time literal checks ------------------------------------

    def check_literals(self, node: Any) -> None:
        call = node.call_expr
        args = list(call.args)
        if call.function == "matches" and args and _is_string_const(args[-1]):
            try:
                compile_pattern(args[-1].const_expr.string_value)
            except RegexError:
                self.issues.append(Issue(args[-1].id, "invalid matches argument"))
        elif call.function in ("find", "findAll") and call.HasField("target") and args and _is_string_const(args[0]):
            try:
                compile_pattern(args[0].const_expr.string_value)
            except RegexError as err:
                self.issues.append(Issue(args[0].id, f"program instantiation failed: {err}"))
        elif call.function == "format" and call.HasField("target") and _is_string_const(call.target) and args:
            if args[0].WhichOneof("expr_kind") == "list_expr":
                types = [self.type_of(e) for e in args[0].list_expr.elements]
                problem = check_format(call.target.const_expr.string_value, types)
                if problem:
                    self.issues.append(Issue(node.id, problem))
        elif call.function == "duration" and len(args) == 1 and _is_string_const(args[0]):
            if parse_go_duration(args[0].const_expr.string_value) is None:
                self.issues.append(Issue(args[0].id, "invalid duration argument"))
        elif call.function == "timestamp" and len(args) == 1 and _is_string_const(args[0]):
            if not _valid_timestamp(args[0].const_expr.string_value):
                self.issues.append(Issue(args[0].id, "invalid timestamp argument"))

    # -- folding ---------------------------------------------------------------------

    def try_fold(self, candidates: list[Overload], args: list[Any]) -> Any | None:
        values = []
        for arg in args:
            ok, value = _constant_value(arg)
            if not ok:
                return None
            values.append(value)
        overload = select_overload(candidates, values)
        if overload is None or not overload.pure:
            return None
        try:
            result = overload.impl(*values)
        except LibraryError:
            return None  # the runtime call raises it, with the same message
        return self.value_node(result)

    # -- native rewrites -------------------------------------------------------------

    def exact_arguments(self, arguments: Any) -> None:
        """``format``'s duration and map arguments as Kubernetes' formatter sees them.
        cel-expr-python hands Python a duration as a ``timedelta`` (microseconds:
        ``duration('2ns')`` would print as 0s) and a map as a ``dict`` (where the keys ``1``
        and ``true`` are one): a duration is passed as ``ExactDuration`` (cel-cpp's exact
        ``string(d)``), a map as ``[MapEntries(), [key, value], ...]``, at any depth of a list
        or map of a known type. (A ``dyn`` value is looked at one level deep: a duration or a
        map inside a dyn list or map still crosses as Python's.)"""
        duration = DURATION

        def message(name: str, key: Any) -> Any:
            node = self.new()
            node.struct_expr.message_name = name
            entry = node.struct_expr.entries.add(id=self._next_id, field_key=KEY_FIELD)
            self._next_id += 1
            entry.value.CopyFrom(key)
            return node

        def crosses_inexactly(kind: TypeName) -> bool:
            if kind.name in (duration, "dyn"):
                return True
            if kind.name == "list" and kind.params:
                return crosses_inexactly(kind.params[0])
            if kind.name == "map" and len(kind.params) == 2:
                return kind.params[0].name != "string" or crosses_inexactly(kind.params[1])
            return False

        def entries(value: Callable[[], Any], item: TypeName | None) -> Any:
            def exact_item() -> Any:
                found = (lambda: self.op("_[_]", value(), self.ident("@k")))  # noqa: E731
                return (exact(found, item) if item is not None else None) or found()

            pairs = self.comprehension(
                "@k", value(), "@out", self.list_of(), self.const(True),
                self.op("_+_", self.ident("@out"), self.list_of(self.list_of(self.ident("@k"), exact_item()))),
                self.ident("@out"))
            return self.op("_+_", self.list_of(message(MapEntries.cel_type, self.const(""))), pairs)

        def exact(value: Callable[[], Any], kind: TypeName) -> Any | None:
            """``value`` (a node factory) as it must cross to Python, None when it crosses exactly."""
            if not crosses_inexactly(kind):
                return None
            if kind.name == duration:
                return message(ExactDuration.cel_type, self.call("string", value()))
            if kind.name == "list":
                element = exact(lambda: self.ident("@e"), kind.params[0])
                return self.comprehension(
                    "@e", value(), "@out", self.list_of(), self.const(True),
                    self.op("_+_", self.ident("@out"), self.list_of(element)), self.ident("@out"))
            if kind.name == "map":  # (bound first: an inner map's ``@k`` hides the outer one)
                return self.bind("@arg", value(), lambda v: entries(v, kind.params[1]))
            return self.bind("@arg", value(), lambda v: self.cond(  # dyn
                self.is_type(v, (duration,)), message(ExactDuration.cel_type, self.call("string", v())),
                self.cond(self.is_type(v, ("map",)), entries(v, None), v())))

        for element in arguments.elements:
            rewritten = exact(lambda element=element: element, parse_type(self.type_of(element)))
            if rewritten is not None:
                rewritten.id = element.id
                element.CopyFrom(rewritten)

    def go_time_string(self, node: Any, *, only_time: bool) -> Any:
        """cel-go prints a timestamp as Go's RFC 3339 with nanoseconds and a duration as its
        shortest seconds ("...37.01Z", "1.01s"); cel-cpp writes the fraction in whole groups of
        three digits ("...37.010Z", "1.010s"): its trailing zeros (and a bare dot) go."""
        def trimmed(v: Callable[[], Any]) -> Any:
            text = self.call("string", v())
            text = self.call("regex.replace", text, self.const(r"(\.[0-9]*[1-9])0+([sZ])$"), self.const(r"\1\2"))
            return self.call("regex.replace", text, self.const(r"\.0+([sZ])$"), self.const(r"\1"))

        def by_type(v: Callable[[], Any]) -> Any:
            is_time = self.op("_||_",
                              self.op("_==_", self.call("type", v()), self.call("type", self.call("timestamp", self.const(0)))),
                              self.op("_==_", self.call("type", v()), self.call("type", self.call("duration", self.const("0s")))))
            return self.cond(is_time, trimmed(v), self.call("string", v()))

        rewritten = self.bind("@str", node.call_expr.args[0], trimmed if only_time else by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def duration_milliseconds(self, node: Any, *, maybe_timestamp: bool) -> Any:
        """cel-go's ``duration.getMilliseconds()`` is the whole duration in milliseconds, cel-cpp's
        only the part below a second: add the whole seconds back (a dyn receiver is checked at
        runtime, since a timestamp's ``getMilliseconds()`` is that component in both)."""
        def total(d: Callable[[], Any]) -> Any:
            seconds = self.op("_*_", self.call("getSeconds", target=d()), self.const(1000))
            return self.op("_+_", seconds, self.call("getMilliseconds", target=d()))

        def by_type(d: Callable[[], Any]) -> Any:
            is_duration = self.op("_==_", self.call("type", d()), self.call("type", self.call("duration", self.const("0s"))))
            return self.cond(is_duration, total(d), self.call("getMilliseconds", target=d()))

        rewritten = self.bind("@ms", node.call_expr.target, by_type if maybe_timestamp else total)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def native_list(self, function: str, args: list[Any], node: Any) -> Any:
        """A Kubernetes list function as plain CEL; on a dyn receiver that is no list at
        runtime, cel-go's dispatch error (a map would otherwise be iterated by its keys)."""
        if self.type_of(args[0]).startswith("list("):
            return self.native_list_body(function, args)
        if function == "sum":
            # ``+ []`` fails on anything but a list ("no such overload"); unlike a type() test
            # it keeps the program on the native fast path, which sums lists only
            return self.native_list_body(function, [self.op("_+_", args[0], self.list_of())])
        return self.bind("@recv", args[0], lambda receiver: self.cond(
            self.op("_==_", self.call("type", receiver()), self.ident("list")),
            self.native_list_body(function, [receiver(), *args[1:]]),
            self.no_such_overload(function, [receiver, *(lambda arg=arg: arg for arg in args[1:])]),
        ))

    def no_such_overload(self, function: str, values: list[Callable[[], Any]]) -> Any:
        """cel-go's failed dispatch, ``no such overload: f(<runtime type names>)``."""
        message: Any = self.const(f"no such overload: {function}(")
        for i, value in enumerate(values):
            message = self.op("_+_", message, self.const(", ") if i else self.const(""))
            message = self.op("_+_", message, self.type_name(value))
        return self.call(FAIL_FUNCTION, self.op("_+_", message, self.const(")")))

    def type_name(self, value: Callable[[], Any]) -> Any:
        """The CEL type name of a value, as a string (cel-go's ``TypeName()``)."""
        name: Any = self.const("dyn")
        for kind in reversed(_TYPE_NAMES):
            name = self.cond(self.op("_==_", self.call("type", value()), self.type_value(kind)), self.const(kind), name)
        return name

    def native_list_body(self, function: str, args: list[Any]) -> Any:
        receiver = args[0]
        element = self.type_of(receiver)
        element = element[5:-1] if element.startswith("list(") else "dyn"
        if function in ("indexOf", "lastIndexOf"):
            last = function == "lastIndexOf"
            return self.bind("@l", receiver, lambda l: self.bind("@v", args[1], lambda v: self.bind(
                "@hits",
                self.filter_indices(l, lambda i: self.op("_==_", self.op("_[_]", l(), i()), v())),
                lambda hits: self.cond(
                    self.op("_==_", self.call("size", hits()), self.const(0)),
                    self.const(-1),
                    self.op("_[_]", hits(), self.op("_-_", self.call("size", hits()), self.const(1)) if last else self.const(0)),
                ),
            )))
        if function == "isSorted":
            if element not in _COMPARABLE:
                return self.dyn_is_sorted(receiver)
            return self.bind("@l", receiver, lambda l: self.all_indices(l, lambda i: self.op(
                "_||_", self.op("_==_", i(), self.const(0)),
                self.op("_<=_", self.op("_[_]", l(), self.op("_-_", i(), self.const(1))), self.op("_[_]", l(), i())),
            )))
        if function == "sum":
            if element in _ZERO or element == DURATION:
                zero = self.call("duration", self.const("0s")) if element == DURATION else self.const(_ZERO[element])
                return self.fold(receiver, zero, lambda acc, x: self.op("_+_", acc, x), lambda acc: acc)
            return self.dyn_sum(receiver)
        if element not in _COMPARABLE:
            return self.dyn_min_max(function, receiver)
        # min / max: the first element wins ties, as in Kubernetes
        better = "_<_" if function == "min" else "_>_"
        return self.bind("@l", receiver, lambda l: self.cond(
            self.op("_==_", self.call("size", l()), self.const(0)),
            self.call(FAIL_FUNCTION, self.const(f"{function} called on empty list")),
            self.fold(
                l(), self.op("_[_]", l(), self.const(0)),
                lambda acc, x: self.cond(self.op(better, x, acc), x, acc),
                lambda acc: acc,
            ),
        ))

    # Kubernetes' sum/min/max on a list of dyn values (library/lists.go): cel-go dispatches on the
    # first element's type (list(int), list(double), ...: none fits a map, a list or null: "no
    # such overload: sum(list)"); an element the chosen overload cannot add or compare fails
    # with types.MaybeNoSuchOverloadErr ("no such overload"), while a comparison of two values
    # of other kinds (1 and 'a') is an error min/max ignore: they keep the value they have.

    def is_type(self, value: Callable[[], Any], kinds: tuple[str, ...]) -> Any:
        tests = [self.op("_==_", self.call("type", value()), self.type_value(kind)) for kind in kinds]
        test = tests[0]
        for other in tests[1:]:
            test = self.op("_||_", test, other)
        return test

    def dyn_sum(self, receiver: Any) -> Any:
        duration, timestamp = DURATION, TIMESTAMP

        def step(acc: Any, x: Any) -> Any:
            a, v = lambda: self.ident("@acc"), lambda: self.ident("@x")
            same = self.op("_&&_", self.op("_==_", self.call("type", a()), self.call("type", v())),
                           self.call("!_", self.is_type(v, (timestamp,))))
            adds = self.op("_||_", same, self.op("_||_",
                           self.op("_&&_", self.is_type(a, (duration,)), self.is_type(v, (timestamp,))),
                           self.op("_&&_", self.is_type(a, (timestamp,)), self.is_type(v, (duration,)))))
            first = self.cond(self.is_type(v, _SUMMABLE), v(), self.call(FAIL_FUNCTION, self.const("no such overload: sum(list)")))
            return self.cond(self.op("_==_", acc, self.const(None)), first,
                             self.cond(adds, self.op("_+_", acc, x), self.call(FAIL_FUNCTION, self.const("no such overload"))))

        return self.fold(receiver, self.const(None), step,
                         lambda acc: self.cond(self.op("_==_", acc, self.const(None)), self.const(0), acc))

    def dyn_is_sorted(self, receiver: Any) -> Any:
        """Kubernetes' isSorted on a list of dyn values, element by element as cel-go walks it:
        the first element picks the overload (a map, a list or null: "no such overload:
        isSorted(list)"), a later one that is no traits.Comparer fails ("no such overload"),
        one of another kind than the element before is not compared (its Compare error is no
        IntOne), and the first pair out of order ends the walk: false."""
        def stops_at(l: Callable[[], Any], i: Callable[[], Any]) -> Any:
            current = lambda: self.op("_[_]", l(), i())  # noqa: E731
            previous = lambda: self.op("_[_]", l(), self.op("_-_", i(), self.const(1)))  # noqa: E731
            ordered = self.op("_||_", self.op("_==_", self.call("type", previous()), self.call("type", current())),
                              self.op("_&&_", self.is_type(previous, _NUMERIC), self.is_type(current, _NUMERIC)))
            descends = self.op("_&&_", self.op("_>_", i(), self.const(0)),
                               self.op("_&&_", ordered, self.op("_>_", previous(), current())))
            return self.op("_||_", self.call("!_", self.is_type(current, _COMPARABLE)), descends)

        def walk(l: Callable[[], Any]) -> Any:
            i, stop = (lambda: self.ident("@i")), (lambda: self.ident("@stop"))
            return self.comprehension(
                "@i", self.call("lists.range", self.call("size", l())), "@stop", self.const(-1),
                self.op("_==_", stop(), self.const(-1)), self.cond(stops_at(l, i), i(), stop()), stop(),
            )

        return self.bind("@l", receiver, lambda l: self.bind("@stop", walk(l), lambda stop: self.cond(
            self.op("_==_", stop(), self.const(-1)), self.const(True),
            self.cond(self.is_type(lambda: self.op("_[_]", l(), stop()), _COMPARABLE), self.const(False),
                      self.cond(self.op("_==_", stop(), self.const(0)),
                                self.call(FAIL_FUNCTION, self.const("no such overload: isSorted(list)")),
                                self.call(FAIL_FUNCTION, self.const("no such overload")))),
        )))

    def dyn_min_max(self, function: str, receiver: Any) -> Any:
        better = "_<_" if function == "min" else "_>_"

        def step(acc: Any, x: Any) -> Any:
            a, v = lambda: self.ident("@acc"), lambda: self.ident("@x")
            ordered = self.op("_||_", self.op("_==_", self.call("type", a()), self.call("type", v())),
                              self.op("_&&_", self.is_type(a, _NUMERIC), self.is_type(v, _NUMERIC)))
            return self.cond(self.is_type(v, _COMPARABLE),
                             self.cond(self.op("_&&_", ordered, self.op(better, x, acc)), x, acc),
                             self.call(FAIL_FUNCTION, self.const("no such overload")))

        return self.bind("@l", receiver, lambda l: self.cond(
            self.op("_==_", self.call("size", l()), self.const(0)),
            self.call(FAIL_FUNCTION, self.const(f"{function} called on empty list")),
            self.cond(self.is_type(lambda: self.op("_[_]", l(), self.const(0)), _COMPARABLE),
                      self.fold(l(), self.op("_[_]", l(), self.const(0)), step, lambda acc: acc),
                      self.call(FAIL_FUNCTION, self.const(f"no such overload: {function}(list)"))),
        ))

    def filter_indices(self, items: Callable[[], Any], keep: Callable[[Callable[[], Any]], Any]) -> Any:
        """``lists.range(size(items)).filter(i, keep(i))``."""
        indices = self.call("lists.range", self.call("size", items()))
        return self.comprehension(
            "@i", indices, "@out", self.list_of(), self.const(True),
            self.cond(keep(lambda: self.ident("@i")), self.op("_+_", self.ident("@out"), self.list_of(self.ident("@i"))), self.ident("@out")),
            self.ident("@out"),
        )

    def all_indices(self, items: Callable[[], Any], test: Callable[[Callable[[], Any]], Any]) -> Any:
        indices = self.call("lists.range", self.call("size", items()))
        return self.comprehension(
            "@i", indices, "@ok", self.const(True), self.call("@not_strictly_false", self.ident("@ok")),
            self.op("_&&_", self.ident("@ok"), test(lambda: self.ident("@i"))), self.ident("@ok"),
        )

    def native_unwrap(self, node: Any) -> Any:
        call = node.call_expr
        items = call.target if call.HasField("target") else call.args[0]
        rewritten = self.comprehension(
            "@o", items, "@out", self.list_of(), self.const(True),
            self.cond(
                self.call("hasValue", target=self.ident("@o")),
                self.op("_+_", self.ident("@out"), self.list_of(self.call("value", target=self.ident("@o")))),
                self.ident("@out"),
            ),
            self.ident("@out"),
        )
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def native_regex(self, function: str, args: list[Any]) -> Any | None:
        """``find``/``findAll`` with a constant, group-free pattern: cel-cpp's RE2 extension."""
        if not _is_string_const(args[1]):
            return None
        try:
            pattern = compile_pattern(args[1].const_expr.string_value)
        except RegexError:
            return None
        if pattern.groups:
            return None
        if function == "find":
            return self.call("orValue", self.const(""), target=self.call("regex.extract", args[0], args[1]))
        found = self.call("regex.extractAll", args[0], args[1])
        if len(args) == 2:
            return found
        ok, limit = _constant_value(args[2])
        if not ok or not isinstance(limit, int):
            return None
        if limit < 0:
            return found
        return self.bind("@found", found, lambda f: self.cond(
            self.op("_<=_", self.call("size", f()), self.const(limit)), f(),
            self.call("slice", self.const(0), self.const(limit), target=f()),
        ))

    def extractor(self, node: Any) -> tuple | None:
        """How to compute ``node`` in Python from the activation, if it is a constant or a
        selection (``self.spec.memory``, ``self.items[0]``) of a top-level variable."""
        ok, value = _constant_value(node)
        if ok:
            return ("const", value)
        steps: list[tuple] = []
        while True:
            kind = node.WhichOneof("expr_kind")
            if kind == "select_expr" and not node.select_expr.test_only:
                steps.append(("field", node.select_expr.field))
                node = node.select_expr.operand
            elif kind == "call_expr" and node.call_expr.function == "_[_]" and len(node.call_expr.args) == 2:
                ok, index = _constant_value(node.call_expr.args[1])
                if not ok or not isinstance(index, (str, int)):
                    return None
                steps.append(("index", index))
                node = node.call_expr.args[0]
            elif kind == "ident_expr" and node.ident_expr.name in HOIST_VARIABLES and not steps:
                return ("hoisted", node.ident_expr.name)
            elif kind == "ident_expr":
                name = node.ident_expr.name
                ref = self.refs.get(node.id)
                if name in self._scope or name.startswith("@") or (ref is not None and ref.name != name):
                    return None
                return ("path", name, tuple(reversed(steps)))
            else:
                return None

    def mixed_call(self, node: Any, candidates: list[Overload]) -> Any:
        """A dyn receiver matched both a Kubernetes list function and a strings-extension one
        (``indexOf``/``lastIndexOf``): decide by the receiver's runtime type."""
        call = node.call_expr
        if not call.HasField("target") or candidates[0].function not in _NATIVE_LISTS:
            return node
        self.refs.pop(node.id, None)
        args = list(call.args)

        def choose(receiver: Callable[[], Any]) -> Any:
            as_string = self.call(call.function, *args, target=receiver())
            as_list = self.native_list_body(candidates[0].function, [receiver(), *args])
            failed = self.no_such_overload(call.function, [receiver, *(lambda arg=arg: arg for arg in args)])
            return self.cond(self.op("_==_", self.call("type", receiver()), self.ident("list")), as_list,
                             self.cond(self.op("_==_", self.call("type", receiver()), self.ident("string")), as_string,
                                       failed))

        rewritten = self.bind("@recv", call.target, choose)
        rewritten.id = node.id
        return rewritten

    def guard_string_call(self, node: Any, overload_id: str) -> Any:
        """cel-go's range checks (and messages) around cel-cpp's strings extension calls."""
        call = node.call_expr
        names = ["@str", "@a", "@b"][: 1 + len(call.args)]
        values = [call.target, *call.args]

        params = _STRING_PARAMS[overload_id]
        dyn = [i for i, value in enumerate(values) if self.type_of(value) != params[i]]

        def build(refs: list[Callable[[], Any]]) -> Any:
            native = self.call(call.function, *(r() for r in refs[1:]), target=refs[0]())
            guarded = _STRING_GUARDS[overload_id](self, refs, native)
            if not dyn:
                return guarded
            # a dyn argument of another type: cel-go's dispatch error, not a range check on it
            typed = [self.op("_==_", self.call("type", refs[i]()), self.ident(params[i])) for i in dyn]
            condition = typed[0]
            for test in typed[1:]:
                condition = self.op("_&&_", condition, test)
            return self.cond(condition, guarded, self.no_such_overload(call.function, refs))

        def bind_all(i: int, refs: list[Callable[[], Any]]) -> Any:
            if i == len(names):
                return build(refs)
            return self.bind(names[i], values[i], lambda ref: bind_all(i + 1, [*refs, ref]))

        rewritten = bind_all(0, [])
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_duration(self, node: Any) -> Any:
        """``duration(string)`` as Go's ``time.ParseDuration`` reads it: a constant becomes its
        nanoseconds (cel-cpp's parser lacks the ``µs`` units); any other string has them
        spelled ``us`` and fails beyond Go's range (±2562047h47m16.854775807s), which is
        narrower than cel-cpp's (±10000 years)."""
        call = node.call_expr
        if _is_string_const(call.args[0]):
            nanos = parse_go_duration(call.args[0].const_expr.string_value)
            if nanos is not None:  # else check_literals reported it
                call.args[0].const_expr.string_value = _seconds(nanos)
            return node
        failed = self.call(FAIL_FUNCTION, self.const("type conversion error from 'string' to 'google.protobuf.Duration'"))

        def parse(text: Callable[[], Any]) -> Any:
            micro = self.call("replace", self.const("µs"), self.const("us"), target=text())
            converted = self.call("duration", self.call("replace", self.const("μs"), self.const("us"), target=micro))
            return self.bind("@duration", converted, lambda value: self.cond(
                self.op("_||_", self.op("_>_", value(), self.call("duration", self.const(_seconds(_GO_DURATION_MAX)))),
                        self.op("_<_", value(), self.call("duration", self.const(_seconds(-_GO_DURATION_MAX - 1))))),
                failed, value()))

        return self.parsed_string_conversion(node, "duration", parse)

    def parsed_string_conversion(self, node: Any, function: str, parse: Callable[[Callable[[], Any]], Any]) -> Any:
        """``function(x)`` (a conversion call ``node``) with a string ``x`` read by ``parse``
        (Go's parser, as cel-go converts) and any other ``x`` converted as before."""
        call = node.call_expr

        def by_type(value: Callable[[], Any]) -> Any:
            if self.type_of(call.args[0]) == "string":
                return parse(value)
            is_string = self.op("_==_", self.call("type", value()), self.ident("string"))
            return self.cond(is_string, parse(value), self.call(function, value()))

        rewritten = self.bind("@text", call.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_timestamp(self, node: Any) -> Any:
        """``timestamp(string)`` as Go's ``time.Parse(time.RFC3339, s)`` reads it: cel-cpp's
        parser also takes a lower-case ``t``/``z``, an offset without a colon and second 60,
        and refuses a comma before the fraction."""
        call = node.call_expr
        if _is_string_const(call.args[0]):
            if _valid_timestamp(call.args[0].const_expr.string_value):  # else check_literals reported it
                call.args[0].const_expr.string_value = _cpp_rfc3339(call.args[0].const_expr.string_value)
            return node
        failed = self.call(FAIL_FUNCTION, self.const("type conversion error from 'string' to 'google.protobuf.Timestamp'"))

        def parse(text: Callable[[], Any]) -> Any:
            well_formed = self.call("matches", self.const(_RFC3339_PATTERN), target=text())
            converted = self.call("timestamp", self.call("replace", self.const(","), self.const("."), target=text()))
            return self.cond(well_formed, converted, failed)

        return self.parsed_string_conversion(node, "timestamp", parse)

    def go_number_syntax(self, node: Any) -> Any:
        """``int``/``uint``/``double`` of a string parse as Go's strconv does in cel-go; cel-cpp's
        parsers also take surrounding whitespace, ``uint('+1')``, a hex double without an
        exponent (``'0x10'``) and an out-of-range double as infinity.

        A constant is parsed here; a string Go refuses becomes one cel-cpp refuses too. A
        computed one is guarded (``native`` runs ``int()``'s guard as well, so its programs keep
        the fast path)."""
        function = node.call_expr.function
        argument = node.call_expr.args[0]
        if _is_string_const(argument):
            text = argument.const_expr.string_value
            parsed = go_parse_float(text) if function == "double" else go_parse_int(text, signed=function == "int")
            if parsed is None:
                argument.const_expr.string_value = ""
            return node
        failed = self.call(FAIL_FUNCTION, self.const(f"type conversion error from 'string' to '{function}'"))

        def parse(text: Callable[[], Any]) -> Any:
            converted = self.call(function, text())
            lower = lambda: self.call("lowerAscii", target=text())  # noqa: E731
            contains = lambda part: self.call("contains", self.const(part), target=lower())  # noqa: E731
            invalid = self.op("_!=_", self.call("trim", target=text()), text())
            if function == "uint":
                invalid = self.op("_||_", invalid, self.call("startsWith", self.const("+"), target=text()))
            if function != "double":
                return self.cond(invalid, failed, converted)
            invalid = self.op("_||_", invalid, self.op("_&&_", contains("0x"), self.call("!_", contains("p"))))
            invalid = self.op("_||_", invalid, self.op("@in", lower(), self.list_of(self.const("+nan"), self.const("-nan"))))
            return self.cond(invalid, failed, self.bind("@double", converted, lambda value: self.cond(
                self.op("_&&_", self.op("_||_", self.op("_>_", value(), self.const(_DOUBLE_MAX)),
                                        self.op("_<_", value(), self.const(-_DOUBLE_MAX))),
                        self.call("!_", contains("inf"))),
                failed, value())))

        def by_type(value: Callable[[], Any]) -> Any:
            if self.type_of(node.call_expr.args[0]) == "string":
                return parse(value)
            is_string = self.op("_==_", self.call("type", value()), self.ident("string"))
            return self.cond(is_string, parse(value), self.call(function, value()))

        rewritten = self.bind("@number", node.call_expr.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def go_zero_timestamp(self, node: Any) -> Any:
        """``optional.ofNonZeroValue(t)``: cel-go's zero timestamp is Go's zero time
        (0001-01-01T00:00:00Z), cel-cpp's the Unix epoch."""
        def by_value(value: Callable[[], Any]) -> Any:
            is_time = lambda text: self.op("_==_", value(), self.call("timestamp", self.const(text)))  # noqa: E731
            return self.cond(is_time("0001-01-01T00:00:00Z"), self.call("optional.none"),
                             self.cond(is_time("1970-01-01T00:00:00Z"), self.call("optional.of", value()),
                                       self.call("optional.ofNonZeroValue", value())))

        rewritten = self.bind("@value", node.call_expr.args[0], by_value)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def guard_flatten_depth(self, node: Any) -> Any:
        """``flatten(depth)`` with a dyn depth that is no int fails as in the apiserver (a Go
        panic's text, ``library.ext.not_an_int``), not as cel-cpp's "no such overload"."""
        def by_type(depth: Callable[[], Any]) -> Any:
            kind = lambda name: self.op("_==_", self.call("type", depth()), self.type_value(name))  # noqa: E731
            error: Any = self.const(not_an_int("?"))
            for name, go_type in reversed(GO_VALUE_TYPES.items()):
                error = self.cond(kind(name), self.const(not_an_int(go_type)), error)
            flattened = self.call("flatten", depth(), target=node.call_expr.target)
            return self.cond(kind("int"), flattened, self.call(FAIL_FUNCTION, error))

        rewritten = self.bind("@depth", node.call_expr.args[0], by_type)
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def type_value(self, name: str) -> Any:
        """The CEL type ``name`` as a value (``type(x) == <it>``)."""
        if name == TIMESTAMP:
            return self.call("type", self.call("timestamp", self.const(0)))
        if name == DURATION:
            return self.call("type", self.call("duration", self.const("0s")))
        if name == "null_type":
            return self.call("type", self.const(None))
        return self.ident(name)

    def guard_range(self, node: Any) -> Any:
        """``lists.range(n)`` of a computed ``n`` never allocates past the per-call limit."""
        count = node.call_expr.args[0]

        def too_large(n: Callable[[], Any]) -> Any:
            test = self.op("_>_", n(), self.const(RANGE_LIMIT))
            if self.type_of(count) == "int":
                return test
            # a dyn count of another type is lists.range's own dispatch error, not the comparison's
            return self.op("_&&_", self.op("_==_", self.call("type", n()), self.ident("int")), test)

        rewritten = self.bind("@n", count, lambda n: self.cond(
            too_large(n), self.call(FAIL_FUNCTION, self.const(COST_EXCEEDED)), self.call("lists.range", n()),
        ))
        rewritten.id = node.id
        self.refs.pop(node.id, None)
        return rewritten

    def out_of_range(self, index: Any) -> Any:
        return self.call(FAIL_FUNCTION, self.op("_+_", self.const("index out of range: "), self.call("string", index)))

    def outside(self, index: Callable[[], Any], size: Callable[[], Any], inclusive_end: bool) -> Any:
        too_big = self.op("_>=_" if inclusive_end else "_>_", index(), size())
        return self.op("_||_", self.op("_<_", index(), self.const(0)), too_big)

    def hoist_matches(self, node: Any) -> Any | None:
        """``s.matches('<constant>')`` on selected data: matched in Python before the
        evaluation with the RE2 pattern compiled once (cel-cpp compiles the pattern again on
        every call, which costs far more than matching it)."""
        call = node.call_expr
        args = ([call.target] if call.HasField("target") else []) + list(call.args)
        if len(args) != 2 or not _is_string_const(args[1]) or len(self.hoists) >= len(HOIST_VARIABLES):
            return None
        extractors = [self.extractor(arg) for arg in args]
        if not all(extractors) or extractors[0][0] == "const":
            return None
        variable = HOIST_VARIABLES[len(self.hoists)]
        self.hoists.append(Hoist(variable, (_MATCHES,), tuple(extractors)))
        self.refs.pop(node.id, None)
        hoisted = self.ident(variable)
        hoisted.id = node.id
        return hoisted

    def hoist_date_time_string(self, node: Any) -> Any | None:
        """``string(dyn(x))``, how a CRD rule's ``string()`` of a date-time field reaches the
        engine (``rewrite.py``), on selected data: printed in Python from the value, which
        keeps the field's offset as cel-go's timestamp keeps its location ("...+01:00"); a
        cel-cpp timestamp is an instant, printed in UTC. Any other value: the plain program."""
        args = node.call_expr.args
        if len(args) != 1 or len(self.hoists) >= len(HOIST_VARIABLES):
            return None
        marker = args[0]
        if marker.WhichOneof("expr_kind") != "call_expr" or marker.call_expr.function != "dyn" \
                or marker.call_expr.HasField("target") or len(marker.call_expr.args) != 1:
            return None
        extractor = self.extractor(marker.call_expr.args[0])
        if extractor is None or extractor[0] != "path":
            return None
        variable = HOIST_VARIABLES[len(self.hoists)]
        self.hoists.append(Hoist(variable, (_DATE_TIME_STRING,), (extractor,)))
        self.refs.pop(node.id, None)
        hoisted = self.ident(variable)
        hoisted.id = node.id
        return hoisted

    def private_call(self, candidates: list[Overload], args: list[Any]) -> Any:
        overload = candidates[0]
        extractors = [self.extractor(arg) for arg in args] if self.hoist else [None]
        if self.hoist and all(extractors) and len(self.hoists) < len(HOIST_VARIABLES):
            variable = HOIST_VARIABLES[len(self.hoists)]
            self.hoists.append(Hoist(variable, tuple(candidates), tuple(extractors)))
            call = self.ident(variable)
        else:
            self.python_calls += 1
            call = self.call(private_name(overload.function, overload.member), *args)
        if all(c.id in _OPTIONAL_RESULT for c in candidates):
            return self.call("first", target=call)
        return call


def _guard_char_at(o: Optimizer, r: list, native: Any) -> Any:
    size = lambda: o.call("size", r[0]())  # noqa: E731
    return o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()), native)


def _guard_substring(o: Optimizer, r: list, native: Any) -> Any:
    size = lambda: o.call("size", r[0]())  # noqa: E731
    if len(r) == 2:
        return o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()), native)
    invalid = o.op("_+_", o.op("_+_", o.op("_+_", o.const("invalid substring range. start: "), o.call("string", r[1]())),
                                     o.const(", end: ")), o.call("string", r[2]()))
    return o.cond(
        o.op("_>_", r[1](), r[2]()), o.call(FAIL_FUNCTION, invalid),
        o.cond(o.outside(r[1], size, False), o.out_of_range(r[1]()),
               o.cond(o.outside(r[2], size, False), o.out_of_range(r[2]()), native)),
    )


def _guard_index_of(o: Optimizer, r: list, native: Any) -> Any:
    """cel-go: an empty substring answers the offset; offset < 0 fails; offset >= size is -1."""
    return o.cond(
        o.op("_==_", r[1](), o.const("")), r[2](),
        o.cond(o.op("_<_", r[2](), o.const(0)), o.out_of_range(r[2]()),
               o.cond(o.op("_>=_", r[2](), o.call("size", r[0]())), o.const(-1), native)),
    )


_STRING_PARAMS = {
    "string_char_at_int": ("string", "int"),
    "string_substring_int": ("string", "int"),
    "string_substring_int_int": ("string", "int", "int"),
    "string_index_of_string_int": ("string", "string", "int"),
    "string_last_index_of_string_int": ("string", "string", "int"),
}
_STRING_GUARDS = {
    "string_char_at_int": _guard_char_at,
    "string_substring_int": _guard_substring,
    "string_substring_int_int": _guard_substring,
    "string_index_of_string_int": _guard_index_of,
    "string_last_index_of_string_int": _guard_index_of,
}


def children(node: Any) -> list[Any]:
    kind = node.WhichOneof("expr_kind")
    if kind == "select_expr":
        return [node.select_expr.operand]
    if kind == "call_expr":
        return ([node.call_expr.target] if node.call_expr.HasField("target") else []) + list(node.call_expr.args)
    if kind == "list_expr":
        return list(node.list_expr.elements)
    if kind == "struct_expr":
        return [x for e in node.struct_expr.entries for x in ((e.map_key, e.value) if e.HasField("map_key") else (e.value,))]
    if kind == "comprehension_expr":
        c = node.comprehension_expr
        return [c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result]
    return []


_MATCHES = Overload("matches", "matches_string", ("string", "string"), "bool", regex_matches, member=True)


def _date_time_string(value: Any) -> str:
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        raise LibraryError("not a timestamp with its offset")  # the plain program answers
    return go_rfc3339_nano(value)


_DATE_TIME_STRING = Overload("string", "timestamp_to_string", (TIMESTAMP,), "string",
                             _date_time_string)


def _seconds(nanos: int) -> str:
    """A duration literal cel-cpp parses exactly (its parser takes seconds, not 2**63 ns)."""
    sign = "-" if nanos < 0 else ""
    whole, fraction = divmod(abs(nanos), 1_000_000_000)
    return f"{sign}{whole}.{fraction:09d}s"


def _is_string_const(node: Any) -> bool:
    return node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") == "string_value"


def _constant_value(node: Any) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a literal or a folded library value."""
    kind = node.WhichOneof("expr_kind")
    if kind == "const_expr":
        c = node.const_expr
        which = c.WhichOneof("constant_kind")
        if which in ("int64_value", "double_value", "string_value", "bool_value", "bytes_value"):
            return True, getattr(c, which)
        if which == "null_value":
            return True, None
        return False, None
    if kind == "struct_expr" and node.struct_expr.message_name in _OPAQUE_NAMES:
        entries = list(node.struct_expr.entries)
        if len(entries) == 1 and _is_string_const(entries[0].value):
            return True, library_value(node.struct_expr.message_name, entries[0].value.const_expr.string_value)
        return False, None
    if kind == "list_expr" and not node.list_expr.optional_indices:
        values = []
        for element in node.list_expr.elements:
            ok, value = _constant_value(element)
            if not ok:
                return False, None
            values.append(value)
        return True, values
    if kind == "call_expr" and node.call_expr.function == "optional.none" and not node.call_expr.args:
        return True, NONE
    return False, None


_OPAQUE_CLASSES = {t.cel_type: t for t in OPAQUE_TYPES}
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "int": (int,), "uint": (int,), "double": (float,), "bool": (bool,), "bytes": (bytes,),
    "list": (list,), "map": (dict,),
}


@lru_cache(maxsize=None)
def _accepted_types(params: tuple[str, ...]) -> tuple[tuple[type, ...] | None, ...]:
    """Per parameter, the exact Python types of its values (None: anything, dyn or a type parameter)."""
    accepted = []
    for param in params:
        name = parse_type(param).name
        accepted.append((_OPAQUE_CLASSES[name],) if name in _OPAQUE_CLASSES else _EXACT_TYPES.get(name))
    return tuple(accepted)


def select_overload(candidates: tuple[Overload, ...] | list[Overload], values: list[Any]) -> Overload | None:
    """The overload whose parameter types the (plain Python) ``values`` have."""
    for overload in candidates:
        if len(overload.params) != len(values):
            continue
        accepted = _accepted_types(overload.params)
        if all(types is None or type(v) in types for types, v in zip(accepted, values)):
            return overload
    return None


def _valid_timestamp(text: str) -> bool:
    try:
        return parse_rfc3339(text) is not None
    except OverflowError:
        return False


def _cpp_rfc3339(text: str) -> str:
    """An RFC 3339 timestamp Go reads, spelled as cel-cpp reads the same instant: a dot before
    the fraction, at most nine fraction digits."""
    match = _FRACTION.search(text)
    if match is None:
        return text
    return text[:match.start()] + "." + match[1][:9] + text[match.end():]


_FRACTION = re.compile(r"[.,]([0-9]+)")
# Go's time.Parse(time.RFC3339) syntax, ranges left to cel-cpp's parser (which checks them too)
_RFC3339_PATTERN = (r"^[0-9]{4}-(0[1-9]|1[0-2])-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.,][0-9]+)?"
                    r"(Z|[+-][0-9]{2}:[0-9]{2})$")


def optimize(checked: Any, *, hoist: bool = False, mixed_literals: bool = False) -> Result:
    """``mixed_literals``: a list or map literal may mix ``dyn`` values with typed ones (see
    ``Engine.compile``)."""
    return Optimizer(checked, hoist, mixed_literals).run()
