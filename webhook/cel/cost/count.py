"""cel-go's *actual* cost of one evaluation, as the apiserver charges a CRD rule.

Kubernetes evaluates a rule with cel-go's cost tracker on (``cel.OptTrackCost``, Kubernetes'
``library.CostEstimator.CallCost`` as its estimator) and charges what it counted against the
per-call limit and the request's budget. cel-expr counts nothing, so a rule's checked AST
(cel-go's shape, from ``webhook.cel.checker``) is evaluated here a second time, counting as
cel-go's ``CostObserver`` does:

* a variable, a field selection, an index, a presence test's operand: 1 each (``has()``
  itself 0: Kubernetes turns off ``PresenceTestHasCost``); constants 0;
* ``&&``, ``||`` and ``?:`` cost nothing themselves and evaluate only what cel-go evaluates
  (left to right, short-circuit);
* list and map literals 10 and 30 (message constructions 40), unless every element is a constant: ``OptOptimize``
  builds those once (and type conversions of a constant, and ``in`` over a constant list);
* a comprehension: its range, its accumulator's initial value, each iteration's condition
  and step, its result;
* a call: ``CallCost`` of its actual arguments and result (Kubernetes' libraries), else
  cel-go's own charges (string traversals, ``in`` over a list, comparisons of strings, ...).

Errors are values, as in cel-go: an evaluation goes on past them and is charged for what it
evaluates. Where this evaluator is not sure of cel-go's count (a function, a value or a
case outside what it knows), ``CostCounter.count`` answers None and the caller charges the
estimate, never less than cel-go would. The count stops the moment it passes the limit:
no evaluation here runs away either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cel.checker.checker import Checked
from webhook.cel.errors import CelEvalError
from webhook.cel.cost.estimate import LIST_CREATE, MAP_CREATE, STRUCT_CREATE
from webhook.cel.library.base import OptionalValue
from webhook.cel.library.lists import cel_equals
from webhook.cel.library.dispatch import select_overload
from webhook.cel.syntax.ast import (
    Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, Select, walk)
from webhook.cel.common.types import DYN
from webhook.cel.cost.calls import (
    CelTypeValue, COMPARE, CONVERSIONS, Error, GLOBAL_FUNCTIONS, MEMBER_FUNCTIONS, TYPE_IDENTS, Unknown,
    arithmetic, call_cost, checked_int, compare, contains, index_value, library_call, library_overloads,
    counted_optional_entry)


class _Exceeded(Exception):
    def __init__(self, cost: int) -> None:
        self.cost = cost


EXCEEDED = object()  # the value of a count that passed the limit


@dataclass(frozen=True, slots=True)
class CountedEvaluation:
    value: Any   # the evaluation's value, an ``Error``, or ``EXCEEDED``
    cost: int    # what cel-go charged (up to the step that passed the limit)

    def agrees_with(self, outcome: Any) -> bool:
        """Whether the count saw what the engine answered (``outcome``: a value or the
        ``CelEvalError``): the same value, an error for an error, or a count that stopped at
        the limit (cel-go stops there, whatever the engine went on to answer)."""
        value = self.value
        if value is EXCEEDED:
            return True
        if isinstance(outcome, CelEvalError):
            return isinstance(value, Error)
        return type(value) is type(outcome) and value == outcome


class _Frame:
    """One count's state: the activation, the comprehension variables in scope, the cost so far."""

    __slots__ = ("activation", "locals", "cost", "limit")

    def __init__(self, activation: Mapping[str, Any], limit: int) -> None:
        self.activation = activation
        self.locals: dict[str, Any] = {}
        self.cost = 0
        self.limit = limit

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise _Exceeded(self.cost)


Step = Callable[[_Frame], Any]


class CostCounter:
    """The cost counter of one checked expression (compiled once)."""

    __slots__ = ("_root",)

    def __init__(self, checked: Checked) -> None:
        self._root: Step | None
        try:
            self._root = _Compiler(checked).compile(checked.expr, frozenset())
        except (Unknown, RecursionError):  # RecursionError: nested deeper than Python's stack
            self._root = None

    def count(self, activation: Mapping[str, Any], limit: int) -> CountedEvaluation | None:
        """cel-go's value and cost on ``activation`` (None: not known here)."""
        if self._root is None:
            return None
        frame = _Frame(activation, limit)
        try:
            value = self._root(frame)
        except _Exceeded as exceeded:
            return CountedEvaluation(EXCEEDED, exceeded.cost)
        except Exception:  # Unknown, or a value outside what is known here (nesting too deep...)
            return None
        return CountedEvaluation(value, frame.cost)


# --- compilation -------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked

    def function(self, e: Call) -> str:
        return self.checked.qualified_calls.get(e.id, e.function)

    def is_member(self, e: Call) -> bool:
        return e.target is not None and e.id not in self.checked.qualified_calls

    # constants as cel-go's OptOptimize builds them once

    def constant(self, e: Expr) -> tuple[bool, Any]:
        if isinstance(e, Literal):
            if e.kind == "uint":
                raise Unknown("uint")
            return True, e.value
        if isinstance(e, CreateList) and not e.optional_indices:
            values = [self.constant(element) for element in e.elements]
            if all(known for known, _ in values):
                return True, [value for _, value in values]
        if isinstance(e, CreateMap) and not any(entry.optional for entry in e.entries):
            keys = [self.constant(entry.key) for entry in e.entries]
            values = [self.constant(entry.value) for entry in e.entries]
            if all(known for known, _ in keys + values):
                if any(type(key) is not str for _, key in keys) or len({key for _, key in keys}) != len(keys):
                    raise Unknown("map literal keys")
                return True, {key: value for (_, key), (_, value) in zip(keys, values)}
        if isinstance(e, Call) and self.function(e) in CONVERSIONS and not self.is_member(e) and len(e.args) == 1:
            known, value = self.constant(e.args[0])
            if known:
                implementation = GLOBAL_FUNCTIONS.get((self.function(e), 1))
                if implementation is None:
                    raise Unknown(f"{self.function(e)}() of a constant")
                _, converted = implementation([value])
                if isinstance(converted, Error):
                    raise Unknown("a constant conversion error")
                return True, converted
        return False, None

    def compile(self, e: Expr, scope: frozenset[str]) -> Step:
        known, value = self.constant(e)
        if known:
            return lambda f: value
        if isinstance(e, Ident):
            return self.ident(e, scope)
        if isinstance(e, Select):
            return self.select(e, scope)
        if isinstance(e, Call):
            return self.call(e, scope)
        if isinstance(e, CreateList):
            return self.create_list(e, scope)
        if isinstance(e, CreateMap):
            return self.create_map(e, scope)
        if isinstance(e, Comprehension):
            return self.comprehension(e, scope)
        if isinstance(e, CreateStruct):
            return self.create_struct(e, scope)
        raise Unknown(type(e).__name__)

    def ident(self, e: Ident, scope: frozenset[str]) -> Step:
        name = e.name
        if name not in scope and name in TYPE_IDENTS and self.checked.types.get(e.id, DYN).kind == "type":
            value = CelTypeValue(name)  # a type name: a constant
            return lambda f: value
        if name in scope:
            def local(f: _Frame) -> Any:
                f.charge(1)
                return f.locals[name]
            return local

        def variable(f: _Frame) -> Any:
            f.charge(1)
            if name not in f.activation:
                raise Unknown(f"variable {name}")
            return f.activation[name]
        return variable

    def select(self, e: Select, scope: frozenset[str]) -> Step:
        operand = self.compile(e.operand, scope)
        field = e.field
        relative = 0 if _is_attribute(e.operand) else 1  # a selection from a computed value

        if e.test_only:
            def has(f: _Frame) -> Any:
                value = operand(f)
                if relative:
                    f.charge(relative)
                if isinstance(value, Error):
                    return value
                if type(value) is not dict:
                    raise Unknown("has() on another kind")
                return field in value
            return has

        optional = e.optional

        def select(f: _Frame) -> Any:
            value = operand(f)
            f.charge(1 + relative)
            if isinstance(value, Error):
                return value
            if optional or type(value) is OptionalValue:  # x.?f, and any selection below it
                return counted_optional_entry(value, field)
            if type(value) is not dict:
                raise Unknown("a selection on another kind")
            return value[field] if field in value else Error(f"no such key: {field}")
        return select

    def create_list(self, e: CreateList, scope: frozenset[str]) -> Step:
        elements = [self.compile(element, scope) for element in e.elements]
        optional = e.optional_indices

        def create(f: _Frame) -> Any:
            values = [element(f) for element in elements]
            f.charge(LIST_CREATE)
            error = next((v for v in values if isinstance(v, Error)), None)
            if error is not None or not optional:
                return error if error is not None else values
            out = []
            for i, value in enumerate(values):  # [?x]: x's value, when it has one
                if i not in optional:
                    out.append(value)
                elif type(value) is not OptionalValue:
                    return Error("no such overload")
                elif value.has_value:
                    out.append(value.value)
            return out
        return create

    def create_map(self, e: CreateMap, scope: frozenset[str]) -> Step:
        if any(entry.optional for entry in e.entries):
            raise Unknown("optional map entries")
        entries = [(self.compile(entry.key, scope), self.compile(entry.value, scope)) for entry in e.entries]

        def create(f: _Frame) -> Any:
            out: dict = {}
            error = None
            for key_step, value_step in entries:
                key, value = key_step(f), value_step(f)
                if error is None:
                    error = next((v for v in (key, value) if isinstance(v, Error)), None)
                if error is None:
                    if type(key) is not str:
                        raise Unknown("map keys of another kind")
                    if key in out:
                        error = Error(f"Failed with repeated key: {key}")
                    out[key] = value
            f.charge(MAP_CREATE)
            return error if error is not None else out
        return create

    def create_struct(self, e: CreateStruct, scope: frozenset[str]) -> Step:
        """A message construction (a MutatingAdmissionPolicy's ``Object{...}``, ``JSONPatch{...}``):
        its fields, then cel-go's ``StructCreateBaseCost`` (``OptOptimize`` folds no message);
        its value the fields by name."""
        fields = [(name, self.compile(value, scope)) for name, value in e.fields]

        def create(f: _Frame) -> Any:
            values = {name: step(f) for name, step in fields}
            f.charge(STRUCT_CREATE)
            return next((v for v in values.values() if isinstance(v, Error)), values)
        return create

    def comprehension(self, e: Comprehension, scope: frozenset[str]) -> Step:
        iter_range = self.compile(e.iter_range, scope)
        init = self.compile(e.accu_init, scope)
        inner = scope | {e.iter_var, e.accu_var} | ({e.iter_var2} if e.iter_var2 else set())
        condition = self.compile(e.loop_condition, inner)
        # a step that appends to (map, filter) or inserts into (transformMap) its own accumulator
        fresh, accumulating = self.appending_step(e, inner) or self.inserting_step(e, inner) or (None, None)
        step = accumulating or self.compile(e.loop_step, inner)
        result = self.compile(e.result, (scope - {e.iter_var, e.iter_var2}) | {e.accu_var})
        first, second, accu = e.iter_var, e.iter_var2, e.accu_var

        def fold(f: _Frame) -> Any:
            items = iter_range(f)
            if isinstance(items, Error):
                return items
            saved = {name: f.locals.get(name, _UNSET) for name in (first, second, accu) if name}
            try:
                f.locals[accu] = fresh() if fresh else init(f)  # ([] and {}: constants, free)
                if type(items) is list:
                    pairs = enumerate(items) if second else ((item, None) for item in items)
                elif type(items) is dict:
                    if len(items) > 1 and not (_order_free(e) or fresh is dict):  # (a map: any order)
                        raise Unknown("an order-dependent fold over a map")
                    pairs = items.items() if second else ((key, None) for key in items)
                else:
                    return Error("got non-iterable")
                for one, two in pairs:
                    f.locals[first] = one
                    if second:
                        f.locals[second] = two
                    if condition(f) is not True:
                        if type(items) is dict and len(items) > 1:
                            # where cel-go stops depends on Go's random map order
                            raise Unknown("a fold over a map that stops early")
                        break
                    f.locals[accu] = step(f)
                return result(f)
            finally:
                for name, value in saved.items():
                    if value is _UNSET:
                        f.locals.pop(name, None)
                    else:
                        f.locals[name] = value
        return fold

    def appending_step(self, e: Comprehension, scope: frozenset[str]) -> tuple[type, Step] | None:
        """The step of ``map``/``filter``/``transformList``, ``@result + [x]`` (maybe under
        ``p ? ... : @result``) over an accumulator that starts as ``[]``, appending in place as
        cel-go's mutable accumulator does (a copy per append would be quadratic), charged as
        the concatenation is; None for any other step."""
        if not isinstance(e.accu_init, CreateList) or e.accu_init.elements:
            return None
        test, step = _accumulating(e, "_+_", 2)
        if step is None or not isinstance(step.args[1], CreateList) or step.args[1].optional_indices:
            return None
        read, element = (self.compile(arg, scope) for arg in step.args)  # @result: 1; [x]: 10 and x

        def append(accumulator: list, items: Any) -> Any:
            if isinstance(items, Error):
                return items
            accumulator.extend(items)
            return accumulator
        return list, _accumulate(None if test is None else self.compile(test, scope), read, [element], append)

    def inserting_step(self, e: Comprehension, scope: frozenset[str]) -> tuple[type, Step] | None:
        """The step of ``transformMap``/``transformMapEntry``, ``cel.@mapInsert(@result, k, v)``
        or ``cel.@mapInsert(@result, {k: v})`` (maybe under ``p ? ... : @result``) over an
        accumulator that starts as ``{}``, inserting in place as cel-go's mutable map does."""
        if not isinstance(e.accu_init, CreateMap) or e.accu_init.entries:
            return None
        test, step = _accumulating(e, "cel.@mapInsert", 3)
        if step is None:
            test, step = _accumulating(e, "cel.@mapInsert", 2)
        if step is None:
            return None
        read, *parts = (self.compile(arg, scope) for arg in step.args)

        def insert(accumulator: dict, *values: Any) -> Any:
            error = next((value for value in values if isinstance(value, Error)), None)
            if error is not None:
                return error
            entries = {values[0]: values[1]} if len(values) == 2 else values[0]
            if type(entries) is not dict or any(type(key) is not str for key in entries):
                raise Unknown("map entries of another kind")
            for key in entries:
                if key in accumulator:
                    return Error(f"insert failed: key {key} already exists")
            accumulator.update(entries)
            return accumulator
        return dict, _accumulate(None if test is None else self.compile(test, scope), read, parts, insert)

    def call(self, e: Call, scope: frozenset[str]) -> Step:
        function = self.function(e)
        member = self.is_member(e)
        nodes = ([e.target] if member else []) + list(e.args)
        if function in ("_&&_", "_||_") and len(nodes) == 2:
            return self.logical(function == "_&&_", *(self.compile(n, scope) for n in nodes))
        if function == "_?_:_" and len(nodes) == 3:
            test, then, otherwise = (self.compile(n, scope) for n in nodes)

            def conditional(f: _Frame) -> Any:
                chosen = test(f)
                if chosen is True:
                    return then(f)
                if chosen is False:
                    return otherwise(f)
                return chosen if isinstance(chosen, Error) else Error("no such overload")
            return conditional
        if function in ("_[_]", "_[?_]") and len(nodes) == 2:
            return self.index(nodes, scope, optional=function == "_[?_]")
        if function in ("or", "orValue") and member and len(nodes) == 2:
            return self.optional_or(function == "or", *(self.compile(n, scope) for n in nodes))
        if function == "@in" and len(nodes) == 2:
            known, values = self.constant(nodes[1])
            if known and type(values) is list and all(_is_primitive(v) for v in values):
                item = self.compile(nodes[0], scope)
                if not values:
                    return lambda f: False

                def in_constant_list(f: _Frame) -> Any:  # a set membership test: no call cost
                    value = item(f)
                    return value if isinstance(value, Error) else contains(value, values)[1]
                return in_constant_list
        steps = [self.compile(n, scope) for n in nodes]
        overload_ids = self.checked.overloads.get(e.id, ())
        apply = self.implementation(function, member, len(nodes), overload_ids)
        lenient = function == "@not_strictly_false"  # true for an error too

        def call(f: _Frame) -> Any:
            args = [step(f) for step in steps]
            error = None if lenient else next((arg for arg in args if isinstance(arg, Error)), None)
            if error is not None:
                overload, result = (overload_ids[0] if len(overload_ids) == 1 else ""), error
            else:
                overload, result = apply(args)
                if len(overload_ids) == 1:
                    overload = overload_ids[0]
            f.charge(call_cost(function, overload, args, result))
            return result
        return call

    def implementation(self, function: str, member: bool, arity: int,
                       overload_ids: tuple[str, ...]) -> Callable[[list], tuple[str, Any]]:
        if function in ("_==_", "_!=_"):
            equal = function == "_==_"
            return lambda args: ("equals" if equal else "not_equals", cel_equals(*args) is equal)
        if function in COMPARE:
            return lambda args: compare(function, *args)
        if function in ("_+_", "_-_", "_*_", "_/_", "_%_"):
            return lambda args: arithmetic(function, *args)
        if function == "-_":
            return lambda args: _negate(args[0])
        if function == "!_":
            return lambda args: ("logical_not", (not args[0]) if type(args[0]) is bool else Error("no such overload"))
        if function == "@not_strictly_false":
            return lambda args: ("not_strictly_false", args[0] is not False)
        if function == "@in":
            return lambda args: contains(*args)
        table = MEMBER_FUNCTIONS if member else GLOBAL_FUNCTIONS
        implementation = table.get((function, arity))
        candidates = library_overloads(function, member, arity, overload_ids)
        if implementation is not None and candidates:  # indexOf of a string or of a list
            def either(args: list) -> tuple[str, Any]:
                try:
                    return implementation(args)
                except Unknown:
                    if select_overload(candidates, args) is None:
                        raise
                    return library_call(candidates, args)
            return either
        if implementation is not None:
            return implementation
        if candidates:
            return lambda args: library_call(candidates, args)
        raise Unknown(function)

    def index(self, nodes: list[Expr], scope: frozenset[str], optional: bool) -> Step:
        container, key = (self.compile(n, scope) for n in nodes)
        relative = 0 if _is_attribute(nodes[0]) else 1

        def index(f: _Frame) -> Any:
            value, at = container(f), key(f)
            f.charge(1 + relative)
            if isinstance(value, Error):
                return value
            if isinstance(at, Error):
                return at
            if optional or type(value) is OptionalValue:  # x[?k], and any index below it
                return counted_optional_entry(value, at)
            return index_value(value, at)
        return index

    @staticmethod
    def optional_or(optional: bool, left: Step, right: Step) -> Step:
        """``a.or(b)``, ``a.orValue(b)``: cel-go evaluates ``b`` only when ``a`` is none, and
        charges nothing for the choice itself (not a call: its own evaluator)."""
        def choose(f: _Frame) -> Any:
            value = left(f)
            if type(value) is not OptionalValue:
                return value if isinstance(value, Error) else Error("no such overload")
            if value.has_value:
                return value if optional else value.value
            return right(f)
        return choose

    @staticmethod
    def logical(conjunction: bool, left: Step, right: Step) -> Step:
        stop = not conjunction  # && stops at false, || at true

        def logical(f: _Frame) -> Any:
            lhs = left(f)
            if lhs is stop:
                return stop
            rhs = right(f)
            if rhs is stop:
                return stop
            if lhs is conjunction and rhs is conjunction:
                return conjunction
            for value in (lhs, rhs):
                if isinstance(value, Error):
                    return value
            return Error("no such overload")
        return logical


_UNSET = object()


def _negate(value: Any) -> tuple[str, Any]:
    kind = type(value)
    if kind is int:
        return "negate_int64", checked_int(-value)
    if kind is float:
        return "negate_double", -value
    return "", Error("no such overload")


def _is_primitive(value: Any) -> bool:
    return type(value) in (bool, int, float, str)


def _is_attribute(e: Expr) -> bool:
    """Whether cel-go plans ``e`` as an attribute (a variable, a selection, an index, a
    conditional), which a selection or an index qualifies in place; any other operand is
    wrapped in a relative attribute first, observed (and charged) once more."""
    if isinstance(e, Ident) or (isinstance(e, Select) and not e.test_only):
        return True
    return isinstance(e, Call) and e.function in ("_[_]", "_?_:_") and e.target is None


def _accumulating(e: Comprehension, function: str, arity: int) -> tuple[Expr | None, Call | None]:
    """(test, step) when the loop step is ``function(@result, ...)``, maybe under
    ``test ? ... : @result``, and nothing else reads the accumulator; else (None, None)."""
    step, test = e.loop_step, None
    if _is_call(step, "_?_:_", 3) and _is_ident(step.args[2], e.accu_var):
        test, step = step.args[0], step.args[1]
    if not _is_call(step, function, arity) or not _is_ident(step.args[0], e.accu_var):
        return None, None
    others = [*step.args[1:], *([test] if test is not None else [])]
    if any(_is_ident(node, e.accu_var) for other in others for node in walk(other)):
        return None, None
    return test, step


def _accumulate(test: Step | None, read: Step, parts: list[Step], apply: Callable[..., Any]) -> Step:
    """One step of an accumulating fold: ``test`` (None: always), then the accumulator and
    the parts evaluated and charged as the call, ``apply(accumulator, *parts)`` in place."""
    def step(f: _Frame) -> Any:
        if test is not None:
            keep = test(f)
            if keep is False:
                return read(f)
            if keep is not True:
                return keep if isinstance(keep, Error) else Error("no such overload")
        accumulator, values = read(f), [part(f) for part in parts]
        f.charge(1)  # add_list, cel.@mapInsert: one call each
        if isinstance(accumulator, Error):
            return accumulator
        return apply(accumulator, *values)
    return step


def _is_call(e: Expr, function: str, arity: int) -> bool:
    return isinstance(e, Call) and e.function == function and e.target is None and len(e.args) == arity


def _is_ident(e: Expr, name: str) -> bool:
    return isinstance(e, Ident) and e.name == name


def _order_free(e: Comprehension) -> bool:
    """A fold whose value is the same in any iteration order: all, exists (a boolean
    accumulator), exists_one (a count)."""
    init, condition = e.accu_init, e.loop_condition
    if isinstance(init, Literal) and init.kind == "bool":
        return True
    # exists_one: a count over every entry
    return (isinstance(init, Literal) and init.kind == "int" and isinstance(condition, Literal)
            and condition.value is True)
