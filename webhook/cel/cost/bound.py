"""The runtime bound of the cel-expr backend: no object can make an evaluation run away.

cel-expr-python exposes no cost tracking, so the bound is computed before evaluating: the
work of a program is dominated by its comprehensions, and each comprehension iterates over
a collection whose size is bounded by what the activation holds. At compile time the
optimised AST becomes a polynomial in ``L`` (the longest list or map in the activation) and
``C`` (the longest string); at evaluation time both are measured and the polynomial gives
an upper bound of the iterations times the nodes evaluated per iteration. Over the limit,
the evaluation is not started: ``EngineBoundExceeded`` (a ``CelCostExceeded``, with the
apiserver's wording). The bound is the engine's own, not cel-go's count: for a CRD rule the
walk then asks cel-go's count (``webhook.cel.crd.rules``), which may well finish within the limit. The native
fast path (``native``) counts its own work as it runs, never more than this bound, so the
activation is measured only before cel-expr evaluates.

The bound covers the ranges CEL can build from an activation (selections, indexing,
``map``/``filter``/``transform*`` results, ``split``/``findAll`` of strings, concatenation,
``flatten``, ``lists.range``: a computed ``lists.range(n)`` is capped at the per-call limit
by a guard ``optimize/guards.py`` adds). Behind it, cel-cpp stops any evaluation after 10,000
comprehension iterations ("Iteration budget exceeded"), which the backend reports as the
same ``EngineBoundExceeded``.

One cost is cel-cpp's own: a comprehension that builds a list (``map``, ``filter``,
``transformList``) or a map (``transformMap*``) copies its accumulator on every append
(cel-expr-python exposes no runtime options, so not cel-cpp's in-place
``enable_comprehension_list_append``): n appends copy n²/2 elements, seconds of work for
10,000 before the iteration budget trips. Each element copied is charged :data:`COPY_COST`, as
cel-go charges a tenth per character traversed, so such a program over a few thousand
elements is refused before it starts (cel-go appends in place: Kubernetes does not charge
it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.cel.environment.env import MAP_INSERT_FUNCTION
from webhook.cel.environment.protos import children

Poly = dict[tuple[int, int], float]  # (power of L, power of C) -> coefficient
INFINITE: Poly = {(-1, -1): 1}


def _const(n: int) -> Poly:
    return {(0, 0): n}


_L: Poly = {(1, 0): 1}
_C_PLUS_ONE: Poly = {(0, 1): 1, (0, 0): 1}


def _add(a: Poly, b: Poly) -> Poly:
    if a is INFINITE or b is INFINITE:
        return INFINITE
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _mul(a: Poly, b: Poly) -> Poly:
    if a is INFINITE or b is INFINITE:
        return INFINITE
    out: Poly = {}
    for (la, ca), va in a.items():
        for (lb, cb), vb in b.items():
            key = (la + lb, ca + cb)
            out[key] = out.get(key, 0) + va * vb
    return out


# per element copied by an append to a comprehension's accumulator: cel-go's traversal
# factor for a native copy (a tenth of an evaluation step); 25 times that for a map
# insert, which crosses into Python (env.MAP_INSERT_FUNCTION) and back per append
COPY_COST = 0.1
_COPY_COSTS = {"_+_": COPY_COST, MAP_INSERT_FUNCTION: 25 * COPY_COST}

_STRING_RESULTS = {"split", "findAll", "regex.extractAll"}
_FLATTEN = {"flatten"}
_MATERIALIZE = {"lists.range", "flatten"}


@dataclass(frozen=True)
class CostShape:
    """An upper bound of a program's work as a function of its activation."""

    poly: Poly
    has_loops: bool

    @property
    def needs_measure(self) -> bool:
        """Single loops stay within cel-cpp's iteration budget; nested ones are measured first."""
        return self.poly is INFINITE or max(l + c for l, c in self.poly) >= 2

    def bound(self, activation: Mapping[str, Any], known: KnownSizes | None = None) -> float:
        if not self.has_loops:
            return self.poly.get((0, 0), 0)
        return self.at(*measure(activation.values(), known))

    def at(self, longest_list: int, longest_string: int) -> float:
        """The bound for an activation of these sizes (see ``measure``)."""
        if not self.has_loops:
            return self.poly.get((0, 0), 0)
        if self.poly is INFINITE:
            return float("inf")
        return sum(v * longest_list**l * longest_string**c for (l, c), v in self.poly.items())


class KnownSizes:
    """Sizes of objects a cluster state stores, which a policy's lookups hand to CEL on every
    request: ``measure`` sizes each once, not per evaluation.

    An entry is the object, its sizes and its JSON text when remembered; ``measure`` uses the
    sizes only for that very object whose JSON text is still the same (equal text, equal
    sizes), so an object changed in place after it was remembered is walked again, never
    bounded by its old size. (Freezing stored objects instead would need dict and list
    subclasses, which the engines and the generated fast paths, dispatching on
    ``type(x) is dict``, would take slower paths for.) The entry keeps its object alive: its id
    cannot name another object while the entry lives. An engine owns one (``Evaluator`` at the
    edge); nothing is kept between engines."""

    __slots__ = ("entries", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self.entries: dict[int, tuple[Any, tuple[int, int], bytes]] = {}
        self.limit = limit

    def remember(self, obj: dict[str, Any]) -> None:
        """Declare ``obj`` stored: ``measure`` sizes it once while it stays as it is now."""
        entry = self.entries.get(id(obj))
        if entry is not None and entry[0] is obj:
            return
        text = _json(obj)
        if text is None:  # not JSON (a value no stored object holds): measured every time
            return
        if len(self.entries) >= self.limit:
            try:
                del self.entries[next(iter(self.entries))]
            except (KeyError, RuntimeError, StopIteration):  # another thread got there first
                pass
        self.entries[id(obj)] = (obj, measure((obj,)), text)

    def sizes(self, obj: Any) -> tuple[int, int] | None:
        """The sizes of ``obj`` if it is remembered (None: measure it): as remembered while its
        JSON text is the same, else measured again and remembered as it is now."""
        entry = self.entries.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        text = _json(obj)
        if text == entry[2]:
            return entry[1]
        if text is None:  # no longer JSON: measured every time
            self.entries.pop(id(obj), None)
            return None
        sizes = measure((obj,))
        self.entries[id(obj)] = (obj, sizes, text)
        return sizes


def _json(obj: Any) -> bytes | None:
    try:
        return orjson.dumps(obj)
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        return None


_NOTHING_KNOWN: dict[int, tuple[Any, tuple[int, int], bytes]] = {}  # never written: ``measure`` without ``known``


def measure(values: Any, known: KnownSizes | None = None) -> tuple[int, int]:
    """(longest list or map, longest string) anywhere in ``values``; the objects ``known``
    holds are not walked again.

    Runs before every evaluation of a program with nested loops, over everything it reads
    (a policy's lookups included): exact-type dispatch first, as JSON values are plain."""
    longest_list = longest_string = 0
    stack = list(values)
    pop, extend = stack.pop, stack.extend
    stable = known.entries if known is not None else _NOTHING_KNOWN
    while stack:
        value = pop()
        kind = type(value)
        if kind is str:
            if len(value) > longest_string:
                longest_string = len(value)
        elif kind is dict:
            if id(value) in stable:
                sizes = known.sizes(value)  # type: ignore[union-attr]
                if sizes is not None:
                    longest_list = max(longest_list, sizes[0])
                    longest_string = max(longest_string, sizes[1])
                    continue
            if len(value) > longest_list:
                longest_list = len(value)
            extend(value.values())
        elif kind is list:
            if len(value) > longest_list:
                longest_list = len(value)
            extend(value)
        elif kind in _SCALARS:
            continue
        elif isinstance(value, (str, bytes, bytearray)):
            longest_string = max(longest_string, len(value))
        elif isinstance(value, dict):
            longest_list = max(longest_list, len(value))
            extend(value.values())
        elif isinstance(value, (list, tuple)):
            longest_list = max(longest_list, len(value))
            extend(value)
    return longest_list, longest_string


_SCALARS = frozenset({int, float, bool, type(None)})


def shape(expr: Any) -> CostShape:
    """The cost polynomial of an optimised AST (see the module docstring)."""
    total, loops = _cost(expr)
    return CostShape(total, loops)


def _cost(node: Any) -> tuple[Poly, bool]:
    kind = node.WhichOneof("expr_kind")
    if kind == "comprehension_expr":
        c = node.comprehension_expr
        iterations = _size(c.iter_range)
        range_cost, loops = _cost(c.iter_range)
        init_cost, init_loops = _cost(c.accu_init)
        body = _const(1)
        for part in (c.loop_condition, c.loop_step):
            part_cost, _ = _cost(part)
            body = _add(body, part_cost)
        copy_cost = _append_copy_cost(c)
        if copy_cost:  # every append copies the accumulator: at most one element per iteration so far
            body = _add(body, _mul(_const(copy_cost), _add(_size(c.accu_init), iterations)))
        result_cost, _ = _cost(c.result)
        looping = _mul(iterations, body)
        return _add(_add(_add(range_cost, init_cost), looping), result_cost), True
    total: Poly = _const(1)
    loops = kind == "call_expr" and node.call_expr.function in _MATERIALIZE
    if loops:  # building the collection costs its size
        total = _add(total, _size(node))
    for child in children(node):
        child_cost, child_loops = _cost(child)
        total = _add(total, child_cost)
        loops = loops or child_loops
    return total, loops


def _append_copy_cost(c: Any) -> float:
    """The cost per element copied when the loop step appends to the accumulator (list
    ``@result + [x]``, in a filter's conditional too, or a map insert), else 0."""
    step = c.loop_step
    if step.WhichOneof("expr_kind") == "call_expr" and step.call_expr.function == "_?_:_":
        steps = list(step.call_expr.args)[1:]
    else:
        steps = [step]
    cost = 0.0
    for step in steps:
        if step.WhichOneof("expr_kind") != "call_expr" or step.call_expr.function not in _COPY_COSTS:
            continue
        args = list(step.call_expr.args)
        if not args or args[0].WhichOneof("expr_kind") != "ident_expr" or args[0].ident_expr.name != c.accu_var:
            continue
        if step.call_expr.function == "_+_" and args[1].WhichOneof("expr_kind") != "list_expr":
            continue  # a counter (exists_one), or a concatenation of computed lists (charged as L)
        cost = max(cost, _COPY_COSTS[step.call_expr.function])
    return cost


def _size(node: Any) -> Poly:
    """An upper bound of the number of elements of the collection ``node`` evaluates to."""
    kind = node.WhichOneof("expr_kind")
    if kind == "list_expr":
        return _const(len(node.list_expr.elements))
    if kind == "struct_expr":
        return _const(len(node.struct_expr.entries))
    if kind == "comprehension_expr":
        # map/filter/transform*/fold results have at most one element per iteration
        c = node.comprehension_expr
        if c.iter_range.WhichOneof("expr_kind") == "list_expr" and not c.iter_range.list_expr.elements:
            return _size(c.result)  # a binding (cel.bind): the size of its result
        return _add(_size(c.iter_range), _size(c.accu_init))
    if kind == "call_expr":
        call = node.call_expr
        args = list(call.args)
        if call.function == "lists.range":
            value = args[0].const_expr.int64_value if args and args[0].WhichOneof("expr_kind") == "const_expr" else None
            # a computed n: capped by the guard in optimize/guards.py, sized like the data it comes from
            return _const(max(value, 0)) if value is not None else _L
        if call.function == "_+_":
            return _add(_size(args[0]), _size(args[1]))
        if call.function in _FLATTEN:
            return _mul(_size(call.target), _L)
        if call.function in _STRING_RESULTS:
            return _C_PLUS_ONE
    return _L
