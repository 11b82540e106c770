"""Checked CEL programs run as generated Python: the fast path for the common subset.

cel-expr converts every value an evaluation reads into C++ values (node by node, on every
call: a review's object and request again each time) before its C++ interpreter runs; for
the rules a review meets most — field selection, ``has``, comparisons, string tests, the
list macros — that conversion costs more than the rules. This module compiles the checked
AST (after ``optimize``, the same one cel-expr plans) into one Python function that reads
the plain JSON values in place.

It is a fast path, never the authority. Its callers take a value only when they can use it
as it is — every rule ``true``, a matchCondition decided, a mutation's patch — and otherwise
ask cel-expr, which writes the exact errors and messages of a failing rule. Where this
evaluator is not certain of cel-go's answer it raises :class:`NotNative` instead of guessing,
and its caller falls back too:

* at compile time, for any function, overload or literal outside the subset below
  (``compile_native`` returns None: the program always runs on cel-expr);
* at evaluation, for any CEL error (a missing key, an overflow, an index out of range,
  no matching overload), for any value that is not plain JSON (timestamps, durations,
  quantities, uint, bytes), and past cel-cpp's 10,000 comprehension iterations.

So ``NotNative`` means "ask cel-expr", never "false".

It bounds its own work, so a caller need not measure the activation before it runs
(``cost.bound``): each comprehension counts its iterations times the nodes its condition
and step hold (a comprehension inside counting itself), and past the cost limit the program
stops with :class:`EngineBoundExceeded` (its own count, not cel-go's). That count never exceeds the bound ``cost.bound``
computes from the activation's sizes for the same program, so whatever it refuses, the
bound would have refused too. The logical operators short-circuit
as CEL's do (``true || x`` is true whatever ``x`` is); an error on their left gives up rather
than trying the right side (cel-go's ``error || true`` is true: cel-expr says so).

The subset: constants (not uint/bytes), variables, field selection and ``has``, list and map
literals (optional entries too), comprehensions (every macro, two-variable ones included),
``! && || ?:``, ``== != < <= > >= in``, ``+ - * / %`` and unary ``-`` on int/double (and
``+`` on strings and lists), indexing, ``size``, ``dyn``, ``string``/``int`` conversions of
strings and ints, ``startsWith``/``endsWith``/``contains``, ``matches`` (RE2, as cel-cpp),
``join``/``split``/``lowerAscii``/``upperAscii`` (strings extension), ``sort`` (lists
extension), and the optional library's ``.?``, ``[?]``, ``optional.of/none``, ``orValue``,
``hasValue``, ``value``, ``or``.
"""

from __future__ import annotations

import datetime
import re
import symtable
from collections.abc import Callable, Mapping
from typing import Any

from webhook.cel.environment.env import FAIL_FUNCTION
from webhook.cel.errors import CelCostExceeded, EngineBoundExceeded
from webhook.cel.library import LibraryError
from webhook.cel.library.regex import matches as _re2_matches
from webhook.cel.environment.protos import children
from webhook.cel.limits import ITERATION_BUDGET, PER_CALL_LIMIT

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class NotNative(Exception):
    """This evaluator cannot answer for certain: cel-expr must (a CEL error, a value or case
    outside the subset)."""


class _Optional:
    """CEL's ``optional_type`` value (``present`` False: ``optional.none()``)."""

    __slots__ = ("value", "present")

    def __init__(self, present: bool, value: Any = None) -> None:
        self.present, self.value = present, value


_NONE = _Optional(False)
_JSON = frozenset((dict, list, str, int, float, bool, type(None)))


# --- values -----------------------------------------------------------------------------------


def _equal(x: Any, y: Any) -> bool:
    """cel-go's heterogeneous equality over JSON values (numbers compare by value across int
    and double; other kinds never equal each other)."""
    tx, ty = type(x), type(y)
    if tx is ty:
        if tx is str or tx is int or tx is bool or tx is float:
            return x == y
        if x is None:
            return True
        if tx is list:
            return len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y))
        if tx is dict:
            if len(x) != len(y):
                return False
            for key, value in x.items():
                if type(key) is not str:
                    raise NotNative
                if key not in y:
                    return False
                if not _equal(value, y[key]):
                    return False
            return True
        raise NotNative
    if tx not in _JSON or ty not in _JSON:
        raise NotNative
    if (tx is int and ty is float) or (tx is float and ty is int):
        return x == y  # exact, as cel-go compares int and double
    return False


def _ordered(x: Any, y: Any) -> None:
    """Raise unless ``x`` and ``y`` compare in CEL (same kind, or int and double)."""
    tx, ty = type(x), type(y)
    if tx is ty and (tx is str or tx is int or tx is bool):
        return
    if (tx is int or tx is float) and (ty is int or ty is float) and x == x and y == y:
        return
    raise NotNative


def _int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise NotNative  # cel-go: "integer overflow"


def _add(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x + y)
        if tx is float or tx is str or tx is list:
            return x + y
    raise NotNative


def _subtract(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x - y)
        if tx is float:
            return x - y
    raise NotNative


def _multiply(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y):
        if tx is int:
            return _int(x * y)
        if tx is float:
            return x * y
    raise NotNative


def _divide(x: Any, y: Any) -> Any:
    tx = type(x)
    if tx is type(y) and y != 0:
        if tx is int:
            quotient = abs(x) // abs(y)  # Go truncates toward zero
            return _int(quotient if (x < 0) == (y < 0) else -quotient)
        if tx is float:
            return x / y
    raise NotNative


def _modulo(x: Any, y: Any) -> Any:
    if type(x) is int and type(y) is int and y != 0:
        remainder = abs(x) % abs(y)  # Go: the sign of the dividend
        return remainder if x >= 0 else -remainder
    raise NotNative


def _negate(x: Any) -> Any:
    tx = type(x)
    if tx is int:
        return _int(-x)
    if tx is float:
        return -x
    raise NotNative


def _in(item: Any, container: Any) -> bool:
    tc = type(container)
    if tc is list:
        if type(item) is str:  # a string equals only a string: Python's own test is CEL's
            return item in container
        return any(_equal(item, element) for element in container)
    if tc is dict and type(item) is str:
        return item in container
    raise NotNative


def _index(container: Any, key: Any) -> Any:
    tc = type(container)
    if tc is list and type(key) is int and 0 <= key < len(container):
        return container[key]
    if tc is dict and type(key) is str and key in container:
        return container[key]
    raise NotNative


def _strings(*values: Any) -> None:
    for value in values:
        if type(value) is not str:
            raise NotNative


_DECIMAL = re.compile(r"[+-]?[0-9]+")  # Go's strconv.ParseInt(s, 10, 64): no spaces, no "_"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _to_string(x: Any) -> str:
    tx = type(x)
    if tx is str:
        return x
    if tx is int:
        return str(x)
    if tx is bool:
        return "true" if x else "false"
    raise NotNative  # doubles: Go's formatting; bytes: UTF-8 checks


def _to_int(x: Any) -> int:
    tx = type(x)
    if tx is int:
        return x
    if tx is str and _DECIMAL.fullmatch(x):
        return _int(int(x))
    raise NotNative


# what Go's unicode.IsSpace or Python's str.isspace may count as space (cel-cpp's trim() decides)
_MAYBE_SPACE = frozenset("\x85\xa0\u180e\u200b\ufeff")


def _trim(text: Any) -> str:
    """``trim()`` of a string with no space at either end (itself); anything else gives up."""
    if type(text) is not str:
        raise NotNative
    if text and (text[0].isspace() or text[-1].isspace() or text[0] in _MAYBE_SPACE or text[-1] in _MAYBE_SPACE):
        raise NotNative
    return text


def _fail(message: Any) -> Any:
    raise NotNative  # ``optimize``'s guards: cel-expr writes the message


def _matches(text: Any, pattern: Any) -> bool:
    _strings(text, pattern)
    try:
        return _re2_matches(text, pattern)
    except LibraryError:
        raise NotNative from None


def _join(items: Any, separator: str = "") -> str:
    if type(items) is not list:
        raise NotNative
    _strings(separator, *items)
    return separator.join(items)


def _split(text: Any, separator: Any, limit: Any = -1) -> list[str]:
    _strings(text, separator)
    if type(limit) is not int or separator == "":
        raise NotNative
    if limit == 0:
        return []
    return text.split(separator, limit - 1 if limit > 0 else -1)


def _sort(items: Any) -> list:
    if type(items) is not list:
        raise NotNative
    kinds = {type(item) for item in items}
    if len(kinds) > 1 or not kinds <= {str, int, float}:
        raise NotNative
    if float in kinds and any(item != item for item in items):
        raise NotNative  # NaN has no place in an order
    return sorted(items)


def _starts_with(text: Any, prefix: Any) -> bool:
    _strings(text, prefix)
    return text.startswith(prefix)


def _ends_with(text: Any, suffix: Any) -> bool:
    _strings(text, suffix)
    return text.endswith(suffix)


def _string_contains(text: Any, part: Any) -> bool:
    _strings(text, part)
    return part in text


def _lower_ascii(text: Any) -> str:
    _strings(text)
    return text.translate(_ASCII_LOWER)


def _upper_ascii(text: Any) -> str:
    _strings(text)
    return text.translate(_ASCII_UPPER)


def _optional(x: Any) -> _Optional:
    if type(x) is not _Optional:
        raise NotNative
    return x


def _or_value(opt: Any, default: Any) -> Any:
    opt = _optional(opt)
    return opt.value if opt.present else default


def _has_value(opt: Any) -> bool:
    return _optional(opt).present


def _value(opt: Any) -> Any:
    opt = _optional(opt)
    if not opt.present:
        raise NotNative  # "optional.none() dereference"
    return opt.value


def _or(opt: Any, other: Any) -> _Optional:
    opt = _optional(opt)
    return opt if opt.present else _optional(other)


def _optional_of(x: Any) -> _Optional:
    return _Optional(True, x)


def _optional_select(operand: Any, field: str) -> _Optional:
    if type(operand) is _Optional:
        if not operand.present:
            return _NONE
        operand = operand.value
    if type(operand) is not dict:
        raise NotNative
    return _Optional(True, operand[field]) if field in operand else _NONE


def _optional_index(container: Any, key: Any) -> _Optional:
    if type(container) is _Optional:
        if not container.present:
            return _NONE
        container = container.value
    tc = type(container)
    if tc is dict and type(key) is str:
        return _Optional(True, container[key]) if key in container else _NONE
    if tc is list and type(key) is int:
        return _Optional(True, container[key]) if 0 <= key < len(container) else _NONE
    raise NotNative


# Functions called as they are: (name, arity counting a member call's target) -> implementation;
# every argument is evaluated first (CEL calls are strict). Operators, size() and dyn() are
# written inline by the code generator (``_Codegen.call``).
_FUNCTIONS: dict[tuple[str, int], Callable[..., Any]] = {
    ("_+_", 2): _add,
    ("_-_", 2): _subtract,
    ("_*_", 2): _multiply,
    ("_/_", 2): _divide,
    ("_%_", 2): _modulo,
    ("-_", 1): _negate,
    ("@in", 2): _in,
    ("_[_]", 2): _index,
    ("string", 1): _to_string,
    ("int", 1): _to_int,
    ("startsWith", 2): _starts_with,
    ("endsWith", 2): _ends_with,
    ("contains", 2): _string_contains,
    ("matches", 2): _matches,
    ("join", 1): _join,
    ("join", 2): _join,
    ("split", 2): _split,
    ("split", 3): _split,
    ("lowerAscii", 1): _lower_ascii,
    ("trim", 1): _trim,
    (FAIL_FUNCTION, 1): _fail,
    ("upperAscii", 1): _upper_ascii,
    ("sort", 1): _sort,
    ("orValue", 2): _or_value,
    ("hasValue", 1): _has_value,
    ("value", 1): _value,
    ("or", 2): _or,
    ("optional.of", 1): _optional_of,
    ("optional.none", 0): lambda: _NONE,
    ("_[?_]", 2): _optional_index,
}


def _less(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x < y


def _less_equal(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x <= y


def _greater(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x > y


def _greater_equal(x: Any, y: Any) -> bool:
    _ordered(x, y)
    return x >= y



# --- compilation ------------------------------------------------------------------------------
#
# A program becomes the source of one Python function: operators inline where their operand
# types can be checked in place (``x == 'a'``, ``s.startsWith('p')``, ``has(x.f)``, the logical
# operators through assignment expressions), the helpers above otherwise, and each
# comprehension a function beside it, called with the variables it reads. Any Python exception raised inside it (a ``KeyError`` for a
# missing field, a ``TypeError`` for a selection on a list) means "ask cel-expr", like
# ``NotNative``: so a selection ``x['f']`` either finds the field of a map or gives up.


class _Unsupported(Exception):
    """The program leaves the subset: it always runs on cel-expr."""


def _bail() -> Any:
    raise NotNative


def _exceeded() -> Any:
    raise EngineBoundExceeded()


def _tick(counts: list[int], weight: int, limit: int) -> None:
    """One iteration of weight ``weight`` counted (a one-item comprehension written inline)."""
    counts[0] += 1
    counts[1] += weight
    if counts[1] > limit:
        raise EngineBoundExceeded()


def _optional_list(values: list, optional: frozenset[int]) -> list:
    out = []
    for i, value in enumerate(values):
        if i in optional:
            value = _optional(value)
            if not value.present:
                continue
            value = value.value
        out.append(value)
    return out


def _map_literal(entries: tuple[tuple[Any, Any, bool], ...]) -> dict:
    out: dict[str, Any] = {}
    for key, value, optional in entries:
        if type(key) is not str or key in out:
            raise NotNative  # other key kinds collide in a dict; a repeated key is an error
        if optional:
            value = _optional(value)
            if not value.present:
                continue
            value = value.value
        out[key] = value
    return out


def _select_optional(value: Any, field: str) -> Any:
    """``x.f`` where ``x`` may be an optional (``a.?b.c``): the plain case is inline."""
    if type(value) is _Optional:
        if not value.present:
            return _NONE
        inner = value.value
        if type(inner) is not dict or field not in inner:
            raise NotNative
        return _Optional(True, inner[field])
    if type(value) is not dict:
        raise NotNative
    return value[field]


def _path_or(value: Any, fields: tuple[str, ...], default: Any) -> Any:
    """``value.?f1.?f2....orValue(default)``: the value down the path, or the default where a
    field is absent; selecting from a non-map is an error (cel-expr reports it)."""
    for field in fields:
        if type(value) is not dict:
            raise NotNative
        if field not in value:
            return default
        value = value[field]
    return value


_MISSING = object()


def _path_has(value: Any, fields: tuple[str, ...]) -> bool:
    """``value.?f1.?f2....hasValue()``."""
    return _path_or(value, fields, _MISSING) is not _MISSING


# ``type(x) == T`` (how ``optimize`` guards dyn values): the CEL type names of the values
# cel-expr takes from Python, and the types the guards spell without a type identifier
_CEL_TYPES = {str: "string", bool: "bool", float: "double", list: "list", dict: "map", type(None): "null_type",
              bytes: "bytes", datetime.timedelta: "google.protobuf.Duration",
              datetime.datetime: "google.protobuf.Timestamp"}
_TYPE_IDENTS = frozenset(("string", "bool", "double", "list", "map", "null_type", "bytes", "int", "uint"))
_TYPE_OF_VALUE = {"duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}


def _cel_type(value: Any) -> str:
    kind = type(value)
    if kind is int:
        if INT64_MIN <= value <= INT64_MAX:
            return "int"
        raise NotNative  # cel-expr decides what a larger Python int is
    name = _CEL_TYPES.get(kind)
    if name is None:
        raise NotNative  # optionals, library values
    return name


# the names the generated source calls (``_FUNCTIONS``' implementations get names of their own)
_HELPERS: dict[str, Any] = {
    "_bail": _bail, "_exceeded": _exceeded, "_equal": _equal, "_optional_list": _optional_list, "_map_literal": _map_literal,
    "_optional_select": _optional_select, "_select_optional": _select_optional, "_path_or": _path_or,
    "_path_has": _path_has, "_cel_type": _cel_type, "_tick": _tick,
    "_less": _less, "_less_equal": _less_equal, "_greater": _greater, "_greater_equal": _greater_equal,
}
_COMPARE = {"_<_": ("<", "_less"), "_<=_": ("<=", "_less_equal"), "_>_": (">", "_greater"), "_>=_": (">=", "_greater_equal")}
_STRING_TESTS = {"startsWith": "{t}.startswith({c})", "endsWith": "{t}.endswith({c})", "contains": "{c} in {t}"}


_ENCLOSING = frozenset({"a", "_n", "_limit"})  # the program's own variables
_GENERATED = re.compile(r"(v|_t)[0-9]+")  # the variables ``fresh`` names (CEL's, walrus temporaries)


class _Codegen:
    def __init__(self) -> None:
        self.names: dict[str, Any] = dict(_HELPERS)
        self.count = 0
        self.scopes: list[dict[str, str]] = []
        self.defined: list[str] = []  # the loops' functions, beside the program (``define``)

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        if value is None or type(value) in (bool, str) or (type(value) is int and -(2**62) < value < 2**62):
            return repr(value)
        name = self.fresh("_k")  # doubles (inf, nan, exact digits), helpers' arguments
        self.names[name] = value
        return name

    def local(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, node: Any) -> str:
        kind = node.WhichOneof("expr_kind")
        if kind == "const_expr":
            return self.constant(_constant_value(node.const_expr))
        if kind == "ident_expr":
            name = node.ident_expr.name
            return self.local(name) or f"a[{name!r}]"
        if kind == "select_expr":
            return self.select(node.select_expr)
        if kind == "call_expr":
            return self.call(node.call_expr)
        if kind == "list_expr":
            elements = ", ".join(self.expr(e) for e in node.list_expr.elements)
            if not node.list_expr.optional_indices:
                return f"[{elements}]"
            return f"_optional_list([{elements}], {self.constant(frozenset(node.list_expr.optional_indices))})"
        if kind == "struct_expr":
            return self.map_literal(node.struct_expr)
        if kind == "comprehension_expr":
            return self.comprehension(node.comprehension_expr)
        raise _Unsupported(kind)

    def select(self, select: Any) -> str:
        operand = self.expr(select.operand)
        field = repr(select.field)
        if select.test_only:  # has(x.f)
            t = self.fresh("_t")
            return f"(({field} in {t}) if type({t} := {operand}) is dict else _bail())"
        if _may_be_optional(select.operand):
            return f"_select_optional({operand}, {field})"
        return f"{operand}[{field}]"  # a map's field, or an exception: a missing key, a non-map

    def map_literal(self, literal: Any) -> str:
        if literal.message_name:
            raise _Unsupported(literal.message_name)
        entries = []
        for entry in literal.entries:
            if not entry.HasField("map_key"):
                raise _Unsupported("field entry")
            entries.append(f"({self.expr(entry.map_key)}, {self.expr(entry.value)}, {entry.optional_entry!r})")
        return f"_map_literal(({', '.join(entries)},))" if entries else "{}"

    def branch(self, node: Any) -> str:
        """A conditional's branch; one the subset cannot express asks cel-expr when it is
        taken (``_bail``), so that the rest of the program stays native (a policy's failed
        rule and its message, see ``policy.batch.judged_source``)."""
        defined, scopes = len(self.defined), len(self.scopes)
        try:
            return self.expr(node)
        except _Unsupported:  # what it began of functions and scopes goes with it
            del self.defined[defined:]
            del self.scopes[scopes:]
            return "_bail()"

    def call(self, call: Any) -> str:
        function = call.function
        nodes = ([call.target] if call.HasField("target") else []) + list(call.args)
        arity = len(nodes)
        # Operands whose code can only give a bool (or give up) need no check of their value:
        # Python's own and, or, not and conditional are then CEL's (``_boolean``).
        if function == "_&&_" and arity == 2:
            left, right = map(self.expr, nodes)
            if _boolean(nodes[0]) and _boolean(nodes[1]):
                return f"({left} and {right})"
            l, r = self.fresh("_t"), self.fresh("_t")
            return (f"(False if ({l} := {left}) is False else (False if ({r} := {right}) is False else "
                    f"(True if {l} is True and {r} is True else _bail())))")
        if function == "_||_" and arity == 2:
            left, right = map(self.expr, nodes)
            if _boolean(nodes[0]) and _boolean(nodes[1]):
                return f"({left} or {right})"
            l, r = self.fresh("_t"), self.fresh("_t")
            return (f"(True if ({l} := {left}) is True else (True if ({r} := {right}) is True else "
                    f"(False if {l} is False and {r} is False else _bail())))")
        if function == "!_" and arity == 1:
            if _boolean(nodes[0]):
                return f"(not {self.expr(nodes[0])})"
            t = self.fresh("_t")
            return f"(False if ({t} := {self.expr(nodes[0])}) is True else (True if {t} is False else _bail()))"
        if function == "_?_:_" and arity == 3:
            test, then, otherwise = self.expr(nodes[0]), self.branch(nodes[1]), self.branch(nodes[2])
            if _boolean(nodes[0]):
                return f"({then} if {test} else {otherwise})"
            t = self.fresh("_t")
            return f"({then} if ({t} := {test}) is True else ({otherwise} if {t} is False else _bail()))"
        if function in ("@not_strictly_false", "__not_strictly_false__") and arity == 1:
            t = self.fresh("_t")
            return f"({t} if ({t} := {self.expr(nodes[0])}) is True or {t} is False else _bail())"
        if function in ("_==_", "_!=_") and arity == 2:
            equal = self.type_test(*nodes) or self.equality(*nodes)
            return equal if function == "_==_" else f"(not {equal})"
        if function in _COMPARE and arity == 2:
            return self.compare(function, *nodes)
        if function in _STRING_TESTS and arity == 2 and _string_constant(nodes[1]) is not None:
            t = self.fresh("_t")
            test = _STRING_TESTS[function].format(t=t, c=repr(_string_constant(nodes[1])))
            return f"({test} if type({t} := {self.expr(nodes[0])}) is str else _bail())"
        if function in ("orValue", "hasValue") and nodes:
            chain = _optional_chain(nodes[0])  # x.?a.?b.orValue(d): one walk down the fields
            if chain is not None and arity == (1 if function == "hasValue" else 2):
                base, fields = chain
                if function == "hasValue":
                    return f"_path_has({self.expr(base)}, {fields!r})"
                return f"_path_or({self.expr(base)}, {fields!r}, {self.expr(nodes[1])})"
        if function == "_?._" and arity == 2 and _string_constant(nodes[1]) is not None:
            return f"_optional_select({self.expr(nodes[0])}, {_string_constant(nodes[1])!r})"
        if function == "dyn" and arity == 1:
            return self.expr(nodes[0])
        if function == "size" and arity == 1:
            t = self.fresh("_t")
            return f"(len({t}) if type({t} := {self.expr(nodes[0])}) is str or type({t}) is list or type({t}) is dict else _bail())"
        if function == "matches" and arity == 2:
            if _string_constant(nodes[1]) is None:
                raise _Unsupported("matches with a computed pattern")  # any size: cel-expr's job
        if function == "_[_]" and arity == 2 and _string_constant(nodes[1]) is not None and not _may_be_optional(nodes[0]):
            return f"{self.expr(nodes[0])}[{_string_constant(nodes[1])!r}]"
        if function == "_[_]" and arity == 2 and _is_int_constant(nodes[1], 0) \
                and nodes[0].WhichOneof("expr_kind") == "comprehension_expr":
            bound = self.binding(nodes[0].comprehension_expr, first=True)  # [x].map(v, e)[0]: e with v = x
            if bound is not None:
                return bound
        implementation = _FUNCTIONS.get((function, arity))
        if implementation is None:
            raise _Unsupported(function)
        name = self.constant(implementation)
        return f"{name}({', '.join(self.expr(n) for n in nodes)})"

    def type_test(self, left_node: Any, right_node: Any) -> str | None:
        """``type(x) == string``, ``type(x) == type(duration('0s'))``, ``type(x) == type(y)``
        (how ``optimize`` guards dyn values) as a comparison of CEL type names."""
        if not _is_call(left_node, "type", 1):
            return None
        kind = right_node.WhichOneof("expr_kind")
        if kind == "ident_expr" and right_node.ident_expr.name in _TYPE_IDENTS and self.local(right_node.ident_expr.name) is None:
            name = repr(right_node.ident_expr.name)
        elif _is_call(right_node, "type", 1):
            inner = right_node.call_expr.args[0]
            if _is_constant(inner) and _constant_value(inner.const_expr) is None:
                name = "'null_type'"
            elif inner.WhichOneof("expr_kind") == "call_expr" and inner.call_expr.function in _TYPE_OF_VALUE \
                    and all(_is_constant(arg) for arg in inner.call_expr.args):
                name = repr(_TYPE_OF_VALUE[inner.call_expr.function])
            else:
                name = f"_cel_type({self.expr(inner)})"
        else:
            return None
        return f"(_cel_type({self.expr(left_node.call_expr.args[0])}) == {name})"

    def equality(self, left_node: Any, right_node: Any) -> str:
        """``==`` inline against a constant (cel-go's heterogeneous equality: a value of another
        kind is simply not equal), through ``_equal`` otherwise."""
        if _is_constant(left_node) and not _is_constant(right_node):
            left_node, right_node = right_node, left_node
        if not _is_constant(right_node):
            return f"_equal({self.expr(left_node)}, {self.expr(right_node)})"
        value, left = _constant_value(right_node.const_expr), self.expr(left_node)
        if value is None or type(value) is bool:
            return f"({left} is {value!r})"
        if type(value) is str:
            t = self.fresh("_t")
            return f"(type({t} := {left}) is str and {t} == {value!r})"
        t = self.fresh("_t")  # a number equals an int or a double of the same value, never a bool
        return f"((type({t} := {left}) is int or type({t}) is float) and {t} == {self.constant(value)})"

    def compare(self, function: str, left_node: Any, right_node: Any) -> str:
        operator, helper = _COMPARE[function]
        left, right = self.expr(left_node), self.expr(right_node)
        if _is_constant(right_node) and type(_constant_value(right_node.const_expr)) is int:
            t = self.fresh("_t")
            return f"({t} {operator} {right} if type({t} := {left}) is int else {helper}({t}, {right}))"
        return f"{helper}({left}, {right})"

    def binding(self, c: Any, *, first: bool = False) -> str | None:
        """``[x].map(v, e)`` (how the policy batches bind a variable) as one expression in the
        enclosing function: ``v`` assigned, the iteration counted as the loop would, ``[e]``;
        with ``first``, ``e`` itself (``[x].map(v, e)[0]``). None for any other comprehension."""
        elements = _single_map(c)
        if elements is None or (first and len(elements) != 1):
            return None
        value, accu = self.fresh("v"), self.fresh("v")
        iter_range = self.expr(c.iter_range.list_expr.elements[0])
        self.scopes.append({c.iter_var: value, c.accu_var: accu})
        values = [self.expr(e) for e in elements]
        self.scopes[-1] = {c.accu_var: accu}
        result = self.expr(c.result)
        self.scopes.pop()
        tick = f"_tick(_n, {1 + _nodes(c.loop_condition) + _nodes(c.loop_step)}, _limit)"
        if first and result == accu:
            return f"({value} := {iter_range}, {tick}, {values[0]})[2]"
        return f"({value} := {iter_range}, {tick}, {accu} := [{', '.join(values)}], {result})[3]"

    def comprehension(self, c: Any) -> str:
        bound = self.binding(c)
        if bound is not None:
            return bound
        name, items, accu = self.fresh("_c"), self.fresh("_r"), self.fresh("v")
        first = self.fresh("v")
        second = self.fresh("v") if c.iter_var2 else None
        iter_range, init = self.expr(c.iter_range), self.expr(c.accu_init)
        self.scopes.append({c.iter_var: first, c.accu_var: accu} | ({c.iter_var2: second} if second else {}))
        condition = None if _is_true_constant(c.loop_condition) else self.expr(c.loop_condition)
        appended = self.appended(c.loop_step, c.accu_var, c.accu_init, accu)
        step = None if appended is not None else self.expr(c.loop_step)
        self.scopes[-1] = {c.accu_var: accu}
        result = self.expr(c.result)
        self.scopes.pop()
        if c.iter_range.WhichOneof("expr_kind") == "list_expr" and not c.iter_range.list_expr.elements:
            # no iteration: cel.bind (how ``optimize`` binds a guarded value), the value in place
            return f"({accu} := {init}, {result})[1]"
        weight = 1 + _nodes(c.loop_condition) + _nodes(c.loop_step)
        single = (second is None and c.iter_range.WhichOneof("expr_kind") == "list_expr"
                  and len(c.iter_range.list_expr.elements) == 1 and not c.iter_range.list_expr.optional_indices)
        if single:  # [x].map(v, ...): how the policy batches bind a variable; no loop needed
            body = [f"{first} = {iter_range[1:-1]}", "_n[0] += 1", f"_n[1] += {weight}",
                    "if _n[1] > _limit: _exceeded()", f"{accu} = {init}"]
            indent = ""
            if condition is not None:
                g = self.fresh("_g")
                body += [f"{g} = {condition}", f"if {g} is not True and {g} is not False: _bail()", f"if {g}:"]
                indent = "    "
            body += [indent + line for line in (appended if appended is not None else [f"{accu} = {step}"])]
            body.append(f"return {result}")
            return self.define(name, body)
        if second is None:
            loop = f"for {first} in {items}:"
        else:
            loop = f"for {first}, {second} in (enumerate({items}) if type({items}) is list else {items}.items()):"
        # a map's iteration order is the engine's own (cel-go's is random): only a loop whose
        # answer cannot depend on it (all, exists, exists_one) may run over a map here
        kinds = "type({items}) is not list and type({items}) is not dict" if _order_free(c) else "type({items}) is not list"
        body = [
            f"{items} = {iter_range}",
            f"if {kinds.format(items=items)}: _bail()",
            f"_n[0] += len({items})",
            f"if _n[0] > {ITERATION_BUDGET}: _bail()",
            f"_n[1] += len({items}) * {weight}",
            "if _n[1] > _limit: _exceeded()",
            f"{accu} = {init}",
            loop,
        ]
        if condition is not None:
            g = self.fresh("_g")
            body += [f"    {g} = {condition}", f"    if {g} is False: break", f"    if {g} is not True: _bail()"]
        body += ["    " + line for line in appended] if appended is not None else [f"    {accu} = {step}"]
        body.append(f"return {result}")
        return self.define(name, body)

    def define(self, name: str, body: list[str]) -> str:
        """A loop's function ``name`` beside the program, the enclosing functions' variables
        that ``body`` reads as its parameters; its call, in the enclosing code. (Defined
        inside the program, Python would make the function, and a cell for each variable it
        shares, anew on every run; a loop runs right where it stands, so the values passed
        are the ones it would have read.)"""
        lines = ["    " + line for line in body]
        table = symtable.symtable("\n".join([f"def {name}():", *lines]), "<cel native>", "exec").get_children()[0]
        parameters = ", ".join(sorted(n for n in table.get_globals() if n in _ENCLOSING or _GENERATED.fullmatch(n)))
        self.defined += [f"def {name}({parameters}):", *lines]
        return f"{name}({parameters})"

    def appended(self, step: Any, accu_var: str, init: Any, accu: str) -> list[str] | None:
        """For the ``map``/``filter`` steps — ``accu + [e]`` and ``p ? accu + [e] : accu`` over
        an accumulator that starts as ``[]`` — statements appending in place (the accumulator
        is the comprehension's own: nothing else sees the copies skipped)."""
        if init.WhichOneof("expr_kind") != "list_expr" or init.list_expr.elements:
            return None
        test = None
        if _is_call(step, "_?_:_", 3):
            test_node, then, otherwise = step.call_expr.args
            if not _is_ident(otherwise, accu_var) or _reads(test_node, accu_var):
                return None
            test, step = test_node, then
        if not _is_call(step, "_+_", 2):
            return None
        left, right = step.call_expr.args
        if (not _is_ident(left, accu_var) or right.WhichOneof("expr_kind") != "list_expr"
                or right.list_expr.optional_indices or _reads(right, accu_var)):
            return None
        appends = [f"{accu}.append({self.expr(e)})" for e in right.list_expr.elements]
        if test is None:
            return appends
        k = self.fresh("_g")
        return ([f"{k} = {self.expr(test)}", f"if {k} is not True and {k} is not False: _bail()", f"if {k}:"]
                + ["    " + line for line in appends])


# calls whose generated code gives a bool or gives up, whatever their operands
_BOOLEAN_CALLS = frozenset({"_&&_", "_||_", "!_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in",
                            "@not_strictly_false", "__not_strictly_false__"})


def _boolean(node: Any) -> bool:
    """Whether the code generated for ``node`` can only give a bool (or raise): a constant
    bool, ``has()``, a logical operator, a comparison, ``in``, a string test of a constant."""
    kind = node.WhichOneof("expr_kind")
    if kind == "const_expr":
        return type(_constant_value(node.const_expr)) is bool
    if kind == "select_expr":
        return node.select_expr.test_only
    if kind != "call_expr":
        return False
    call = node.call_expr
    arity = len(call.args) + (1 if call.HasField("target") else 0)
    if call.function in _STRING_TESTS:
        return arity == 2 and _string_constant(call.args[-1]) is not None
    return call.function in _BOOLEAN_CALLS and arity == (1 if call.function in ("!_", "@not_strictly_false",
                                                                                  "__not_strictly_false__") else 2)


def _single_map(c: Any) -> list[Any] | None:
    """The elements ``e...`` of ``[x].map(v, [e...])``-shaped comprehensions (one item, no
    condition, the step ``accu + [e...]`` over an accumulator starting as ``[]``); else None."""
    if (c.iter_var2 or c.iter_range.WhichOneof("expr_kind") != "list_expr"
            or len(c.iter_range.list_expr.elements) != 1 or c.iter_range.list_expr.optional_indices
            or not _is_true_constant(c.loop_condition)
            or c.accu_init.WhichOneof("expr_kind") != "list_expr" or c.accu_init.list_expr.elements
            or not _is_call(c.loop_step, "_+_", 2)):
        return None
    left, right = c.loop_step.call_expr.args
    if (not _is_ident(left, c.accu_var) or right.WhichOneof("expr_kind") != "list_expr"
            or right.list_expr.optional_indices or _reads(right, c.accu_var)):
        return None
    return list(right.list_expr.elements)


def _is_int_constant(node: Any, value: int) -> bool:
    return _is_constant(node) and type(_constant_value(node.const_expr)) is int and _constant_value(node.const_expr) == value


def _nodes(node: Any) -> int:
    """The nodes of ``node`` one evaluation visits at most, a comprehension inside counting
    as one (it counts its own iterations)."""
    count, stack = 0, [node]
    while stack:
        current = stack.pop()
        count += 1
        if current.WhichOneof("expr_kind") != "comprehension_expr":
            stack.extend(children(current))
    return count


def _order_free(c: Any) -> bool:
    """Whether a comprehension's value is the same in any iteration order: a boolean
    accumulator (``all``, ``exists``) or a count compared with one (``exists_one``)."""
    if not _is_constant(c.accu_init):
        return False
    init = _constant_value(c.accu_init.const_expr)
    if type(init) is bool:
        return True
    return (init == 0 and type(init) is int and _is_call(c.result, "_==_", 2)
            and _is_ident(c.result.call_expr.args[0], c.accu_var) and _is_constant(c.result.call_expr.args[1]))


def _constant_value(const: Any) -> Any:
    kind = const.WhichOneof("constant_kind")
    if kind == "null_value":
        return None
    if kind in ("bool_value", "int64_value", "double_value", "string_value"):
        return getattr(const, kind)
    raise _Unsupported(kind)  # uint and bytes: kinds plain JSON has not


def _is_constant(node: Any) -> bool:
    return node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") in (
        "null_value", "bool_value", "int64_value", "double_value", "string_value")


def _is_true_constant(node: Any) -> bool:
    return _is_constant(node) and _constant_value(node.const_expr) is True


def _string_constant(node: Any) -> str | None:
    if node.WhichOneof("expr_kind") == "const_expr" and node.const_expr.WhichOneof("constant_kind") == "string_value":
        return node.const_expr.string_value
    return None


def _may_be_optional(node: Any) -> bool:
    """Whether ``node`` can evaluate to an optional (an optional selection or index, below
    plain selections): the selection on it must then go through ``_select_optional``."""
    while node.WhichOneof("expr_kind") == "select_expr" and not node.select_expr.test_only:
        node = node.select_expr.operand
    if node.WhichOneof("expr_kind") != "call_expr":
        return False
    return node.call_expr.function in ("_?._", "_[?_]", "optional.of", "optional.none", "or")


def _optional_chain(node: Any) -> tuple[Any, tuple[str, ...]] | None:
    """``x.?a.?b`` as (x, ("a", "b")) when ``x`` is no optional itself; else None."""
    fields = []
    while _is_call(node, "_?._", 2) and _string_constant(node.call_expr.args[1]) is not None:
        fields.append(_string_constant(node.call_expr.args[1]))
        node = node.call_expr.args[0]
    if not fields or _may_be_optional(node):
        return None
    return node, tuple(reversed(fields))  # (a variable holding an optional: not a map, so NotNative)


def _is_call(node: Any, function: str, arity: int) -> bool:
    return (node.WhichOneof("expr_kind") == "call_expr" and node.call_expr.function == function
            and not node.call_expr.HasField("target") and len(node.call_expr.args) == arity)


def _is_ident(node: Any, name: str) -> bool:
    return node.WhichOneof("expr_kind") == "ident_expr" and node.ident_expr.name == name


def _reads(node: Any, name: str) -> bool:
    """Whether ``node`` reads the variable ``name`` (not a nested comprehension's own)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if _is_ident(current, name):
            return True
        if current.WhichOneof("expr_kind") == "comprehension_expr":
            c = current.comprehension_expr
            stack += [c.iter_range, c.accu_init]
            if name not in (c.iter_var, c.iter_var2, c.accu_var):
                stack += [c.loop_condition, c.loop_step]
            if name != c.accu_var:
                stack.append(c.result)
            continue
        stack.extend(children(current))
    return False


# --- programs ---------------------------------------------------------------------------------


class NativeProgram:
    """A checked CEL expression as one Python function; ``program(activation)`` is its value,
    or raises :class:`NotNative` when cel-expr must answer, or :class:`EngineBoundExceeded` when
    its count passes ``cost_limit``."""

    __slots__ = ("_function", "source")

    def __init__(self, function: Callable[[Mapping[str, Any], int], Any], source: str) -> None:
        self._function = function
        self.source = source  # the generated Python, for reading and debugging

    def __call__(self, activation: Mapping[str, Any], cost_limit: int = PER_CALL_LIMIT) -> Any:
        try:
            value = self._function(activation, cost_limit)
            _plain(value)
        except (NotNative, CelCostExceeded):
            raise
        except Exception:  # a missing key, a selection on a non-map, nesting past the stack: cel-expr answers
            raise NotNative from None
        return value


def _plain(value: Any) -> None:
    """Raise when ``value`` holds an optional (cel-expr's result conversion decides those)."""
    kind = type(value)
    if kind is _Optional:
        raise NotNative
    if kind is list:
        for item in value:
            if type(item) is list or type(item) is dict or type(item) is _Optional:
                _plain(item)
    elif kind is dict:
        for item in value.values():
            if type(item) is list or type(item) is dict or type(item) is _Optional:
                _plain(item)


def compile_native(expr: Any) -> NativeProgram | None:
    """``expr`` (a checked ``cel.expr.Expr``, as cel-expr plans it) as a :class:`NativeProgram`;
    None when it leaves the subset (or Python cannot compile it: nesting too deep)."""
    generator = _Codegen()
    try:
        body = generator.expr(expr)
    except (_Unsupported, RecursionError):
        return None
    # _n: the comprehensions' iterations so far (cel-cpp's bound) and their work (against _limit)
    source = "\n".join([*generator.defined, "def program(a, _limit):", "    _n = [0, 0]", f"    return {body}"])
    namespace = dict(generator.names)
    try:
        exec(compile(source, "<cel native>", "exec"), namespace)  # noqa: S102  (source generated above)
    except (SyntaxError, RecursionError, MemoryError):
        return None
    return NativeProgram(namespace["program"], source)
