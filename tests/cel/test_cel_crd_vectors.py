"""Replays the Kubernetes CRD-rule vectors (``crd_values``, ``escaping``) of
``tests/conformance/reference/cel/k8s_cel_library_vectors.yaml`` through ``webhook.cel.crd``."""

from __future__ import annotations

import re

import pytest

from webhook.cel.checker.checker import check
from webhook.cel.cost.estimate import TypeSizeEstimator, estimate
from webhook.cel.crd import ABSENT, CostBudget, CrdRuleError, compile_schema_rules
from webhook.cel.limits import RUNTIME_CEL_COST_BUDGET
from webhook.cel.checker.declarations import Overload, parse_type
from webhook.cel.common.escaping import escape, unescape
from webhook.cel.syntax.parser import parse
from webhook.cel.common.types import STRING
from tests.cel.vectors import every_vector, library_vectors
from tests.support.cel import EVALUATOR

# Every CRD-rule vector passes (crd_values-0161, string() of a date-time field in its own offset,
# is answered from the Python value: see rewrite.py and optimize.hoist_date_time_string).
KNOWN_GAPS: frozenset[str] = frozenset()


def _ids(vectors: list[dict]) -> list[str]:
    return [v["id"] for v in vectors]


_SELF_TYPE = re.compile(r"selfType\d+")


def _observed_detail(vector: dict) -> str | None:
    """The detail part of the field error the apiserver reported (after `Invalid value: "object": `)."""
    observed = vector.get("observed_field_errors") or []
    if len(observed) != 1:
        return None
    _, _, detail = observed[0].partition(": Invalid value: ")
    _, _, detail = detail.partition(": ")
    return detail


def replay(vector: dict) -> None:
    """Replay one vector; a known gap may fail (xfail) or pass (the engine improves underneath)."""
    if vector["id"] not in KNOWN_GAPS:
        _replay(vector)
        return
    try:
        _replay(vector)
    except (Exception, pytest.fail.Exception) as gap:  # any failure is the known gap
        pytest.xfail(f"known gap: {gap}")


def _replay(vector: dict) -> None:
    schema = dict(vector["schema"])
    rule = {"rule": vector["expression"]}
    if "\n" in rule["rule"]:  # a CRD requires a message for a rule with line breaks
        rule["message"] = "failed"
    schema["x-kubernetes-validations"] = [rule]
    expect = vector["expect"]
    variables = vector.get("variables") or {}
    if "compile_error_contains" in expect:
        with pytest.raises(CrdRuleError) as caught:
            compile_schema_rules(schema, is_root=bool(vector.get("is_resource_root")), path="", engine=EVALUATOR.engine)
        text = caught.value.issues[0].detail
        assert expect["compile_error_contains"] in text
        observed = _observed_detail(vector)
        if observed is not None:
            # object types are named after the schema node with a random suffix (selfType65182513.a)
            assert _SELF_TYPE.sub("selfType", "rule compile error: " + text) == _SELF_TYPE.sub("selfType", observed)
        return
    rules = compile_schema_rules(schema, is_root=bool(vector.get("is_resource_root")), path="", engine=EVALUATOR.engine)
    old = variables.get("oldSelf", ABSENT)
    results = rules.evaluate(variables.get("self"), old, budget=CostBudget())
    if expect.get("skipped"):
        assert results == []
        return
    if "error_contains" in expect:
        assert len(results) == 1 and results[0].error is not None, results
        assert expect["error_contains"] in results[0].error
        observed = _observed_detail(vector)
        if observed is not None:
            assert results[0].error == observed
        return
    assert expect["type"] == "bool"
    if expect["value"] is True:
        assert results == []
    else:
        assert len(results) == 1 and results[0].error is None, results


@pytest.mark.parametrize("vector", library_vectors("crd_values", crd=True), ids=_ids(library_vectors("crd_values", crd=True)))
def test_crd_values(vector: dict) -> None:
    replay(vector)


@pytest.mark.parametrize("vector", library_vectors("escaping", crd=True), ids=_ids(library_vectors("escaping", crd=True)))
def test_escaping_in_rules(vector: dict) -> None:
    replay(vector)


def _library_ruleevery_vector() -> list[dict]:
    """The library vectors Kubernetes ran as CRD rules (TestValidationExpressions), with the
    Kubernetes 1.36 answer their upstream one (``tests/cel`` replays them on the engines alone)."""
    return [v for v in every_vector() if "schema" in v and v["library"] not in ("crd_values", "escaping", "cost")
            and v["k8s_1_36"] == "same"]


LIBRARY_RULE_GAPS: frozenset[str] = frozenset()


@pytest.mark.parametrize("vector", _library_ruleevery_vector(), ids=_ids(_library_ruleevery_vector()))
def test_library_vectors_as_crd_rules(vector: dict) -> None:
    """What the engine-only replay cannot see: the schema's types (``[].sum()`` of a duration
    list), the CRD-creation checks and the field errors, as Kubernetes' own test observed them."""
    if vector["id"] not in LIBRARY_RULE_GAPS:
        _replay(vector)
        return
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        _replay(vector)
    pytest.xfail("known gap")


@pytest.mark.parametrize("vector", library_vectors("escaping", crd=False), ids=_ids(library_vectors("escaping", crd=False)))
def test_escaping_names(vector: dict) -> None:
    expect = vector["expect"]
    if "property_name" in vector:
        escaped = escape(vector["property_name"])
        if expect.get("escapable") is False:
            assert escaped is None
        else:
            assert escaped == expect["escaped"]
            if expect.get("unescape_roundtrip"):
                assert unescape(escaped) == vector["property_name"]
    elif expect.get("unescapable"):
        assert unescape(vector["escaped_name"]) is None
    else:
        assert unescape(vector["escaped_name"]) == expect["unescaped"]


# --- cost ---------------------------------------------------------------------------------------

_JSONPATCH = {  # the cost tests' environment also has jsonpatch.escapeKey (not in CRD rules)
    "jsonpatch.escapeKey": (Overload("string_jsonpatch_escapeKey_string", (STRING,), STRING, False),),
}


@pytest.mark.parametrize("vector", [v for v in library_vectors("cost", crd=False)],
                         ids=_ids(library_vectors("cost", crd=False)))
def test_estimated_cost(vector: dict) -> None:
    """cel-go's estimate with Kubernetes' estimators, as in Kubernetes' own cost tests (strings 0..12)."""
    variables = {name: parse_type(t) for name, t in (vector.get("variable_types") or {}).items()}
    checked = check(parse(vector["expression"]), variables, {}, validate_literals=False,
                    extra_functions=_JSONPATCH)
    assert checked.errors == []
    expect = vector["expect"]["cost"]
    assert estimate(checked, TypeSizeEstimator()) == (expect["estimated_min"], expect["estimated_max"])


@pytest.mark.parametrize("vector", library_vectors("cost", crd=True), ids=_ids(library_vectors("cost", crd=True)))
def test_crd_rule_runtime_cost(vector: dict) -> None:
    def run() -> None:
        schema = dict(vector["schema"], **{"x-kubernetes-validations": [{"rule": vector["expression"]}]})
        rules = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine)
        budget = CostBudget()
        assert rules.evaluate(vector["variables"]["self"], budget=budget) == []
        assert budget.remaining == RUNTIME_CEL_COST_BUDGET - vector["expect"]["runtime_cost"]

    if vector["id"] not in RUNTIME_COST_GAPS:
        run()
        return
    try:
        run()
    except AssertionError as gap:
        pytest.xfail(f"runtime cost is charged from estimates, not tracked during evaluation: {gap}")
    pytest.fail(f"{vector['id']} passes now: remove it from RUNTIME_COST_GAPS")


# cel-go tracks cost step by step while evaluating (webhook.cel.cost.count counts the same way):
# every runtime cost vector passes.
RUNTIME_COST_GAPS: frozenset[str] = frozenset()


def test_a_costly_rule_is_charged_by_the_sizes_it_reads():
    """A rule whose worst case is costly is charged its estimate over the sizes of the values
    it reads (``RuntimeCharge``): the longest of each path, items, keys and values included."""
    from webhook.cel.cost.estimate import path_size

    activation = {"self": {"l": [{"s": "abc"}, {"s": "a"}, {"t": [1, 2, 3, 4]}, None],
                           "m": {"k": "xy", "key-10-ch": [1]}}, "oldSelf": None}
    sizes = {("self",): 2, ("self", "l"): 4, ("self", "l", "@items", "s"): 3, ("self", "l", "@items", "t"): 4,
             ("self", "m", "@keys"): 9, ("self", "m", "@values"): 2, ("self", "l", "@indices"): 0,
             ("self", "missing", "@items"): 0, ("self", "l", "@items", "s", "@items"): 0, ("oldSelf", "l"): 0,
             ("absent",): 0}
    assert {path: path_size(activation, path) for path in sizes} == sizes
    schema = {"type": "object", "properties": {"l": {"type": "array", "maxItems": 100, "items": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}},
              "x-kubernetes-validations": [{"rule": "self.l.all(x, self.l.exists_one(y, x.n == y.n))"}]}
    rule = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine).rules[0]
    assert rule.runtime_charge is not None
    small, large = ({"self": {"l": [{"n": i} for i in range(count)]}, "oldSelf": None, "__oldSelfPresent": False}
                    for count in (2, 50))
    assert rule.charge(small) < rule.charge(large) <= rule.max_cost
