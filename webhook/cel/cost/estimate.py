"""The apiserver's *estimated* CEL cost: cel-go's ``checker.Cost`` with Kubernetes' estimators.

    estimate(checked, size_estimator)  -> (min, max)

A port of cel-go's coster (v0.26: field paths, local variables, computed and entry sizes), the
cel-go extension estimators Kubernetes enables (sets, lists v3) and ``library.CostEstimator``.
Sizes of schema-declared values come from ``CrdSizeEstimator`` (maxItems/maxLength/maxProperties,
or the unbounded defaults derived from the 3 MiB request limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from webhook.cel.checker.checker import Checked
from webhook.cel.syntax.ast import (
    ACCUMULATOR, Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, Select)
from webhook.cel.common.decl import DeclType
from webhook.cel.common.types import CelType

MAX = 2**64 - 1
STRING_TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX_LENGTH = 0.25     # common.RegexStringLengthCostFactor
LIST_CREATE = 10
MAP_CREATE = 30
STRUCT_CREATE = 40
MAX_NAME_FORMAT_REGEX_SIZE = 128
_TWO_TO_64 = float(2**64)

Estimate = tuple[int, int]
UNKNOWN: Estimate = (0, MAX)


def _add(a: Estimate, b: Estimate) -> Estimate:
    return (min(a[0] + b[0], MAX), min(a[1] + b[1], MAX))


def _mul(a: Estimate, b: Estimate) -> Estimate:
    return (min(a[0] * b[0], MAX), min(a[1] * b[1], MAX))


def _factor_one(x: int, factor: float) -> int:
    xf = float(x)
    if xf > 0 and factor > 0 and xf > MAX / factor:
        return MAX
    ceil = math.ceil(xf * factor)
    if ceil >= _TWO_TO_64:
        return MAX
    return int(ceil)


def _factor(a: Estimate, factor: float) -> Estimate:
    return (_factor_one(a[0], factor), _factor_one(a[1], factor))


def _union(a: Estimate, b: Estimate) -> Estimate:
    return (min(a[0], b[0]), max(a[1], b[1]))


def _fixed(n: int) -> Estimate:
    return (n, n)


@dataclass(slots=True)
class Node:
    """cel-go's AstNode: a checked expression with its field path and computed size."""

    path: list[str] | None
    type: CelType
    expr: Expr | None
    size: Estimate | None


class SizeEstimator(Protocol):
    def estimate_size(self, node: Node) -> Estimate | None: ...


class CrdSizeEstimator:
    """apiextensions' sizeEstimator: walks the node's path through the schema's DeclTypes."""

    def __init__(self, root: DeclType | None) -> None:
        self.root = root

    def estimate_size(self, node: Node) -> Estimate | None:
        if not node.path or self.root is None:
            return None
        current = self.root
        for name in node.path[1:]:
            if name in ("@items", "@values"):
                if current.elem is None:
                    return None
                current = current.elem
            elif name == "@keys":
                if current.kind != "map":
                    return None
                return (0, 0)   # map keys are plain strings without a declared bound
            else:
                field = current.fields.get(name)
                if field is None:
                    return None
                current = field
        return (0, current.max_elements)


class RuntimeCharge:
    """What one evaluation of an expensive rule is charged: its estimate over the sizes of the
    values it actually sees, cached by those sizes (objects of one shape cost one estimate)."""

    __slots__ = ("checked", "max_cost", "paths", "cache")

    def __init__(self, checked: Checked, max_cost: int) -> None:
        self.checked = checked
        self.max_cost = max_cost
        self.paths: tuple[tuple[str, ...], ...] | None = None
        self.cache: dict[tuple[int, ...], int] = {}

    def __call__(self, activation: Mapping[str, Any]) -> int:
        if self.paths is None:
            recorder = _PathRecorder(activation)
            _Coster(self.checked, recorder).cost(self.checked.expr)
            self.paths = tuple(recorder.paths)
        sizes = tuple(path_size(activation, path) for path in self.paths)
        charge = self.cache.get(sizes)
        if charge is None:
            known = _KnownSizes(dict(zip(self.paths, sizes)), max(sizes, default=0))
            charge = min(self.max_cost, _Coster(self.checked, known).cost(self.checked.expr)[1])
            if len(self.cache) < 256:
                self.cache[sizes] = charge
        return charge


class _PathRecorder:
    """Collects the variable paths whose sizes an estimate depends on."""

    unknown = UNKNOWN

    def __init__(self, activation: Mapping[str, Any]) -> None:
        self.variables = set(activation)
        self.paths: dict[tuple[str, ...], None] = {}

    def estimate_size(self, node: Node) -> Estimate | None:
        if node.path and node.path[0] in self.variables:
            self.paths[tuple(node.path)] = None
        return None


class _KnownSizes:
    def __init__(self, sizes: dict[tuple[str, ...], int], largest: int) -> None:
        self.sizes = sizes
        # sizes CEL cannot derive statically (results of calls) are bounded by the largest input
        self.unknown: Estimate = (0, largest)

    def estimate_size(self, node: Node) -> Estimate | None:
        size = self.sizes.get(tuple(node.path)) if node.path else None
        return None if size is None else (0, size)


def path_size(activation: Mapping[str, Any], path: tuple[str, ...]) -> int:
    """The largest size (characters, bytes, entries) among the values at ``path``."""
    values: Any = (activation.get(path[0]),)
    for name in path[1:]:
        if name == "@items" or name == "@values":
            values = [item for value in values if isinstance(value, (dict, list))
                      for item in (value.values() if isinstance(value, dict) else value)]
        elif name == "@keys":
            values = [key for value in values if isinstance(value, dict) for key in value]
        elif name == "@indices":
            return 0  # indices are ints: no size
        else:
            values = [value[name] for value in values if isinstance(value, dict) and name in value]
    largest = 0
    for value in values:
        if isinstance(value, _SIZED) and len(value) > largest:
            largest = len(value)
    return largest


_SIZED = (str, bytes, list, dict)


class TypeSizeEstimator:
    """The size estimator of Kubernetes' library cost tests: strings and bytes are 0..12."""

    def estimate_size(self, node: Node) -> Estimate | None:
        if node.type.kind in ("string", "bytes"):
            return (0, 12)
        return None


@dataclass(slots=True)
class _Entry:
    container: str
    key: Estimate
    val: Estimate


def _entry_union(a: _Entry | None, b: _Entry | None) -> _Entry | None:
    if a is None or b is None:
        return None
    return _Entry(a.container, _union(a.key, b.key), _union(a.val, b.val))


@dataclass(slots=True)
class _Local:
    path: list[str] | None
    size: Estimate | None
    entry: _Entry | None


class _Coster:
    def __init__(self, checked: Checked, sizes: SizeEstimator, presence_test_cost: int = 0) -> None:
        self.checked = checked
        self.sizes = sizes
        self.paths: dict[int, list[str]] = {}
        self.locals: dict[str, list[_Local]] = {}
        self.computed: dict[int, Estimate] = {}
        self.entries: dict[int, _Entry] = {}
        self.presence = _fixed(presence_test_cost)
        self.unknown: Estimate = getattr(sizes, "unknown", UNKNOWN)

    # --- bookkeeping ------------------------------------------------------------------------------

    def type_of(self, e: Expr) -> CelType:
        return self.checked.types.get(e.id, CelType("dyn"))

    def peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def push(self, name: str, local: _Local) -> None:
        self.locals.setdefault(name, []).append(local)

    def pop(self, name: str) -> None:
        self.locals[name].pop()

    def get_path(self, e: Expr) -> list[str]:
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None:
                return list(local.path or [])
        return list(self.paths.get(e.id, []))

    def node(self, e: Expr) -> Node:
        path = self.get_path(e)
        if path and path[0] in (ACCUMULATOR, "@__result__"):
            path = None
        return Node(path, self.type_of(e), e, self.compute_size(e))

    def set_size(self, e: Expr, size: Estimate | None) -> None:
        if size is not None:
            self.computed[e.id] = size

    def compute_size(self, e: Expr) -> Estimate | None:
        if e.id in self.computed:
            return self.computed[e.id]
        literal = _expr_size(e)
        if literal is not None:
            return literal
        estimated = self.sizes.estimate_size(Node(self.get_path(e), self.type_of(e), e, None))
        if estimated is not None:
            self.computed[e.id] = estimated
            return estimated
        if _is_scalar(self.type_of(e)):
            return (1, 1)
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def size_or_unknown(self, e: Expr | Node) -> Estimate:
        if isinstance(e, Node):
            return e.size if e.size is not None else self.unknown
        size = self.compute_size(e)
        return size if size is not None else self.unknown

    def entry_size(self, e: Expr) -> _Entry | None:
        if e.id in self.entries:
            return self.entries[e.id]
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None and local.entry is not None:
                return local.entry
        return None

    def container(self, e: Expr, entry: _Entry | None) -> str:
        if entry is not None:
            return entry.container
        return self.type_of(e).kind

    # --- cost -------------------------------------------------------------------------------------

    def cost(self, e: Expr | None) -> Estimate:
        if e is None:
            return (0, 0)
        if isinstance(e, Literal):
            return (0, 0)
        if isinstance(e, Ident):
            local = self.peek(e.name)
            self.paths[e.id] = list(local.path or []) if local is not None else [e.name]
            return (1, 1)
        if isinstance(e, Select):
            return self.cost_select(e)
        if isinstance(e, Call):
            return self.cost_call(e)
        if isinstance(e, CreateList):
            return self.cost_list(e)
        if isinstance(e, CreateMap):
            return self.cost_map(e)
        if isinstance(e, CreateStruct):
            total = (STRUCT_CREATE, STRUCT_CREATE)
            for _, value in e.fields:
                total = _add(total, self.cost(value))
            return total
        if isinstance(e, Comprehension):
            if self.is_bind(e):
                return self.cost_bind(e)
            return self.cost_comprehension(e)
        return (0, 0)

    def cost_select(self, e: Select) -> Estimate:
        if e.test_only:
            return _add(self.presence, self.cost(e.operand))
        total = self.cost(e.operand)
        if self.type_of(e.operand).kind in ("map", "object", "typeparam"):
            total = _add(total, (1, 1))
        self.paths[e.id] = self.get_path(e.operand) + [e.field]
        return total

    def cost_call(self, e: Call) -> Estimate:
        function = self.checked.qualified_calls.get(e.id, e.function)
        if function == "dyn" and e.target is None and len(e.args) == 1:
            arg_cost = self.cost(e.args[0])
            self.set_size(e, self.compute_size(e.args[0]))
            entry = self.entry_size(e.args[0])
            if entry is not None:
                self.entries[e.id] = entry
            return _add((1, 1), arg_cost)
        args = e.args
        arg_costs = [self.cost(a) for a in args]
        arg_nodes = [self.node(a) for a in args]
        overloads = self.checked.overloads.get(e.id, ())
        if not overloads:
            return (0, 0)
        total = (0, 0)
        target: Node | None = None
        is_member = e.target is not None and e.id not in self.checked.qualified_calls
        if is_member:
            total = _add(total, self.cost(e.target))
            target = self.node(e.target)
        fn_cost = (MAX, 0)
        result_size: Estimate | None = None
        for overload in overloads:
            call_cost, size = self.function_cost(e, function, overload, target, arg_nodes, arg_costs)
            fn_cost = _union(fn_cost, call_cost)
            if size is not None:
                result_size = size if result_size is None else _union(result_size, size)
            if overload == "index_list" and args:
                entry = self.entry_size(args[0])
                result_size = entry.val if entry is not None else None
                self.paths[e.id] = self.get_path(args[0]) + ["@items"]
            elif overload == "index_map" and args:
                entry = self.entry_size(args[0])
                result_size = entry.val if entry is not None else None
                self.paths[e.id] = self.get_path(args[0]) + ["@values"]
            if result_size is None:
                result_size = self.compute_size(e)
        self.set_size(e, result_size)
        return _add(total, fn_cost)

    def cost_list(self, e: CreateList) -> Estimate:
        total = (0, 0)
        item = (MAX, 0) if e.elements else (0, 0)
        for element in e.elements:
            total = _add(total, self.cost(element))
            item = _union(item, self.size_or_unknown(element))
        self.entries[e.id] = _Entry("list", (1, 1), item)
        return _add(total, (LIST_CREATE, LIST_CREATE))

    def cost_map(self, e: CreateMap) -> Estimate:
        total = (0, 0)
        key = (MAX, 0) if e.entries else (0, 0)
        val = (MAX, 0) if e.entries else (0, 0)
        for entry in e.entries:
            total = _add(total, self.cost(entry.key))
            total = _add(total, self.cost(entry.value))
            key = _union(key, self.size_or_unknown(entry.key))
            val = _union(val, self.size_or_unknown(entry.value))
        self.entries[e.id] = _Entry("map", key, val)
        return _add(total, (MAP_CREATE, MAP_CREATE))

    def push_local(self, name: str, e: Expr) -> None:
        self.push(name, _Local(self.get_path(e), self.compute_size(e), self.entry_size(e)))

    def cost_comprehension(self, e: Comprehension) -> Estimate:
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self.push_local(e.accu_var, e.accu_init)
        rng = e.iter_range
        entry = self.entry_size(rng)
        container = self.container(rng, entry)
        path = self.get_path(rng)
        if e.iter_var2 is not None:
            self.push(e.iter_var, _Local(path + ["@indices" if container == "list" else "@keys"],
                                         entry.key if entry is not None else None, None))
            self.push(e.iter_var2, _Local(path + ["@items" if container == "list" else "@values"],
                                          entry.val if entry is not None else None, None))
        else:
            size = entry.key if entry is not None else None
            sub = "@keys"
            if container == "list":
                size = entry.val if entry is not None else None
                sub = "@items"
            self.push(e.iter_var, _Local(path + [sub], size, None))
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        self.pop(e.iter_var)
        if e.iter_var2 is not None:
            self.pop(e.iter_var2)
        total = _add(total, self.cost(e.result))
        self.pop(e.accu_var)
        count = self.size_or_unknown(rng)
        total = _add(total, _mul(count, _add(step, loop)))
        if isinstance(e.accu_init, Literal):
            self.set_size(e, self.compute_size(e.accu_init))
        elif isinstance(e.accu_init, (CreateList, CreateMap)):
            self.set_size(e, count)
            step_entry = self.entry_size(e.loop_step)
            if step_entry is not None:
                self.entries[e.id] = step_entry
        return total

    def is_bind(self, e: Comprehension) -> bool:
        return (isinstance(e.iter_range, CreateList) and not e.iter_range.elements
                and isinstance(e.loop_condition, Literal) and e.loop_condition.value is False
                and e.accu_var != ACCUMULATOR)

    def cost_bind(self, e: Comprehension) -> Estimate:
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self.push_local(e.accu_var, e.accu_init)
        total = _add(total, self.cost(e.result))
        self.pop(e.accu_var)
        self.set_size(e, self.compute_size(e.result))
        entry = self.entry_size(e.result)
        if entry is not None:
            self.entries[e.id] = entry
        return total

    # --- functions ----------------------------------------------------------------------------------

    def function_cost(self, e: Call, function: str, overload: str, target: Node | None, args: list[Node],
                      arg_costs: list[Estimate]) -> tuple[Estimate, Estimate | None]:
        arg_sum = (0, 0)
        for cost in arg_costs:
            arg_sum = _add(arg_sum, cost)
        estimator = _EXTENSION_ESTIMATORS.get(overload)
        if estimator is not None:
            found = estimator(self, target, args)
            if found is not None:
                return _add(found[0], arg_sum), found[1]
        found = _kubernetes_estimate(self, function, overload, target, args)
        if found is not None:
            return _add(found[0], arg_sum), found[1]
        size = self.size_or_unknown
        if overload == "string_format" and target is not None:
            return _add(_factor(size(target), STRING_TRAVERSAL), arg_sum), None
        if overload == "string_to_bytes" and len(args) == 1:
            sz = size(args[0])
            return _add(_factor(sz, STRING_TRAVERSAL), arg_sum), (sz[0], min(sz[1] * 4, MAX))
        if overload == "bytes_to_string" and len(args) == 1:
            sz = size(args[0])
            return _add(_factor(sz, STRING_TRAVERSAL), arg_sum), (sz[0] // 4, sz[1])
        if overload == "strings_quote" and len(args) == 1:
            sz = size(args[0])
            return _add(_factor(sz, STRING_TRAVERSAL), arg_sum), (sz[0] + 2, min(sz[1] * 2 + 2, MAX))
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return _add(_factor(size(args[0]), STRING_TRAVERSAL), arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return _add(_factor(size(args[1]), 1), arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            string_cost = _factor(_add(size(target), (1, 1)), STRING_TRAVERSAL)
            regex_cost = _factor(size(args[0]), REGEX_LENGTH)
            return _add(_mul(string_cost, regex_cost), arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            string_cost = _factor(size(target), STRING_TRAVERSAL)
            sub_cost = _factor(size(args[0]), STRING_TRAVERSAL)
            return _add(_mul(string_cost, sub_cost), arg_sum), None
        if overload in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs[0], arg_costs[1]
            return (lhs[0], _add(lhs, rhs)[1]), None
        if overload == "conditional":
            result = _union(size(args[1]), size(args[2]))
            entry = _entry_union(self.entry_size(e.args[1]), self.entry_size(e.args[2]))
            if entry is not None:
                self.entries[e.id] = entry
            return _add(arg_costs[0], _union(arg_costs[1], arg_costs[2])), result
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            result = _add(size(args[0]), size(args[1]))
            entry = _entry_union(self.entry_size(e.args[0]), self.entry_size(e.args[1]))
            if entry is not None:
                self.entries[e.id] = entry
            if overload == "add_list":
                return _add((1, 1), arg_sum), result
            return _add(_factor(result, STRING_TRAVERSAL), arg_sum), result
        if overload in _SIZED_COMPARISONS:
            lhs, rhs = size(args[0]), size(args[1])
            smallest = min(lhs[1], rhs[1])
            low = 1 if smallest > 0 else 0
            return _add(_factor((low, smallest), STRING_TRAVERSAL), arg_sum), None
        return _add((1, 1), arg_sum), None


_SIZED_COMPARISONS = frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string",
    "less_bytes", "greater_bytes", "less_equals_bytes", "greater_equals_bytes", "equals", "not_equals",
})


def _expr_size(e: Expr) -> Estimate | None:
    if isinstance(e, Literal):
        if e.kind == "string":
            return _fixed(len(e.value))
        if e.kind == "bytes":
            return _fixed(len(e.value))
        return (1, 1)
    if isinstance(e, CreateList):
        return _fixed(len(e.elements))
    if isinstance(e, CreateMap):
        return _fixed(len(e.entries))
    return None


def _is_scalar(t: CelType) -> bool:
    if t.kind in ("bool", "double", "duration", "int", "timestamp", "uint"):
        return True
    if t.kind == "optional_type":
        return _is_scalar(t.params[0])
    return False


# --- cel-go extension estimators (sets, lists v3) ---------------------------------------------

def _ext_size(c: _Coster, node: Node) -> Estimate:
    if node.size is not None:
        return node.size
    estimated = c.sizes.estimate_size(node)
    return estimated if estimated is not None else c.unknown


def _sets(factor: float):
    def estimate(c: _Coster, target: Node | None, args: list[Node]):
        if len(args) != 2:
            return None
        cost = _add(_factor(_mul(_ext_size(c, args[0]), _ext_size(c, args[1])), factor), (1, 1))
        return cost, None
    return estimate


def _list_call(factor: float, size: Estimate) -> tuple[Estimate, Estimate]:
    cost = _add(_add(_factor(size, factor), (1, 1)), (LIST_CREATE, LIST_CREATE))
    return cost, size


def _int_literal(node: Node, default: int) -> int:
    e = node.expr
    if not isinstance(e, Literal) or e.kind != "int":
        return default
    return max(e.value, 0)


def _slice(c: _Coster, target: Node | None, args: list[Node]):
    if target is None or len(args) != 2:
        return None
    sz = _ext_size(c, target)
    start, end = _int_literal(args[0], 0), _int_literal(args[1], sz[1])
    return _list_call(1, _fixed(max(end - start, 0) if end >= start else (end - start) % 2**64))


def _range(c: _Coster, target: Node | None, args: list[Node]):
    if target is not None or len(args) != 1:
        return None
    return _list_call(1, _fixed(_int_literal(args[0], MAX)))


def _reverse(c: _Coster, target: Node | None, args: list[Node]):
    if target is None or args:
        return None
    return _list_call(1, _ext_size(c, target))


def _flatten(c: _Coster, target: Node | None, args: list[Node]):
    if target is None or len(args) > 1:
        return None
    depth = _int_literal(args[0], MAX) if args else 1
    return _list_call(float(depth), _ext_size(c, target))


def _distinct(c: _Coster, target: Node | None, args: list[Node]):
    if target is None or args:
        return None
    sz = _ext_size(c, target)
    return _list_call(2.0, _mul(sz, sz))


def _sort(elem: str, by: bool):
    def estimate(c: _Coster, target: Node | None, args: list[Node]):
        if target is None or len(args) != (1 if by else 0):
            return None
        sz = _ext_size(c, args[0] if by else target)
        factor = 2.0 + (STRING_TRAVERSAL if elem in ("string", "bytes") else 0)
        return _list_call(factor, _mul(sz, sz))
    return estimate


_EXTENSION_ESTIMATORS = {
    "list_sets_contains_list": _sets(1),
    "list_sets_intersects_list": _sets(1),
    "list_sets_equivalent_list": _sets(2),
    "list_slice": _slice,
    "list_flatten": _flatten,
    "list_flatten_int": _flatten,
    "lists_range": _range,
    "list_reverse": _reverse,
    "list_distinct": _distinct,
}
for _elem in ("bool", "bytes", "double", "google.protobuf.Duration", "google.protobuf.Timestamp", "int", "string",
              "uint"):
    _EXTENSION_ESTIMATORS[f"list_{_elem}_sort"] = _sort(_elem, by=False)
    _EXTENSION_ESTIMATORS[f"list_{_elem}_sortByAssociatedKeys"] = _sort(_elem, by=True)


# --- Kubernetes' library.CostEstimator.EstimateCallCost ---------------------------------------

_NOMINAL = {"serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason",
            "error", "errored", "masked", "prefixLength", "family", "isUnspecified", "isLoopback",
            "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger",
            "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "major",
            "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery"}


def _k8s_size(c: _Coster, node: Node) -> Estimate:
    return _ext_size(c, node)


def _list_element_node(c: _Coster, node: Node) -> Node | None:
    if not node.type.params:
        return None
    elem = node.type.params[0]
    path = (node.path + ["@items"]) if node.path is not None else None
    return Node(path, elem, None, None)


def _kubernetes_estimate(c: _Coster, function: str, overload: str, target: Node | None,
                         args: list[Node]) -> tuple[Estimate, Estimate | None] | None:
    size = lambda node: _k8s_size(c, node)  # noqa: E731
    if function == "check":
        return (350000, 350000), None
    if function in _NOMINAL:
        return (1, 1), None
    if function in ("fieldSelector", "labelSelector"):
        if len(args) == 1:
            length = size(args[0])
            parse = _factor(length, STRING_TRAVERSAL)
            requirements = _factor(_factor(length, 0.5), float(LIST_CREATE + STRUCT_CREATE))
            return _add(_add((LIST_CREATE, LIST_CREATE), parse), requirements), None
        return None
    if function in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
        if target is None:
            return None
        element = _list_element_node(c, target)
        if element is not None:
            element_cost = (1, 1)
            if element.type.kind in ("string", "bytes"):
                element_cost = _add(element_cost, _factor(size(element), STRING_TRAVERSAL))
            return _mul(size(target), element_cost), None
        return _factor(size(target), STRING_TRAVERSAL), None
    if function in ("url", "jsonpatch.escapeKey"):
        if len(args) == 1:
            sz = size(args[0])
            return _factor(sz, STRING_TRAVERSAL), sz
        return None
    if function in ("lowerAscii", "upperAscii", "substring", "trim"):
        if target is not None:
            sz = size(target)
            return _factor(sz, STRING_TRAVERSAL), sz
        return None
    if function == "replace":
        if target is not None and len(args) >= 2:
            return _replace(size(target), size(args[0]), size(args[1]))
        return None
    if function == "split":
        if target is not None:
            sz = size(target)
            top = sz[1]
            if len(args) > 1 and isinstance(args[1].expr, Literal) and args[1].expr.kind == "int":
                top = args[1].expr.value % 2**64
            return _factor(sz, 2 * STRING_TRAVERSAL), (0, top)
        return None
    if function == "join":
        if target is not None:
            joined = (0, 0)
            list_size = size(target)
            element = _list_element_node(c, target)
            if element is not None:
                joined = _mul(list_size, size(element))
            if args:
                separators = (max(list_size[0] - 1, 0), max(list_size[1] - 1, 0))
                joined = _add(joined, _mul(size(args[0]), separators))
            return _factor(joined, STRING_TRAVERSAL), joined
        return None
    if function in ("find", "findAll"):
        if target is not None and args:
            sz = size(target)
            string_cost = _factor(_add(sz, (1, 1)), STRING_TRAVERSAL)
            regex_cost = _factor(size(args[0]), REGEX_LENGTH)
            return _mul(string_cost, regex_cost), (0, sz[1])
        return None
    # parsers are global functions: their cost is a traversal of the argument
    if function in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver"):
        if args:
            return _factor(size(args[0]), STRING_TRAVERSAL), None
        return None
    if function == "ip":
        if overload == "cidr_ip":
            return (1, 1), None
        if args:
            return _factor(size(args[0]), STRING_TRAVERSAL), None
        return None
    if function == "ip.isCanonical":
        if args:
            return _factor(size(args[0]), 2 * STRING_TRAVERSAL), None
        return None
    if function in ("containsIP", "containsCIDR"):
        if target is not None and args:
            sz = (4, 16)
            cost = _factor(_add(sz, sz), STRING_TRAVERSAL)
            if function == "containsCIDR":
                cost = _add(_add(cost, _factor(sz, STRING_TRAVERSAL)), (1, 1))
            if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
                cost = _add(cost, _factor(size(args[0]), STRING_TRAVERSAL))
            return cost, None
        return None
    if function == "validate":
        if target is not None:
            return _factor(_factor(size(args[0]), STRING_TRAVERSAL), MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH), None
        return None
    if function == "_==_" and len(args) == 2:
        lhs, rhs = args[0].type, args[1].type
        if lhs == rhs and lhs.kind == "opaque":
            if lhs.name in _UNIT_EQUALITY:
                return (1, 1), None
            if lhs.name == "kubernetes.NamedFormat":
                return _factor((1, MAX_FORMAT_SIZE), STRING_TRAVERSAL), None
            if lhs.name == "kubernetes.URL":
                computed = args[1].size
                bound = computed[1] if computed is not None else 1
                return _factor((1, bound), STRING_TRAVERSAL), None
    return None


_UNIT_EQUALITY = frozenset({
    "net.IP", "net.CIDR", "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.authorization.Authorizer",
    "kubernetes.authorization.PathCheck", "kubernetes.authorization.GroupCheck",
    "kubernetes.authorization.ResourceCheck", "kubernetes.authorization.Decision",
})
MAX_FORMAT_SIZE = 64


def _replace(sz: Estimate, to_replace: Estimate, replace_with: Estimate) -> tuple[Estimate, Estimate]:
    count_max = retained_max = 0
    if to_replace[0] == 0:
        count_max = sz[1] + 1 if sz[1] < MAX else sz[1]
        retained_max = sz[1]
    elif replace_with[1] <= to_replace[0]:
        retained_max = sz[1]
    else:
        count_max = math.ceil(sz[1] / to_replace[0])
    count_min = retained_min = 0
    if to_replace[1] == 0:
        count_min = sz[0] + 1 if sz[0] < MAX else sz[0]
        retained_min = sz[0]
    elif to_replace[1] <= replace_with[0]:
        retained_min = sz[0]
    else:
        count_min = math.ceil(sz[0] / to_replace[1])
    result = _add(_mul((count_min, count_max), replace_with), (retained_min, retained_max))
    return _factor(sz, 2 * STRING_TRAVERSAL), result


def estimate(checked: Checked, sizes: SizeEstimator) -> Estimate:
    """The (min, max) estimated cost of a checked expression."""
    return _Coster(checked, sizes).cost(checked.expr)
