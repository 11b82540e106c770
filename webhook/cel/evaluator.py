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

    The engine owns what it keeps between compilations (compiled programs, environments,
    the checking step): they live as long as this value and whatever shares its engine, and
    no two evaluators built apart share any. The backend is imported when first used, so
    that a command that evaluates no CEL does not pay for it."""

    __slots__ = ("name", "routes", "_engine")

    def __init__(self, name: str = DEFAULT_ENGINE, routes: Routes = ALL) -> None:
        if name not in engine_names():
            raise ValueError(f"unknown CEL engine {name!r}; choose one of {', '.join(engine_names())}")
        self.name = name
        self.routes = routes
        self._engine: list[Engine] = []  # built on first use; shared with ``without``'s evaluators

    @property
    def engine(self) -> Engine:
        if not self._engine:
            self._engine.append(new_engine(self.name))
        return self._engine[0]

    def without(self, route: str) -> "Evaluator":
        """The same engine (its compiled programs too), the fast route ``route`` switched off."""
        return self.with_routes(self.routes.without(route))

    def with_routes(self, routes: Routes) -> "Evaluator":
        """The same engine (its compiled programs too), taking the fast routes ``routes``."""
        other = Evaluator(self.name, routes)
        other._engine = self._engine
        return other

    def compile(self, expression: str, variables: Iterable[str], *, mixed_literals: bool = False) -> Program:
        """``Engine.compile``: ``expression`` with every variable typed ``dyn``."""
        return self.engine.compile(expression, variables, mixed_literals=mixed_literals)

    def __repr__(self) -> str:
        return f"Evaluator({self.name!r}, {self.routes!r})"
