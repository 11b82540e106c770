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


COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"  # the apiserver's words


class CelCostExceeded(CelEvalError):
    """The runtime cost/iteration bound tripped; the apiserver's wording."""

    def __init__(self, message: str = COST_EXCEEDED) -> None:
        super().__init__(message)


class EngineBoundExceeded(CelCostExceeded):
    """The engine stopped an evaluation at a bound of its own: an upper bound of the work it
    would do (measured over everything in the activation), or cel-cpp's 10,000 comprehension
    iterations. cel-go, counting what the evaluation actually does, may well finish: where the
    apiserver's answer matters (a CRD rule), ``webhook.cel.crd`` asks cel-go's count."""
