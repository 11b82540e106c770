"""How CEL is evaluated, as one value: the engine (backend) and the routes it may take.

An ``Evaluator`` is built once at each edge — the command line (``--cel-engine`` or
``INFERGATE_CEL_ENGINE``), the server's wiring, a test, a benchmark — and passed down to
whatever compiles or evaluates CEL: the CRD registry (its rules), the policies, the planner's
device selectors. Nothing below an edge chooses an engine or reads the environment for one.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.cel.engine.interface import DEFAULT_ENGINE, Engine, Program, engine_names, new_engine
from webhook.cel.ladder import ALL, Routes


class Evaluator:
    """The engine that compiles and evaluates (by name: ``engine_names()``), and the fast
    routes an evaluation may take (``webhook.cel.ladder``; every one by default: tests and
    benchmarks switch some off).

    The backend is imported when first used, so that a command that evaluates no CEL does
    not pay for it."""

    __slots__ = ("name", "routes", "_engine")

    def __init__(self, name: str = DEFAULT_ENGINE, routes: Routes = ALL) -> None:
        if name not in engine_names():
            raise ValueError(f"unknown CEL engine {name!r}; choose one of {', '.join(engine_names())}")
        self.name = name
        self.routes = routes
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = new_engine(self.name)
        return self._engine

    def without(self, route: str) -> "Evaluator":
        """The same engine, the fast route ``route`` switched off."""
        return Evaluator(self.name, self.routes.without(route))

    def compile(self, expression: str, variables: Iterable[str], *, mixed_literals: bool = False) -> Program:
        """``Engine.compile``: ``expression`` with every variable typed ``dyn``."""
        return self.engine.compile(expression, variables, mixed_literals=mixed_literals)

    def __repr__(self) -> str:
        return f"Evaluator({self.name!r}, {self.routes!r})"
