"""The engine interface: compile once, evaluate many times.

Two backends implement it: ``cel-expr`` (cel-expr-python, the C++ runtime; default) and
``cel-python`` (pure Python: cel-go's exact wording where cel-cpp's differs, and the fallback
engine; see ``cel_python``). Both expose every Kubernetes CEL library with Kubernetes' names
and semantics.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

DEFAULT_ENGINE = "cel-expr"

# name -> module defining ``ENGINE_CLASS``; imported on first use
_BACKENDS = {
    "cel-expr": "webhook.cel.engine.cel_expr",
    "cel-python": "webhook.cel.engine.cel_python",
}


class Program(Protocol):
    """A compiled expression."""

    expression: str

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: int | None = None,
                 accept: Callable[[Any], bool] | None = None, routes: Any = None) -> Any:
        """Evaluate with plain Python values bound to the variables; plain values out.

        Raises ``CelEvalError`` (cel-go wording) or ``CelCostExceeded`` when the runtime
        bound (``cost_limit``, default the apiserver's per-call limit) trips. ``accept``: the
        answers the caller can use as they are (all rules true, a patch), which a backend may
        give from a fast path of its own before its exact one; the value is the same.
        ``routes``: the fast routes that may run (``webhook.cel.ladder.Routes``; default all;
        ``Evaluator.routes`` at the edge).
        """


class Engine(Protocol):
    name: str
    schema_rules: Any  # ``kept.Kept``: the rules ``webhook.cel.crd`` compiled per CRD schema node, for this engine
    known_sizes: Any  # ``cost.bound.KnownSizes``: stored objects its bound need not measure again

    def compile(self, expression: str, variables: Iterable[str], *, mixed_literals: bool = False) -> Program:
        """Parse and type-check ``expression`` with every variable typed ``dyn``.

        Kubernetes rejects a list or map literal whose elements differ in type, ``dyn``
        counting as a type of its own (``[dynValue, 1]``, ``{'a': 'x', 'b': dyn(0)}``).
        ``mixed_literals``: ``dyn`` values may join typed ones there, for callers whose dyn
        variables stand for values typed elsewhere (a CRD rule's ``self``, which ``checker.py``
        checks against the schema) and for infergate's policies (JSON patch maps).

        Raises ``CelCompileError``. Programs are cached by expression, variable set and mode.
        """


def engine_names() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def new_engine(name: str) -> Engine:
    """A new instance of the backend named ``name`` (``engine_names()``); its module is
    imported on first use. Each instance keeps its own compiled programs and environments
    (built at the edge, inside an ``Evaluator``): two instances share nothing."""
    try:
        module_name = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown CEL engine {name!r}; choose one of {', '.join(_BACKENDS)}") from None
    return importlib.import_module(module_name).ENGINE_CLASS()
