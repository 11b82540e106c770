"""The cel-expr backend's runtime design: bounds, values crossing into C++, no Python calls."""

import datetime

import pytest
from cel_expr_python import cel

from webhook.cel import CelCostExceeded, CelEvalError
from webhook.cel.library.base import OptionalValue
from webhook.cel.library.quantity import Quantity
from webhook.cel import Evaluator

ENGINE = Evaluator("cel-expr").engine


def compile_(rule):
    return ENGINE.compile(rule, ["self"])


# --- the runtime bound ------------------------------------------------------------------


def test_nested_loops_over_a_large_object_are_refused_before_running():
    program = compile_("self.all(i, self.all(j, i + j >= 0))")
    with pytest.raises(CelCostExceeded, match="^operation cancelled: actual cost limit exceeded$"):
        program.evaluate({"self": list(range(5000))})


def test_a_small_object_passes_the_same_rule():
    assert compile_("self.all(i, self.all(j, i + j >= 0))").evaluate({"self": list(range(20))}) is True


def test_the_cost_limit_argument_lowers_the_bound():
    program = compile_("self.all(i, self.all(j, i + j >= 0))")
    with pytest.raises(CelCostExceeded):
        program.evaluate({"self": list(range(20))}, cost_limit=100)


def test_cel_cpp_iteration_budget_reads_as_the_apiserver_bound():
    with pytest.raises(CelCostExceeded):
        compile_("self.all(i, i >= 0)").evaluate({"self": list(range(20_000))})


def test_a_computed_range_cannot_allocate_past_the_limit():
    program = compile_("lists.range(self.n).size() > 0")
    assert program.evaluate({"self": {"n": 3}}) is True
    with pytest.raises(CelCostExceeded):
        program.evaluate({"self": {"n": 10**12}})


# --- no Python call per evaluation where it can be avoided -------------------------------


@pytest.mark.parametrize(
    "rule",
    [
        "quantity('1Gi').isGreaterThan(quantity('1G'))",  # folded at compile time
        "self.ports.isSorted() && self.ports.sum() > 0 && self.ports.indexOf(443) == 1",  # plain CEL
        "self.name.find('[0-9]+') == '7'",  # cel-cpp's RE2
        "quantity(self.memory).isLessThan(quantity('64Gi'))",  # computed before evaluation
        "!format.dns1123Label().validate(self.name).hasValue()",
    ],
)
def test_kubernetes_library_rules_leave_no_python_call_in_the_cpp_program(rule):
    program = compile_(rule)
    assert program.python_calls == 0
    assert program.evaluate({"self": {"ports": [80, 443], "name": "model7", "memory": "1Gi"}}) is True


def test_library_calls_inside_loops_still_work_through_python():
    program = compile_("self.all(q, isQuantity(q))")
    assert program.python_calls == 1
    assert program.evaluate({"self": ["1Gi", "2"]}) is True
    assert program.evaluate({"self": ["1Gi", "two"]}) is False


def test_a_failing_selection_falls_back_to_cel_semantics():
    program = compile_("quantity(self.memory).isLessThan(quantity('64Gi'))")
    with pytest.raises(CelEvalError, match="no such key: memory"):
        program.evaluate({"self": {}})
    with pytest.raises(CelEvalError, match="quantities must match the regular expression"):
        program.evaluate({"self": {"memory": "lots"}})
    # short-circuit: the invalid quantity is never needed
    assert compile_("isQuantity(self.memory) && sign(quantity(self.memory)) > 0").evaluate({"self": {"memory": "x"}}) is False


# --- values across the boundary ---------------------------------------------------------


def test_library_values_come_out_as_python_objects():
    assert compile_("quantity('1k').add(24)").evaluate({}) == Quantity.from_key("1024")
    assert compile_("format.named('nope')").evaluate({}) == OptionalValue()


def test_timestamps_and_durations_inside_dynamic_values():
    stamp = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    program = compile_("self.at + self.every == timestamp('2026-01-02T01:00:00Z')")
    assert program.evaluate({"self": {"at": stamp, "every": datetime.timedelta(hours=1)}}) is True


def test_typed_declarations():
    program = ENGINE.compile_typed("at < timestamp('2030-01-01T00:00:00Z')", {"at": cel.Type.TIMESTAMP})
    assert program.evaluate({"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)}) is True
