"""cel-go's actual cost (``webhook.cel.cost.count``) against Kubernetes' own cost tests.

The ``cost`` vectors of ``tests/conformance/reference/cel/k8s_cel_library_vectors.yaml`` record the cost
cel-go tracked for each expression in Kubernetes 1.36's base environment (``OptOptimize``:
constant literals built once), which is what the apiserver charges a CRD rule."""

from __future__ import annotations

from functools import cache

import pytest
import yaml

from webhook.cel.cost.calls import Error
from webhook.cel.cost.count import EXCEEDED, CostCounter
from webhook.cel.checker.checker import check
from webhook.cel.crd import ABSENT, OUT_OF_BUDGET, CostBudget, compile_schema_rules
from webhook.cel.limits import PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET
from webhook.cel.checker.declarations import Overload, parse_type
from webhook.cel.syntax.parser import parse
from webhook.cel.common.types import STRING
from tests.support.paths import CASES, CEL_VECTORS
from tests.support.cel import EVALUATOR
from webhook.cel import Evaluator

VECTORS = CEL_VECTORS
_JSONPATCH = {"jsonpatch.escapeKey": (Overload("string_jsonpatch_escapeKey_string", (STRING,), STRING, False),)}

# Vectors whose count is not known here (the rule is then charged its estimate, never less):
# uint values, and a fold over a map that stops early (where depends on Go's random map order).
UNCOUNTED = frozenset({"cost-0002", "cost-0006", "cost-0014", "cost-0022", "cost-0030", "cost-0039", "cost-0206"})


@cache
def _cost_vectors() -> list[dict]:
    with VECTORS.open() as handle:
        vectors = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = []
    for vector in vectors:
        if vector["library"] != "cost" or "schema" in vector or vector.get("variable_types"):
            continue
        k8s = vector["k8s_1_36"]
        expected = k8s["differs"].get("runtime_cost") if isinstance(k8s, dict) else vector["expect"]["cost"]["runtime"]
        if expected is not None:
            out.append({**vector, "runtime_cost": expected})
    return out


def _count(expression: str, limit: int = 10**9):
    checked = check(parse(expression), {}, {}, validate_literals=False, extra_functions=_JSONPATCH)
    assert checked.errors == []
    return CostCounter(checked).count({}, limit)


@pytest.mark.parametrize("vector", _cost_vectors(), ids=[v["id"] for v in _cost_vectors()])
def test_runtime_cost_as_kubernetes_tracks_it(vector: dict) -> None:
    counted = _count(vector["expression"])
    if vector["id"] in UNCOUNTED:
        assert counted is None, f"{vector['id']} is counted now: remove it from UNCOUNTED"
        return
    assert counted is not None
    assert counted.cost == vector["runtime_cost"]


def test_most_vectors_are_counted() -> None:
    assert len(_cost_vectors()) - len(UNCOUNTED) >= 180


@pytest.mark.parametrize(("expression", "cost"), [
    ("!(false && 'abc'.startsWith('a'))", 1),          # short-circuit: only the negation is charged
    ("true && 'abc'.startsWith('a')", 1),             # ceil(3 * 0.1)
    ("[1, 2, 3].all(x, x > 0)", 3 * (2 + 1 + 1 + 1) + 1),  # per item: condition 2, step: accu, x, > ; result
    ("[1, 2, 3].exists(x, x == 2)", 2 * (3 + 1 + 1 + 1) + 1 + 3),  # stops after the second item
    ("'a' in ['a', 'b']", 0),                         # a constant list: a set membership test, free
    ("[1, 2, 3][1] == 2", 3),                         # a relative attribute, its index, ==
    ("type(1) == int && type('a') != int", 2),       # type() of a constant and a type name: constants
])
def test_counted_steps(expression: str, cost: int) -> None:
    counted = _count(expression)
    assert counted is not None and counted.value is True
    assert counted.cost == cost


def test_errors_are_values_and_are_charged() -> None:
    counted = _count("[1, 2][5] == 1 || true")
    assert counted is not None and counted.value is True  # cel-go: error || true is true
    counted = _count("[1, 2][5] == 1")
    assert counted is not None and isinstance(counted.value, Error)


def test_count_stops_at_the_limit() -> None:
    counted = _count("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, x * y > 0))",
                     limit=100)
    assert counted is not None and counted.value is EXCEEDED
    assert 100 < counted.cost <= 110


_SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}},
                                            "name": {"type": "string"}}}


def _charged(rule: str, value: dict, **entry: str) -> tuple[int, list]:
    schema = dict(_SCHEMA, **{"x-kubernetes-validations": [{"rule": rule, **entry}]})
    budget = CostBudget()
    results = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine).evaluate(value, ABSENT, budget=budget)
    return RUNTIME_CEL_COST_BUDGET - budget.remaining, results


def test_a_crd_rule_is_charged_its_actual_cost() -> None:
    # self.items: 2, all(): per item condition 2 + step (accu 1, x 1, startsWith ceil(len(x) * 0.1)), result 1
    charged, results = _charged("self.items.all(x, x.startsWith('a'))", {"items": ["ab", "a" * 25]})
    assert results == []
    assert charged == 2 + (2 + 1 + 1 + 1) + (2 + 1 + 1 + 3) + 1


def test_a_failing_rule_and_its_message_expression_are_charged_their_actual_cost() -> None:
    charged, results = _charged("self.name == 'x'", {"name": "abc"}, messageExpression="'bad: ' + self.name")
    assert [r.message for r in results] == ["bad: abc"]
    # rule: self.name 2, == ceil(min(3, 1) * 0.1) = 1; message: self.name 2, + ceil((5 + 3) * 0.1) = 1
    assert charged == 3 + 3


def test_an_uncounted_rule_is_charged_its_estimate() -> None:
    rule = "self.items.sortBy(x, x).size() >= 0"  # sortBy's charges are not ported
    charged, results = _charged(rule, {"items": ["a"]})
    assert results == []
    rules = compile_schema_rules(dict(_SCHEMA, **{"x-kubernetes-validations": [{"rule": rule}]}),
                                 is_root=False, path="", engine=EVALUATOR.engine)
    assert charged == rules.rules[0].charge(rules.activation({"items": ["a"]})) > 0


def test_the_budget_runs_out_where_the_actual_costs_run_it_out() -> None:
    """Charges are owed while their estimates fit what is left, and counted before the
    budget could run out: the request stops at the rule the actual costs stop it at."""
    rules = ["self.name == 'abc' || self.name.startsWith('zzz')", "self.items.all(x, x.size() < 10)"]
    node = compile_schema_rules(dict(_SCHEMA, **{"x-kubernetes-validations": [{"rule": r} for r in rules]}),
                                is_root=False, path="", engine=EVALUATOR.engine)
    value = {"name": "abc", "items": ["a", "b"]}
    activation = node.activation(value)
    exact = [rule.cost(activation, True) for rule in node.rules]
    bounds = [rule.bound(activation) for rule in node.rules]  # the estimates (over these sizes)
    assert all(cost <= bound for cost, bound in zip(exact, bounds)) and sum(exact) < sum(bounds)

    budget = CostBudget(sum(exact))
    assert node.evaluate(value, ABSENT, budget=budget) == []
    assert budget.remaining == 0 and not budget.exhausted

    budget = CostBudget(sum(exact) - 1)
    assert [r.error for r in node.evaluate(value, ABSENT, budget=budget)] == [OUT_OF_BUDGET]
    assert budget.exhausted


def test_a_transform_map_is_counted_inserting_in_place() -> None:
    checked = check(parse("self.transformMap(k, v, v + 1).size() > 0"), {"self": parse_type("map(string, int)")}, {},
                    validate_literals=False)
    counted = CostCounter(checked).count({"self": {f"k{i}": i for i in range(20_000)}}, 10**9)
    # self 1; per entry: @result 1, k 1, v 1, + 1, cel.@mapInsert 1; the result 1; size 1; > 1
    assert counted is not None and counted.value is True
    assert counted.cost == 1 + 20_000 * 5 + 1 + 1 + 1


def test_a_map_is_counted_appending_in_place() -> None:
    checked = check(parse("self.map(x, x).size() > 0"), {"self": parse_type("list(int)")}, {}, validate_literals=False)
    counted = CostCounter(checked).count({"self": list(range(20_000))}, 10**9)
    # self 1; per item: @result 1, [x] 10 + 1, + 1; the result 1; size 1; > 1
    assert counted is not None and counted.value is True
    assert counted.cost == 1 + 20_000 * 13 + 1 + 1 + 1


def test_a_rule_the_engine_stops_is_counted_once(monkeypatch) -> None:
    """Nested loops over 3,000 items: the engine's bound refuses the evaluation at once. Its
    bound is its own, so cel-go's count decides, counted once up to the per-call limit: past
    it, the apiserver's cost error, charged from that same count."""
    rule = "self.items.all(x, self.items.all(y, x == y || x != y))"
    counts = []
    count = CostCounter.count

    def counted(self, activation, limit):
        counts.append(limit)
        return count(self, activation, limit)

    monkeypatch.setattr(CostCounter, "count", counted)
    _, results = _charged(rule, {"items": [str(i) for i in range(3000)]})
    assert [r.error for r in results] == [
        f"'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call "
        f"cost exceeds limit for rule: {rule}"]
    assert counts == [PER_CALL_LIMIT]


def test_a_rule_the_engine_stops_within_the_limit_is_answered_by_the_count() -> None:
    """Where cel-go finishes well within the per-call limit, the count's value is the answer,
    true or false, and its cost the charge: a single loop over 10,500 items (past cel-cpp's
    10,000 iterations), and a nested loop over 3 items beside a rule reading 3,000 (past the
    engine's bound, measured over all the node's rules read)."""
    rule = "self.items.all(x, x != 'bad')"
    for value, holds in [({"items": ["a"] * 10_500}, True), ({"items": ["a"] * 10_400 + ["bad"]}, False)]:
        charged, results = _charged(rule, value)
        assert [r.message for r in results] == ([] if holds else [f"failed rule: {rule}"])
        assert 10_500 < charged < PER_CALL_LIMIT

    nested = "self.name.split('').all(x, self.name.split('').exists(y, x + 'z' == y))"
    schema = dict(_SCHEMA, **{"x-kubernetes-validations": [{"rule": "self.items.all(x, x != 'bad')"},
                                                           {"rule": nested, "message": "no pair"}]})
    budget = CostBudget()
    results = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine).evaluate(
        {"items": ["a"] * 3000, "name": "abc"}, ABSENT, budget=budget)
    assert [(r.message, r.error) for r in results] == [("no pair", None)]
    assert RUNTIME_CEL_COST_BUDGET - budget.remaining < PER_CALL_LIMIT


def test_a_rule_the_engine_stops_on_an_error_gets_cel_gos_error() -> None:
    """Past cel-cpp's 10,000 iterations a missing field makes cel-go's value an error, not a
    cost overrun: the error in cel-go's words (cel-python, without the engine's bounds), and
    the node's other rules still run, as in the apiserver."""
    items = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    schema = {"type": "object", "properties": {"l": items, "name": {"type": "string"}},
              "x-kubernetes-validations": [{"rule": "self.l.all(x, x.n > 0)"},
                                           {"rule": "self.name == 'x'", "message": "name must be x"}]}
    results = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine).evaluate(
        {"l": [{"n": 2}] * 10_499 + [{}], "name": "y"}, ABSENT, budget=CostBudget())
    assert [(r.error, r.message) for r in results] == [
        ("no such key: n evaluating rule: self.l.all(x, x.n > 0)", None), (None, "name must be x")]


def test_every_rule_of_the_recorded_cases_is_counted_as_the_engine_answers(monkeypatch) -> None:
    """The count evaluates the rule itself: on every rule evaluation the recorded cases make
    (the walk, every charge counted at once), a counted value must be the engine's answer
    (its value, or an error for an error); otherwise the rule would be charged its estimate."""
    from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
    from webhook.cel import crd
    from webhook.cel.errors import CelCostExceeded
    from webhook.cel.ladder import ALL
    from webhook.offline.recorded_suites import load_suite
    from webhook.schema import CRDRegistry

    seen = {"counted": 0, "uncounted": 0}
    differing = []
    original = crd.CompiledRule.cost

    def checked_cost(rule, activation, outcome):
        counted = rule.count(activation)
        if counted is None or isinstance(outcome, CelCostExceeded):
            seen["uncounted"] += 1
        elif counted.agrees_with(outcome):
            seen["counted"] += 1
        else:
            differing.append(f"{rule.rule!r}: counted {counted.value!r}, the engine {outcome!r}")
        return original(rule, activation, outcome)

    monkeypatch.setattr(crd.CompiledRule, "cost", checked_cost)
    monkeypatch.setattr(crd.CostBudget, "charge_later", lambda budget, *charge: False)
    for name in OBJECT_SUITES:
        suite = load_suite(CASES / name, EVALUATOR)
        walk = CRDRegistry(suite.registry.crds, evaluator=EVALUATOR.with_routes(ALL.without("object_batch")))
        for case in suite.cases:
            recorded_outcome(walk, case.data)
    assert not differing, "\n".join(differing[:20])
    assert seen["counted"] >= 1000 and seen["counted"] > 20 * seen["uncounted"], seen


def test_an_optional_old_self_is_counted_as_an_optional() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue() || oldSelf.value() == self", "optionalOldSelf": True}]}
    rules = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine)
    create, update = CostBudget(), CostBudget()
    assert rules.evaluate("a", ABSENT, budget=create) == []
    assert rules.evaluate("a", "a", budget=update) == []
    # oldSelf 1, hasValue() 1, ! 1; then oldSelf 1, value() 1, self 1, == 1
    assert RUNTIME_CEL_COST_BUDGET - create.remaining == 3
    assert RUNTIME_CEL_COST_BUDGET - update.remaining == 3 + 4


def test_the_message_of_an_optional_old_self_rule_is_counted_with_an_optional() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue()", "optionalOldSelf": True,
         "messageExpression": "oldSelf.hasValue() ? 'changed' : self + self + self + self"}]}
    rules = compile_schema_rules(schema, is_root=False, path="", engine=EVALUATOR.engine)
    budget = CostBudget()
    assert [r.message for r in rules.evaluate("b", "a", budget=budget)] == ["changed"]
    # the rule: oldSelf 1, hasValue() 1, ! 1; the message: oldSelf 1, hasValue() 1 (the estimate
    # would charge the other branch too)
    assert RUNTIME_CEL_COST_BUDGET - budget.remaining == 3 + 2


@pytest.mark.parametrize(("expression", "value", "cost"), [
    ("self.?a.orValue('x') == 'x'", {}, 1 + 1 + 1),             # self, .?a, == (orValue: no charge)
    ("self.?a.orValue('x') == 'x'", {"a": "x"}, 1 + 1 + 1),
    ("optional.none().or(self.?a).hasValue()", {"a": 1}, 1 + 1 + 1 + 1),  # none(), self, .?a, hasValue()
    ("[?self.?a, ?self.?b].size() == 1", {"a": 1}, 2 * 2 + 10 + 1 + 1),
])
def test_optionals(expression: str, value: dict, cost: int) -> None:
    checked = check(parse(expression), {"self": parse_type("map(string, dyn)")}, {}, validate_literals=False)
    counted = CostCounter(checked).count({"self": value}, 10**6)
    assert counted is not None and counted.value is True
    assert counted.cost == cost


def test_jsonpatch_escape_key_is_counted_as_kubernetes_tracks_it() -> None:
    """``cost-0121`` (Kubernetes' ``TestStringLibrary/jsonpatch.escapeKey``; declared in a
    MutatingAdmissionPolicy's environment only, so not among the 1.36 base vectors)."""
    with VECTORS.open() as handle:
        vectors = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (vector,) = [v for v in vectors if v["id"] == "cost-0121"]
    counted = _count(vector["expression"])
    assert counted is not None and counted.value == "abc~1def~0 abc~1def~0"
    assert counted.cost == vector["expect"]["cost"]["runtime"]


def test_a_message_construction_is_counted_as_cel_go_creates_a_struct() -> None:
    """A MutatingAdmissionPolicy's ``JSONPatch{...}`` / ``Object{...}``: its fields, then
    ``StructCreateBaseCost`` (``OptOptimize`` folds lists and maps of constants, never a message):
    a list of two, each with a selection of ``object``, costs two selections and two structs
    and the list."""
    from webhook.cel import mutation
    from webhook.cel.common.types import DYN
    from webhook.cel.cost.estimate import LIST_CREATE, STRUCT_CREATE

    source = ('[JSONPatch{op: "add", path: "/a", value: object.a}, '
              'JSONPatch{op: "add", path: "/b", value: object.b}]')
    checked = mutation.check_mutation(source, {"object": DYN})
    assert checked.errors == []
    counted = CostCounter(checked).count({"object": {"a": 1, "b": 2}}, 10**9)
    assert counted is not None
    assert [patch["value"] for patch in counted.value] == [1, 2]
    assert counted.cost == 2 * 2 + 2 * STRUCT_CREATE + LIST_CREATE
