"""The fallback backend: cel-python (``celpy``), a pure-Python CEL interpreter."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes

from webhook.cel.errors import CelCompileError, CelEvalError


def to_cel(value: Any) -> Any:
    """A plain Python value as a celpy value."""
    if value is None:
        return None
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
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({to_cel(k): to_cel(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([to_cel(item) for item in value])
    return value


def to_python(value: Any) -> Any:
    """A celpy result as a plain Python value."""
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
    return value


class CelPythonProgram:
    __slots__ = ("expression", "_runner")

    def __init__(self, expression: str, runner: celpy.Runner) -> None:
        self.expression = expression
        self._runner = runner

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None) -> Any:
        try:
            result = self._runner.evaluate({name: to_cel(value) for name, value in activation.items()})
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
    try:
        ast = _ENV.compile(expression)
    except celpy.CELParseError as err:
        raise CelCompileError(f"ERROR: <input>: Syntax error: {err}") from None
    return CelPythonProgram(expression, _ENV.program(ast))


ENGINE_CLASS = CelPythonEngine
