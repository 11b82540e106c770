"""A native program: the generated function, compiled once and called with the activation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.cel.errors import CelCostExceeded
from webhook.cel.limits import PER_CALL_LIMIT
from webhook.cel.library.base import OptionalValue
from webhook.cel.native.runtime import NotNative
from webhook.cel.native.codegen import Codegen, Unsupported


class NativeProgram:
    """A checked CEL expression as one Python function; ``program(activation)`` is its value,
    or raises :class:`NotNative` when cel-expr must answer, or :class:`EngineBoundExceeded` when
    its count passes ``cost_limit``."""

    __slots__ = ("function", "source")

    def __init__(self, function: Callable[[Mapping[str, Any], int], Any], source: str) -> None:
        self.function = function
        self.source = source  # the generated Python, for reading and debugging

    def __call__(self, activation: Mapping[str, Any], cost_limit: int = PER_CALL_LIMIT) -> Any:
        try:
            value = self.function(activation, cost_limit)
            _plain(value)
        except (NotNative, CelCostExceeded):
            raise
        except Exception:  # a missing key, a selection on a non-map, nesting past the stack: cel-expr answers
            raise NotNative from None
        return value


def _plain(value: Any) -> None:
    """Raise when ``value`` holds an optional (cel-expr's result conversion decides those)."""
    kind = type(value)
    if kind is OptionalValue:
        raise NotNative
    if kind is list:
        for item in value:
            if type(item) is list or type(item) is dict or type(item) is OptionalValue:
                _plain(item)
    elif kind is dict:
        for item in value.values():
            if type(item) is list or type(item) is dict or type(item) is OptionalValue:
                _plain(item)


def compile_native(expr: Any) -> NativeProgram | None:
    """``expr`` (a checked ``cel.expr.Expr``, as cel-expr plans it) as a :class:`NativeProgram`;
    None when it leaves the subset (or Python cannot compile it: nesting too deep)."""
    generator = Codegen()
    try:
        body = generator.expr(expr)
    except (Unsupported, RecursionError):
        return None
    # _n: the comprehensions' iterations so far (cel-cpp's bound) and their work (against _limit)
    source = "\n".join([*generator.defined, "def program(a, _limit):", "    _n = [0, 0]", f"    return {body}"])
    namespace = dict(generator.names)
    try:
        exec(compile(source, "<cel native>", "exec"), namespace)  # noqa: S102  (source generated above)
    except (SyntaxError, RecursionError, MemoryError):
        return None
    return NativeProgram(namespace["program"], source)
