"""The default backend: cel-expr-python (Google's C++ CEL runtime)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from webhook.cel.env import new_env
from webhook.cel.errors import CelCompileError, CelEvalError

# cel-cpp prefixes messages with an absl status code ("INVALID_ARGUMENT: ...") and may
# suffix the compile report with it ("... [INVALID_ARGUMENT]"); cel-go shows neither.
_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")


def _clean(message: str) -> str:
    return _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", message.strip()))


class CelExprProgram:
    __slots__ = ("expression", "_expr")

    def __init__(self, expression: str, expr: cel.Expression) -> None:
        self.expression = expression
        self._expr = expr

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None) -> Any:
        result = self._expr.eval(data=activation)
        if result.type() == cel.Type.ERROR:
            raise CelEvalError(_clean(result.value()))
        return _to_python(result)

    def __repr__(self) -> str:
        return f"<CelExprProgram {self.expression!r}>"


def _to_python(value: cel.Value) -> Any:
    plain = value.plain_value()
    return _fix_bytes(plain)


def _fix_bytes(plain: Any) -> Any:
    if isinstance(plain, bytearray):
        return bytes(plain)
    if isinstance(plain, list):
        return [_fix_bytes(item) for item in plain]
    if isinstance(plain, dict):
        return {_fix_bytes(k): _fix_bytes(v) for k, v in plain.items()}
    return plain


class CelExprEngine:
    name = "cel-expr"

    def compile(self, expression: str, variables: Iterable[str]) -> CelExprProgram:
        return _compile(expression, tuple(sorted(set(variables))))


@lru_cache(maxsize=None)
def _env(variables: tuple[str, ...]) -> cel.Env:
    return new_env({name: cel.Type.DYN for name in variables})


@lru_cache(maxsize=4096)
def _compile(expression: str, variables: tuple[str, ...]) -> CelExprProgram:
    try:
        expr = _env(variables).compile(expression)
    except RuntimeError as err:
        raise CelCompileError(_clean(str(err))) from None
    return CelExprProgram(expression, expr)


ENGINE_CLASS = CelExprEngine
