"""celpy's evaluator with cel-go's comprehensions, selection and equality, and an iteration bound.

celpy 0.5 evaluates ``all``/``exists``/``exists_one``/``map``/``filter`` itself (every element,
no short circuit, strings iterated by character, no bound) and has no two-variable
comprehensions, ``transformList``/``transformMap``/``transformMapEntry``, ``sortBy``,
``optMap``/``optFlatMap`` or three-argument ``map``. ``Evaluator`` takes every macro over with
cel-go's semantics, counting each iteration against a per-evaluation ``Budget``: 10,000
iterations, the bound cel-cpp applies on the default engine, so both engines stop at the same
point with the same ``CelCostExceeded``.

It also selects fields as cel-go does (``no such key: f``; through an optional, the result is
optional; ``net.IP`` names a type), and supplies the operators whose celpy versions differ from
cel-go: heterogeneous equality (``1 == 1.0``), cross-type numeric ordering, indexing with
cel-go's messages, and the functions behind the optional syntax ``celpy_rewrite`` spells out.
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from webhook.cel.celpy_rewrite import OPT_INDEX, OPT_LIST, OPT_MAP, OPT_SELECT
from webhook.cel.errors import CelCostExceeded
from webhook.cel.library import OPAQUE_TYPES, OpaqueValue
from webhook.cel.library.base import NONE, OptionalValue
from webhook.cel.values import parse_duration, parse_timestamp

# cel-cpp's comprehension budget on the default engine (see runtime_bound.py)
ITERATION_BUDGET = 10_000


class Budget:
    """The comprehension iterations one evaluation may still run."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = ITERATION_BUDGET

    def spend(self) -> None:
        self.left -= 1
        if self.left <= 0:
            raise CelCostExceeded()


class Namespace:
    """``format``, ``sets``, ``net``, ... as values: celpy reads ``format.named(x)`` as a member
    call on the name ``format`` and ``net.IP`` as a field selection."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


NAMESPACES = ("format", "ip", "strings", "lists", "sets", "optional", "net", "kubernetes")
_TYPE_VALUES = {t.cel_type: t for t in OPAQUE_TYPES}  # "net.IP" -> the class type() returns


# --- values between celpy and plain Python ----------------------------------------------------


def to_cel(value: Any) -> Any:
    """A plain Python value as a celpy value (library values pass through)."""
    if value is None or isinstance(value, (OpaqueValue, OptionalValue, Namespace, type)):
        return value
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value) if value < 2**63 else celtypes.UintType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, (bytes, bytearray)):
        return celtypes.BytesType(bytes(value))
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc))
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([to_cel(item) for item in value])
    return value


class TypeName:
    """A CEL type value handed to a library function (``"%s".format([type(x)])``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


_CEL_TYPE_NAMES = {
    celtypes.BoolType: "bool", celtypes.IntType: "int", celtypes.UintType: "uint", celtypes.DoubleType: "double",
    celtypes.StringType: "string", celtypes.BytesType: "bytes", celtypes.ListType: "list", celtypes.MapType: "map",
    celtypes.TimestampType: "google.protobuf.Timestamp", celtypes.DurationType: "google.protobuf.Duration",
    type(None): "null_type", celtypes.TypeType: "type", OptionalValue: "optional_type",
}


def to_python(value: Any) -> Any:
    """A celpy value as a plain Python value."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, celtypes.TimestampType):
        return datetime.datetime.fromtimestamp(value.timestamp(), tz=datetime.timezone.utc)
    if isinstance(value, celtypes.DurationType):
        return datetime.timedelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds)
    if isinstance(value, celtypes.MapType):
        return {to_python(k): to_python(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [to_python(item) for item in value]
    if isinstance(value, OptionalValue) and value.has_value:
        return OptionalValue.of(to_python(value.value))
    if isinstance(value, type):
        return TypeName(_CEL_TYPE_NAMES.get(value) or getattr(value, "cel_type", value.__name__))
    return value


def error(message: str) -> CELEvalError:
    return CELEvalError(message)


NO_SUCH_OVERLOAD = "no such overload"


# --- the evaluator --------------------------------------------------------------------------


class Evaluator(celpy.evaluation.Evaluator):
    """celpy's evaluator with cel-go's macros and field selection, sharing one ``Budget``."""

    def __init__(self, ast: Any, activation: Any, budget: Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def sub_evaluator(self, ast: Any) -> Evaluator:
        return Evaluator(ast, self.activation, self.budget)

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
        """``body`` as a function of its bound variables: a value or a ``CELEvalError``."""
        nested = self.sub_evaluator(body)

        def run(variables: dict[str, Any]) -> Any:
            try:
                return nested.evaluate(variables)
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


def _all(ev: Evaluator, target: Any, args: list[Any], *, want: bool = False) -> Any:
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


def _exists_one(ev: Evaluator, target: Any, args: list[Any]) -> Any:
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


def _selected(ev: Evaluator, target: Any, names: list[str], condition: Any | None) -> Any:
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


def _map(ev: Evaluator, target: Any, args: list[Any], *, variables: int = 1) -> Any:
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


def _filter(ev: Evaluator, target: Any, args: list[Any]) -> Any:
    name = _names(args[:1])[0]
    selected = _selected(ev, target, [name], args[1])
    return selected if isinstance(selected, CELEvalError) else celtypes.ListType(v[name] for v in selected)


def _transform_map(ev: Evaluator, target: Any, args: list[Any], *, entries: bool = False) -> Any:
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
            if key in out:
                return error(f"insert failed: key {_go_value(key)} already exists")
            out[key] = item
    return out


def _sort_by(ev: Evaluator, target: Any, args: list[Any]) -> Any:
    """``l.sortBy(e, key)``: the elements ordered by their keys (stable)."""
    keys = _map(ev, target, args)
    if isinstance(keys, CELEvalError):
        return keys
    if not isinstance(target, celtypes.ListType):
        return error(NO_SUCH_OVERLOAD)
    if len({_ORDERED_KINDS.get(type(key)) for key in keys} - {None}) > 1 or any(type(k) not in _ORDERED_KINDS for k in keys):
        return error(NO_SUCH_OVERLOAD)
    order = sorted(range(len(target)), key=lambda i: keys[i])
    return celtypes.ListType(target[i] for i in order)


_ORDERED_KINDS = {
    celtypes.IntType: "int", celtypes.UintType: "uint", celtypes.DoubleType: "double", celtypes.StringType: "string",
    celtypes.BytesType: "bytes", celtypes.BoolType: "bool", celtypes.TimestampType: "timestamp",
    celtypes.DurationType: "duration",
}


def _opt_map(ev: Evaluator, target: Any, args: list[Any], *, flat: bool = False) -> Any:
    """``o.optMap(v, e)``: optional.of(e) when ``o`` has a value; ``optFlatMap``: e itself."""
    if not isinstance(target, OptionalValue):
        return error(NO_SUCH_OVERLOAD)
    if not target.has_value:
        return NONE
    result = ev.bind(args[1])({_names(args[:1])[0]: to_cel(target.value)})
    if isinstance(result, CELEvalError) or flat:
        return result if not flat or isinstance(result, (OptionalValue, CELEvalError)) else error(NO_SUCH_OVERLOAD)
    return OptionalValue.of(to_python(result))


def _go_value(value: Any) -> str:
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    return str(to_python(value))


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


# --- selection, indexing, the optional syntax ---------------------------------------------


def select(operand: Any, field: str) -> Any:
    """``operand.field`` as cel-go evaluates it."""
    if isinstance(operand, CELEvalError):
        return operand
    if isinstance(operand, Namespace):  # a qualified type name: net.IP, kubernetes.Quantity
        name = f"{operand.name}.{field}"
        return _TYPE_VALUES[name] if name in _TYPE_VALUES else error(f"undeclared reference to '{name}'")
    if isinstance(operand, OptionalValue):  # selection through an optional stays optional
        if not operand.has_value:
            return NONE
        value = select(to_cel(operand.value), field)
        return value if isinstance(value, CELEvalError) else OptionalValue.of(to_python(value))
    if isinstance(operand, celtypes.MapType):
        key = celtypes.StringType(field)
        return operand[key] if key in operand else error(f"no such key: {field}")
    return error(NO_SUCH_OVERLOAD)


def index(operand: Any, key: Any) -> Any:
    """``operand[key]`` with cel-go's messages."""
    for value in (operand, key):
        if isinstance(value, CELEvalError):
            return value
    if isinstance(operand, OptionalValue):
        if not operand.has_value:
            return NONE
        value = index(to_cel(operand.value), key)
        return value if isinstance(value, CELEvalError) else OptionalValue.of(to_python(value))
    if isinstance(operand, celtypes.ListType):
        position = _list_index(key)
        if position is None:
            return error(NO_SUCH_OVERLOAD)
        if not 0 <= position < len(operand):
            return error(f"index out of bounds: {position}")
        return operand[position]
    if isinstance(operand, celtypes.MapType):
        found = _map_key(operand, key)
        return operand[found] if found is not None else error(f"no such key: {_go_value(key)}")
    return error(NO_SUCH_OVERLOAD)


def _list_index(key: Any) -> int | None:
    if isinstance(key, (celtypes.IntType, celtypes.UintType)):
        return int(key)
    if isinstance(key, celtypes.DoubleType) and float(key).is_integer():
        return int(key)
    return None


def _map_key(mapping: Any, key: Any) -> Any:
    """The key of ``mapping`` equal to ``key`` (numbers compare across int, uint and double)."""
    try:
        if key in mapping:
            return key
    except TypeError:  # celpy's numbers refuse to compare across types
        pass
    return next((candidate for candidate in mapping if equal(candidate, key)), None)


def opt_select(operand: Any, field: Any) -> Any:
    """``operand.?field``: optional.of the field's value, or none when it is absent."""
    if isinstance(operand, OptionalValue):
        return opt_select(to_cel(operand.value), field) if operand.has_value else NONE
    if isinstance(operand, celtypes.MapType):
        return OptionalValue.of(to_python(operand[field])) if field in operand else NONE
    return error(NO_SUCH_OVERLOAD)


def opt_index(operand: Any, key: Any) -> Any:
    """``operand[?key]``: optional.of the element, or none when there is none."""
    if isinstance(operand, OptionalValue):
        return opt_index(to_cel(operand.value), key) if operand.has_value else NONE
    if isinstance(operand, celtypes.ListType):
        position = _list_index(key)
        if position is None:
            return error(NO_SUCH_OVERLOAD)
        return OptionalValue.of(to_python(operand[position])) if 0 <= position < len(operand) else NONE
    if isinstance(operand, celtypes.MapType):
        found = _map_key(operand, key)
        return OptionalValue.of(to_python(operand[found])) if found is not None else NONE
    return error(NO_SUCH_OVERLOAD)


def opt_list(elements: Any, optional_positions: Any) -> Any:
    """``[a, ?b]``: the optional elements' values where present, left out where not."""
    out = []
    for position, element in enumerate(elements):
        if position not in optional_positions:
            out.append(element)
        elif not isinstance(element, OptionalValue):
            return error(NO_SUCH_OVERLOAD)
        elif element.has_value:
            out.append(to_cel(element.value))
    return celtypes.ListType(out)


def opt_map(flat_entries: Any, optional_positions: Any) -> Any:
    """``{?k: v}``: the optional entries where their value is present."""
    out = celtypes.MapType()
    for position in range(len(flat_entries) // 2):
        key, value = flat_entries[2 * position], flat_entries[2 * position + 1]
        if position in optional_positions:
            if not isinstance(value, OptionalValue):
                return error(NO_SUCH_OVERLOAD)
            if not value.has_value:
                continue
            value = to_cel(value.value)
        if key in out:
            return error(f"Failed with repeated key: {_go_value(key)}")
        out[key] = value
    return out


# --- equality and ordering as cel-go has them ------------------------------------------------


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, celtypes.BoolType))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not _is_bool(value)


def _number(value: Any) -> int | float:
    """A celpy number as a plain one (celpy's refuse to compare across types)."""
    return float(value) if isinstance(value, float) else int(value)


def equal(a: Any, b: Any) -> bool:
    """cel-go's heterogeneous equality: numbers compare by value across int, uint and double;
    values of different kinds are unequal; lists and maps compare element by element."""
    if _is_bool(a) or _is_bool(b):
        return _is_bool(a) and _is_bool(b) and bool(a) == bool(b)
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and _number(a) == _number(b)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(equal, a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict) and len(a) == len(b)):
            return False
        for key, value in a.items():
            found = _map_key(b, key)
            if found is None or not equal(value, b[found]):
                return False
        return True
    if isinstance(a, OptionalValue) or isinstance(b, OptionalValue):
        return (isinstance(a, OptionalValue) and isinstance(b, OptionalValue) and a.has_value == b.has_value
                and (not a.has_value or equal(a.value, b.value)))
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and str(a) == str(b)
    if isinstance(a, bytes) or isinstance(b, bytes):
        return isinstance(a, bytes) and isinstance(b, bytes) and bytes(a) == bytes(b)
    return type(a) is type(b) and a == b if not isinstance(a, type) else a == b


def _equality(negate: bool) -> Callable[[Any, Any], Any]:
    def compare(a: Any, b: Any) -> Any:
        for value in (a, b):
            if isinstance(value, CELEvalError):
                return value
        return celtypes.BoolType(equal(a, b) is not negate)

    return compare


def _ordering(base: Callable[[Any, Any], Any], python: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """celpy's ordering, plus int/uint/double compared by value (cel-go's cross-type ordering)."""

    def compare(a: Any, b: Any) -> Any:
        if _is_number(a) and _is_number(b) and type(a) is not type(b):
            return celtypes.BoolType(python(_number(a), _number(b)))
        return base(a, b)

    return compare


def _arithmetic(base: Callable[..., Any], symbol: str) -> Callable[..., Any]:
    """celpy's arithmetic with cel-go's rules and messages: no mixing of int, uint and double,
    ``division by zero``/``modulus by zero``, ``integer overflow``."""

    def apply(*args: Any) -> Any:
        for value in args:
            if isinstance(value, CELEvalError):
                return value
        if len(args) == 2 and _is_number(args[0]) and _is_number(args[1]):
            if type(args[0]) is not type(args[1]):
                return error(NO_SUCH_OVERLOAD)
            if symbol in "/%" and not isinstance(args[0], float) and args[1] == 0:
                return error("division by zero" if symbol == "/" else "modulus by zero")
        try:
            result = base(*args)
        except (ValueError, OverflowError):
            unsigned = isinstance(args[0], celtypes.UintType)
            return error("unsigned integer overflow" if unsigned else "integer overflow")
        except TypeError:
            return error(NO_SUCH_OVERLOAD)
        return celtypes.ListType(result) if type(result) is list else result  # list + list

    return apply


def _logic(decisive: bool) -> Callable[[Any, Any], Any]:
    """``||`` (``decisive`` True) and ``&&``: either side's decisive value wins over an error;
    otherwise the first error."""

    def apply(a: Any, b: Any) -> Any:
        if any(isinstance(v, celtypes.BoolType) and bool(v) is decisive for v in (a, b)):
            return celtypes.BoolType(decisive)
        for value in (a, b):
            if isinstance(value, CELEvalError):
                return value
        if isinstance(a, celtypes.BoolType) and isinstance(b, celtypes.BoolType):
            return celtypes.BoolType(not decisive)
        return error(NO_SUCH_OVERLOAD)

    return apply


def _not(value: Any) -> Any:
    if isinstance(value, CELEvalError):
        return value
    return celtypes.BoolType(not value) if isinstance(value, celtypes.BoolType) else error(NO_SUCH_OVERLOAD)


def _in(item: Any, container: Any) -> Any:
    for value in (item, container):
        if isinstance(value, CELEvalError):
            return value
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(any(equal(item, element) for element in container))
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(_map_key(container, item) is not None)
    return error(NO_SUCH_OVERLOAD)


def _conversion(base: Callable[[Any], Any], parse: Callable[[str], Any], message: str) -> Callable[[Any], Any]:
    """celpy's ``duration``/``timestamp`` with Go's parser for strings and cel-expr's message."""

    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return base(value)
        try:
            parsed = parse(str(value))
        except (ValueError, OverflowError):
            parsed = None
        return error(message) if parsed is None else to_cel(parsed)

    return convert


def operators() -> dict[str, Callable[..., Any]]:
    """The celpy functions this module replaces or adds."""
    base = celpy.evaluation.base_functions
    return {
        "_==_": _equality(False),
        "_!=_": _equality(True),
        "_<_": _ordering(base["_<_"], operator.lt),
        "_<=_": _ordering(base["_<=_"], operator.le),
        "_>_": _ordering(base["_>_"], operator.gt),
        "_>=_": _ordering(base["_>=_"], operator.ge),
        "_in_": _in,
        "_||_": _logic(True),
        "_&&_": _logic(False),
        "!_": _not,
        **{f"_{symbol}_": _arithmetic(base[f"_{symbol}_"], symbol) for symbol in "+-*/%"},
        "-_": _arithmetic(base["-_"], "-"),
        "_[_]": index,
        "duration": _conversion(base["duration"], parse_duration, "String to Duration conversion failed"),
        "timestamp": _conversion(base["timestamp"], parse_timestamp, "String to Timestamp conversion failed"),
        OPT_SELECT: opt_select,
        OPT_INDEX: opt_index,
        OPT_LIST: opt_list,
        OPT_MAP: opt_map,
    }
