"""The fallback backend: cel-python (``celpy``), a pure-Python CEL interpreter.

Expressions are type-checked exactly as on the default backend (the Kubernetes
declarations of ``webhook.cel.env``), then evaluated by celpy with the same Kubernetes
library implementations (``webhook.cel.library``) and Python versions of the cel-go
extension functions cel-cpp provides natively (``library/ext.py``). celpy 0.5 lacks
optional syntax (``x.?f``), two-variable comprehensions and the lists macros; the vector
replay (``bench/cel_vectors.py``) reports what that costs.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes

from webhook.cel.cel_expr import compile_typed
from webhook.cel.errors import CelCompileError, CelCostExceeded, CelEvalError
from webhook.cel.library import OVERLOADS, LibraryError, OpaqueValue
from webhook.cel.library.base import OptionalValue
from webhook.cel.library.ext import FUNCTIONS as EXT_FUNCTIONS
from webhook.cel.optimize import select_overload
from webhook.cel.runtime_bound import PER_CALL_LIMIT

from cel_expr_python import cel


class Namespace:
    """``format``, ``sets``, ... as values: celpy reads ``format.named(x)`` as a member call."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_NAMESPACES = {"format", "ip", "strings", "lists", "sets", "optional"}


def to_cel(value: Any) -> Any:
    """A plain Python value as a celpy value (library values pass through)."""
    if value is None or isinstance(value, (OpaqueValue, OptionalValue, Namespace)):
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
    return value


def _library_function(name: str) -> Any:
    """A celpy function for CEL name ``name``: Kubernetes overloads, cel-go extensions and,
    for a ``Namespace`` receiver, the namespaced function (``format.named``)."""
    overloads = tuple(o for o in OVERLOADS if o.function == name)

    def call(*args: Any) -> Any:
        if args and isinstance(args[0], Namespace):
            return _library_function(f"{args[0].name}.{name}")(*args[1:])
        values = [to_python(a) for a in args]
        try:
            overload = select_overload(overloads, values) if overloads else None
            if overload is not None:
                return to_cel(overload.impl(*values))
            if name in EXT_FUNCTIONS:
                return to_cel(EXT_FUNCTIONS[name](*values))
        except LibraryError as err:
            return celpy.CELEvalError(str(err))
        except (TypeError, ValueError, IndexError, KeyError) as err:
            return celpy.CELEvalError(f"no such overload: {err}")
        return celpy.CELEvalError("no such overload")

    return call


@lru_cache(maxsize=None)
def _functions() -> dict[str, Any]:
    names = {o.function for o in OVERLOADS} | set(EXT_FUNCTIONS)
    short = {n.rsplit(".", 1)[-1] for n in names if n.split(".", 1)[0] in _NAMESPACES}
    return {name: _library_function(name) for name in names | short}


class CelPythonProgram:
    __slots__ = ("expression", "_runner", "_checked")

    def __init__(self, expression: str, runner: celpy.Runner, checked: Any) -> None:
        self.expression = expression
        self._runner = runner
        self._checked = checked  # the cel-expr program: its runtime bound

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None) -> Any:
        if self._checked.cost.bound(activation) > (cost_limit or PER_CALL_LIMIT):
            raise CelCostExceeded()
        try:
            data = {name: Namespace(name) for name in _NAMESPACES}
            data.update({name: to_cel(value) for name, value in activation.items()})  # ints past 64 bits: overflow
            result = self._runner.evaluate(data)
        except celpy.CELEvalError as err:
            raise CelEvalError(_eval_message(err)) from None
        except (RecursionError, TypeError, ValueError, ArithmeticError, KeyError, IndexError) as err:
            raise CelEvalError(str(err)) from None
        if isinstance(result, celpy.CELEvalError):
            raise CelEvalError(_eval_message(result))
        return to_python(result)


def _eval_message(err: Exception) -> str:
    return str(err.args[0]) if err.args else str(err)


class CelPythonEngine:
    name = "cel-python"

    def compile(self, expression: str, variables: Iterable[str]) -> CelPythonProgram:
        return _compile(expression, tuple(sorted(set(variables))))


_ENV = celpy.Environment()


@lru_cache(maxsize=4096)
def _compile(expression: str, variables: tuple[str, ...]) -> CelPythonProgram:
    checked = compile_typed(expression, {name: cel.Type.DYN for name in variables})  # Kubernetes' checks
    try:
        ast = _ENV.compile(expression)
    except celpy.CELParseError as err:
        raise CelCompileError(f"ERROR: <input>: Syntax error: {err}") from None
    return CelPythonProgram(expression, _ENV.program(ast, functions=_functions()), checked)


ENGINE_CLASS = CelPythonEngine
