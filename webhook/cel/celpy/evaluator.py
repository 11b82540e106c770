"""celpy's evaluator with cel-go's comprehensions, selection and conditional, and an iteration bound.

celpy 0.5 evaluates ``all``/``exists``/``exists_one``/``map``/``filter`` itself (every element,
no short circuit, strings iterated by character, no bound) and has no two-variable
comprehensions, ``transformList``/``transformMap``/``transformMapEntry``, ``sortBy``,
``optMap``/``optFlatMap`` or three-argument ``map``. ``CelGoEvaluator`` takes every macro over with
cel-go's semantics, counting each iteration against a per-evaluation ``Budget``: 10,000
iterations, the bound cel-cpp applies on the default engine, so both engines stop at the same
point with the same ``EngineBoundExceeded``. Field selection is ``operators.select``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from webhook.cel.celpy.operators import has, select
from webhook.cel.celpy.values import NO_SUCH_OVERLOAD, error, go_value, map_key, to_cel, to_python
from webhook.cel.errors import EngineBoundExceeded
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.limits import ITERATION_BUDGET



class Budget:
    """The comprehension iterations one evaluation may still run."""

    __slots__ = ("left",)

    def __init__(self, iterations: int | None = None) -> None:
        self.left = ITERATION_BUDGET if iterations is None else iterations

    def spend(self) -> None:
        self.left -= 1
        if self.left <= 0:
            raise EngineBoundExceeded()


class CelGoEvaluator(celpy.evaluation.Evaluator):
    """celpy's evaluator with cel-go's macros and field selection, sharing one ``Budget``."""

    def __init__(self, ast: Any, activation: Any, budget: Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def sub_evaluator(self, ast: Any) -> CelGoEvaluator:
        return CelGoEvaluator(ast, self.activation, self.budget)

    def expr(self, tree: Any) -> Any:
        """``c ? a : b``: only the chosen branch runs; an error or non-bool condition is the result."""
        if len(tree.children) != 3:
            return super().expr(tree)
        condition = self.visit(tree.children[0])
        if isinstance(condition, CELEvalError):
            return condition
        if not isinstance(condition, celtypes.BoolType):
            return error(NO_SUCH_OVERLOAD)
        return self.visit(tree.children[1] if condition else tree.children[2])

    def mapinits(self, tree: Any) -> Any:
        """A map literal: an error among its keys and values is the result, as in cel-go
        (celpy would keep it as a value inside the map)."""
        values = self.visit_children(tree)
        for value in values:
            if isinstance(value, CELEvalError):
                return value
        result = celtypes.MapType()
        for key, value in zip(values[0::2], values[1::2]):
            if key in result:
                raise ValueError(f"Duplicate key {key!r}")
            result[key] = value
        return result

    def macro_has_eval(self, exprlist: Any) -> Any:
        """``has(x.f)``: x is evaluated (its errors are the result), then asked for f."""
        select_tree = next(exprlist.iter_subtrees_topdown())
        while select_tree.data != "member_dot":  # expr -> ... -> member -> member_dot
            select_tree = select_tree.children[0]
        operand_tree, name_token = select_tree.children
        return has(self.visit(operand_tree), name_token.value)

    def member_dot(self, tree: Any) -> Any:
        member_tree, name_token = tree.children
        return select(self.visit(member_tree), name_token.value)

    def member_dot_arg(self, tree: Any) -> Any:
        member_tree, name_token = tree.children[:2]
        args = list(tree.children[2].children) if len(tree.children) > 2 else []
        macro = _MACROS.get((name_token.value, len(args)))
        if macro is None:  # a method call (celpy's own ``min``/``reduce`` macros included)
            member = self.visit(member_tree)
            values = self.visit(tree.children[2]) if args else None
            return self.method_eval(member, name_token, values)
        target = self.visit(member_tree)
        if isinstance(target, CELEvalError):
            return target
        return macro(self, target, args)

    def bind(self, body: Any) -> Callable[[dict[str, Any]], Any]:
        """``body`` as a function of its bound variables: a value or a ``CELEvalError``.

        Each call layers the variables over this evaluator's activation (celpy's own
        ``evaluate`` would copy the whole activation, functions included, per iteration)."""
        nested, outer = self.sub_evaluator(body), self.activation

        def run(variables: dict[str, Any]) -> Any:
            nested.activation = outer.nested_activation(vars=variables)
            try:
                return nested.visit(body)
            except CELEvalError as err:
                return err

        return run

    def iterate(self, target: Any, names: list[str]) -> Iterable[dict[str, Any]] | None:
        """Each iteration's variables over a list (value, or index and value) or a map (key, or
        key and value), spending the budget as it goes; None for anything else."""
        if isinstance(target, celtypes.ListType):
            pairs: Iterable[tuple[Any, Any]] = ((celtypes.IntType(i), v) for i, v in enumerate(target))
            single = 1
        elif isinstance(target, celtypes.MapType):
            pairs, single = target.items(), 0
        else:
            return None

        def variables() -> Iterable[dict[str, Any]]:
            for pair in pairs:
                self.budget.spend()
                yield {names[0]: pair[single]} if len(names) == 1 else {names[0]: pair[0], names[1]: pair[1]}

        return variables()


def _names(args: list[Any]) -> list[str]:
    return [next(var.find_data("ident")).children[0].value for var in args]


def _all(ev: CelGoEvaluator, target: Any, args: list[Any], *, want: bool = False) -> Any:
    """``all`` (``want`` False: stop at the first false) and ``exists`` (stop at the first true);
    an error counts only when no element decides."""
    items, predicate = ev.iterate(target, _names(args[:-1])), ev.bind(args[-1])
    if items is None:
        return error(NO_SUCH_OVERLOAD)
    first_error = None
    for variables in items:
        result = predicate(variables)
        if isinstance(result, celtypes.BoolType):
            if bool(result) is want:
                return celtypes.BoolType(want)
        elif first_error is None:
            first_error = result if isinstance(result, CELEvalError) else error(NO_SUCH_OVERLOAD)
    return first_error or celtypes.BoolType(not want)


def _exists_one(ev: CelGoEvaluator, target: Any, args: list[Any]) -> Any:
    items, predicate = ev.iterate(target, _names(args[:-1])), ev.bind(args[-1])
    if items is None:
        return error(NO_SUCH_OVERLOAD)
    count = 0
    for variables in items:
        result = predicate(variables)
        if not isinstance(result, celtypes.BoolType):
            return result if isinstance(result, CELEvalError) else error(NO_SUCH_OVERLOAD)
        count += bool(result)
    return celtypes.BoolType(count == 1)


def _selected(ev: CelGoEvaluator, target: Any, names: list[str], condition: Any | None) -> Any:
    """The iterations whose filter (if any) holds, or the first error."""
    items = ev.iterate(target, names)
    if items is None:
        return error(NO_SUCH_OVERLOAD)
    keep = ev.bind(condition) if condition is not None else None
    selected = []
    for variables in items:
        if keep is not None:
            result = keep(variables)
            if not isinstance(result, celtypes.BoolType):
                return result if isinstance(result, CELEvalError) else error(NO_SUCH_OVERLOAD)
            if not result:
                continue
        selected.append(variables)
    return selected


def _map(ev: CelGoEvaluator, target: Any, args: list[Any], *, variables: int = 1) -> Any:
    """``map(x, [filter,] t)`` and ``transformList(i, v, [filter,] t)``."""
    names = _names(args[:variables])
    selected = _selected(ev, target, names, args[variables] if len(args) == variables + 2 else None)
    if isinstance(selected, CELEvalError):
        return selected
    transform, out = ev.bind(args[-1]), []
    for bound in selected:
        value = transform(bound)
        if isinstance(value, CELEvalError):
            return value
        out.append(value)
    return celtypes.ListType(out)


def _filter(ev: CelGoEvaluator, target: Any, args: list[Any]) -> Any:
    name = _names(args[:1])[0]
    selected = _selected(ev, target, [name], args[1])
    return selected if isinstance(selected, CELEvalError) else celtypes.ListType(v[name] for v in selected)


def _transform_map(ev: CelGoEvaluator, target: Any, args: list[Any], *, entries: bool = False) -> Any:
    """``transformMap(k, v, [filter,] t)``: {k: t}; ``transformMapEntry(k, v, [filter,] e)``:
    the union of the maps ``e``, a key twice being an error."""
    names = _names(args[:2])
    selected = _selected(ev, target, names, args[2] if len(args) == 4 else None)
    if isinstance(selected, CELEvalError):
        return selected
    transform, out = ev.bind(args[-1]), celtypes.MapType()
    for bound in selected:
        value = transform(bound)
        if isinstance(value, CELEvalError):
            return value
        if not entries:
            out[bound[names[0]]] = value
            continue
        if not isinstance(value, celtypes.MapType):
            return error(NO_SUCH_OVERLOAD)
        for key, item in value.items():
            if map_key(out, key) is not None:
                return error(f"insert failed: key {go_value(key)} already exists")
            out[key] = item
    return out


def _sort_by(ev: CelGoEvaluator, target: Any, args: list[Any]) -> Any:
    """``l.sortBy(e, key)``: the elements ordered by their keys (stable)."""
    keys = _map(ev, target, args)
    if isinstance(keys, CELEvalError):
        return keys
    if not isinstance(target, celtypes.ListType):
        return error(NO_SUCH_OVERLOAD)
    kinds = {type(key) for key in keys}
    if len(kinds) > 1 or not kinds <= _ORDERED:
        return error(NO_SUCH_OVERLOAD)
    order = sorted(range(len(target)), key=lambda i: keys[i])
    return celtypes.ListType(target[i] for i in order)


_ORDERED = {celtypes.IntType, celtypes.UintType, celtypes.DoubleType, celtypes.StringType, celtypes.BytesType,
            celtypes.BoolType, celtypes.TimestampType, celtypes.DurationType}


def _opt_map(ev: CelGoEvaluator, target: Any, args: list[Any], *, flat: bool = False) -> Any:
    """``o.optMap(v, e)``: optional.of(e) when ``o`` has a value; ``optFlatMap``: e itself."""
    if not isinstance(target, OptionalValue):
        return error(NO_SUCH_OVERLOAD)
    if not target.has_value:
        return NONE
    result = ev.bind(args[1])({_names(args[:1])[0]: to_cel(target.value)})
    if isinstance(result, CELEvalError):
        return result
    if flat:
        return result if isinstance(result, OptionalValue) else error(NO_SUCH_OVERLOAD)
    return OptionalValue.of(to_python(result))


_MACROS: dict[tuple[str, int], Callable[..., Any]] = {
    ("all", 2): _all, ("all", 3): _all,
    ("exists", 2): lambda ev, t, a: _all(ev, t, a, want=True), ("exists", 3): lambda ev, t, a: _all(ev, t, a, want=True),
    ("exists_one", 2): _exists_one, ("exists_one", 3): _exists_one, ("existsOne", 3): _exists_one,
    ("map", 2): _map, ("map", 3): _map,
    ("filter", 2): _filter,
    ("transformList", 3): lambda ev, t, a: _map(ev, t, a, variables=2),
    ("transformList", 4): lambda ev, t, a: _map(ev, t, a, variables=2),
    ("transformMap", 3): _transform_map, ("transformMap", 4): _transform_map,
    ("transformMapEntry", 3): lambda ev, t, a: _transform_map(ev, t, a, entries=True),
    ("transformMapEntry", 4): lambda ev, t, a: _transform_map(ev, t, a, entries=True),
    ("sortBy", 2): _sort_by,
    ("optMap", 2): _opt_map,
    ("optFlatMap", 2): lambda ev, t, a: _opt_map(ev, t, a, flat=True),
}
