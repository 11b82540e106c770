"""A policy's compiled CEL expression, with the place it came from and what it reads."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from webhook.cel.ladder import ALL, Routes

# Every expression is compiled with the same names; unused ones cost nothing.
CEL_VARIABLES = ("object", "oldObject", "request", "namespaceObject", "params", "lookups", "variables")
_MISSING = "<absent>"  # a path an expression reads that the activation does not hold (``seen``)


class _Unbound:
    """A root left out of an evaluation: its use is an error (``webhook.policy.unknown`` asks what
    a rule says without an answer the cluster view does not know)."""

    def __repr__(self) -> str:
        return "UNBOUND"


UNBOUND = _Unbound()


class Expression:
    """A compiled CEL expression with the place it came from and the routes its evaluations
    may take (``Evaluator.routes``); ``needs``: the variables it reads (for
    ``lookups``/``variables`` the names it selects, None: the whole map)."""

    def __init__(self, program: Any, source: str, where: str, routes: Routes = ALL) -> None:
        self.program, self.source, self.where, self.routes = program, source, where, routes
        self._refs = _references(source)
        self.needs = _needs(source)

    def evaluate(self, activation: Mapping[str, Any], accept: Callable[[Any], bool] | None = None) -> Any:
        """``accept``: see ``Program.evaluate`` (the answer a fast path may give alone)."""
        # Only what the expression names crosses into CEL: converting every lookup and
        # variable for every expression would cost more than evaluating it.
        data: dict[str, Any] = {}
        for root, names in self.needs.items():
            value = activation.get(root)
            if value is UNBOUND:
                continue
            if names is not None and isinstance(value, Mapping):
                value = {n: value[n] for n in names if n in value}
            data[root] = value
        # the engine's default cost limit: the apiserver's per-call one
        return self.program.evaluate(data, accept=accept, routes=self.routes)

    def seen(self, activation: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the paths the expression names (for --explain)."""
        return {ref: _resolve(activation, ref) for ref in self._refs}


# a variable and its field path (".x" or optional ".?x"), without a trailing method call (".exists(")
_REF = re.compile(r"\b(object|oldObject|params|namespaceObject|request|lookups|variables)"
                  r"((?:\.\??[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_]|\s*\())*)")


def _references(source: str) -> list[str]:
    """The paths an expression reads, most specific first seen; ancestors of others dropped."""
    found = list(dict.fromkeys(m.group(0).replace(".?", ".") for m in _REF.finditer(source)))
    return [r for r in found if not any(other.startswith(r + ".") for other in found)]


_ROOT = re.compile(r"\b(object|oldObject|params|namespaceObject|request|lookups|variables)\b(\.\??([A-Za-z_][A-Za-z0-9_]*))?")


def _needs(source: str) -> dict[str, set[str] | None]:
    """The variables an expression reads; for ``lookups``/``variables`` the names it selects
    (``None``: the whole map, e.g. when indexed some other way)."""
    needs: dict[str, set[str] | None] = {}
    for m in _ROOT.finditer(source):
        root, name = m.group(1), m.group(3)
        if root not in ("lookups", "variables"):
            needs[root] = None
        elif name is None:
            needs[root] = None
        elif root not in needs:
            needs[root] = {name}
        elif needs[root] is not None:
            needs[root].add(name)
    return needs


def _resolve(activation: Mapping[str, Any], ref: str) -> Any:
    value: Any = activation
    for part in ref.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value
