"""Every fast route of the CEL ladder (``webhook.cel.ladder``) switched off in turn answers
exactly as all routes do: every recorded apiserver case (its whole outcome, and its verdict
against the recording) and every Kubernetes CEL vector (as an expression, and as a CRD rule at
the root, on a property and on list items).

A fast route may only say "surely true", so taking one away can change nothing but the time.
Each route must also answer somewhere in the replay, so that switching it off is a real change.
(``crd-admission.yaml`` is left out: it admits CRDs and evaluates no rule over an object.)
"""

from __future__ import annotations

import copy
import dataclasses
from functools import cache
from typing import Any
from unittest import mock

import pytest

from tests.cel import vectors
from tests.support.paths import CASES
from webhook.cel import CelCompileError, CelEvalError, crd
from webhook.cel.engine.cel_expr import CelExprProgram
from webhook.cel.ladder import ALL, DECLINED, LADDER, Routes
from webhook.cel.native.program import NativeProgram
from webhook.offline.recorded_suites import Case, Suite, load_suite, request_path
from webhook.schema import CRDRegistry
from webhook.schema.celrules import CelValidator
from webhook.schema.structural import ABSENT, compile_schema
from tests.support.cel import EVALUATOR
from webhook.cel import Evaluator


@cache
def _object_suites() -> tuple[Suite, ...]:
    suites = tuple(load_suite(path, EVALUATOR) for path in sorted(CASES.glob("*.yaml")))
    return tuple(suite for suite in suites if suite.registry is not None)


def _case_outcomes(routes: Routes) -> dict[str, Any]:
    """Each recorded case: the registry's whole outcome and the verdict against the recording."""
    found: dict[str, Any] = {}
    for suite in _object_suites():
        registry = CRDRegistry(suite.registry.crds, evaluator=EVALUATOR.with_routes(routes))
        rerouted = Suite(suite.path, suite.title, [], registry)
        for case in suite.cases:
            data = case.data
            outcome = registry.handle(str(data.get("operation", "CREATE")), copy.deepcopy(data.get("object")),
                                      copy.deepcopy(data.get("old")), data.get("subresource"),
                                      request=request_path(data))
            fields = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
            fields["errors"] = [str(e) for e in outcome.errors]  # (their fields hold sentinels)
            verdict = Case(rerouted, case.name, copy.deepcopy(data), case.run).execute().problems
            found[f"{suite.path.name}::{case.name}"] = (fields, verdict)
    return found


def _value(value: Any) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def _expression_outcome(vector: dict[str, Any], routes: Routes) -> Any:
    """The vector as an expression, a true value accepted as the fast routes give it."""
    variables = vector.get("variables") or {}
    try:
        program = EVALUATOR.engine.compile(vector["expression"], variables.keys())
    except CelCompileError as err:
        return "compile_error", str(err)
    try:
        return "value", _value(program.evaluate(variables, accept=lambda v: v is True, routes=routes))
    except CelEvalError as err:
        return "error", type(err).__name__, str(err)


def _placements(vector: dict[str, Any]):
    """The vector's rule on its schema at the root (objects), as property ``v``, as items of ``l``."""
    rule = {"rule": vector["expression"], **({"message": "failed"} if "\n" in vector["expression"] else {})}
    node = {**vector["schema"], "x-kubernetes-validations": [rule]}
    variables = vector.get("variables") or {}
    value, old = variables.get("self"), variables.get("oldSelf", ABSENT)
    if isinstance(value, dict) and (vector.get("is_resource_root") or node.get("type") == "object"):
        yield node, value, old
    yield {"type": "object", "properties": {"v": node}}, {"v": value}, ABSENT if old is ABSENT else {"v": old}
    yield ({"type": "object", "properties": {"l": {"type": "array", "items": node}}}, {"l": [value, value]},
           ABSENT if old is ABSENT else {"l": [old, old]})


@cache
def _schemas(vector_id: str) -> tuple:
    vector = next(v for v in vectors.load() if v["id"] == vector_id)
    return tuple((compile_schema(copy.deepcopy(schema)), value, old) for schema, value, old in _placements(vector))


def _rule_outcome(vector: dict[str, Any], routes: Routes) -> Any:
    """The vector as a CRD rule: the node's results, and each placement's errors and warnings."""
    variables = vector.get("variables") or {}
    rule = {"rule": vector["expression"], **({"message": "failed"} if "\n" in vector["expression"] else {})}
    try:
        rules = crd.compile_schema_rules({**vector["schema"], "x-kubernetes-validations": [rule]},
                                         is_root=bool(vector.get("is_resource_root")), path="", engine=EVALUATOR.engine)
    except crd.CrdRuleError as err:
        return "compile_error", err.errors
    results = rules.evaluate(copy.deepcopy(variables.get("self")), copy.deepcopy(variables.get("oldSelf", ABSENT)),
                             budget=crd.CostBudget(), routes=routes)
    placed = []
    for root, value, old in _schemas(vector["id"]):
        errors, warnings = CelValidator(root, EVALUATOR.with_routes(routes)).validate(copy.deepcopy(value), copy.deepcopy(old))
        placed.append(([str(e) for e in errors], warnings))
    return results, placed


def _vector_outcomes(routes: Routes) -> dict[str, Any]:
    return {vector["id"]: _rule_outcome(vector, routes) if "schema" in vector else _expression_outcome(vector, routes)
            for vector in vectors.load()}


FAST_ROUTES = [route.name for route in LADDER if route.fast]


@cache
def _all_routes() -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """Every outcome with all routes, and how often each fast route answered meanwhile."""
    used = dict.fromkeys(FAST_ROUTES, 0)

    def counting(route: str, original: Any, answered: Any) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            used[route] += bool(answered(result))
            return result
        return spy

    def answered(result: Any) -> bool:
        return result is not DECLINED

    spies = [
        mock.patch.object(CelValidator, "object_batch_route", counting("object_batch", CelValidator.object_batch_route,
                                                                       answered)),
        # the native route of a program, and of an object batch of rules whose bound measures their values
        mock.patch.object(NativeProgram, "__call__", counting("native", NativeProgram.__call__, lambda r: r is True)),
        mock.patch.object(CelExprProgram, "hoisted_route", counting("hoisted", CelExprProgram.hoisted_route, answered)),
    ]
    for spy in spies:
        spy.start()
    try:
        return _case_outcomes(ALL), _vector_outcomes(ALL), used
    finally:
        for spy in spies:
            spy.stop()


def test_the_ladder_names_every_switch():
    # (a fast route added to the ladder needs a spy above, so that its replay is no vacuous one)
    assert set(FAST_ROUTES) == set(Routes.names()) and FAST_ROUTES == ["object_batch", "native", "hoisted"]
    for name in FAST_ROUTES:
        assert f"{name}_route" not in ALL.without(name).steps(next(r.stage for r in LADDER if r.name == name))


@pytest.mark.parametrize("route", FAST_ROUTES)
def test_a_route_switched_off_answers_as_all_routes(route):
    cases, vector_outcomes, used = _all_routes()
    assert len(cases) >= 580 and len(vector_outcomes) >= 1000
    assert used[route] > 0, f"the {route} route never answered: switching it off would test nothing"
    off = ALL.without(route)
    differing = [name for name, outcome in _case_outcomes(off).items() if outcome != cases[name]]
    assert not differing, f"without {route}: {differing[:10]}"
    differing = [name for name, outcome in _vector_outcomes(off).items() if outcome != vector_outcomes[name]]
    assert not differing, f"without {route}: {differing[:10]}"
