"""The three errors every CEL backend raises, worded as cel-go / the apiserver word them."""

from __future__ import annotations


class CelError(Exception):
    """Base of every CEL error; ``str(err)`` is the message a user sees."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CelCompileError(CelError):
    """The expression does not parse or does not type-check."""


class CelEvalError(CelError):
    """Evaluation failed (no such key, no matching overload, a library error, ...)."""


class CelCostExceeded(CelEvalError):
    """The runtime cost/iteration bound tripped; the apiserver's wording."""

    def __init__(self, message: str = "operation cancelled: actual cost limit exceeded") -> None:
        super().__init__(message)
