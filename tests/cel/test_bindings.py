"""Shared ``Bindings`` (one conversion of each value for many evaluations) and renamed
variables (``compile(..., rename=...)``): the same answers, errors and cost bound as
evaluating each program on its own data."""

from __future__ import annotations

import datetime

import pytest

from webhook.cel import CelCostExceeded, CelEvalError
from webhook.cel.engine.cel_expr import Bindings
from webhook.cel import Evaluator

ENGINE = Evaluator("cel-expr").engine
NAMES = ("object", "params", "lookups")


def test_renamed_variables_read_their_new_names():
    program = ENGINE.compile("params.limit > size(lookups.items)", NAMES, {"params": "__p1", "lookups": "__l1"})
    values = {"__p1": {"limit": 3}, "__l1": {"items": [1, 2]}, "params": {"limit": 0}, "lookups": {"items": []}}
    assert program.evaluate(ENGINE.bind(values)) is True
    assert program.evaluate(values) is True
    assert program.reads == {"__p1", "__l1"}


def test_a_comprehension_variable_of_the_same_name_is_not_renamed():
    program = ENGINE.compile("params.all(params, params > 0) && params[0] == 1", NAMES, {"params": "__p1"})
    assert program.evaluate(ENGINE.bind({"__p1": [1, 2]})) is True
    assert program.evaluate(ENGINE.bind({"__p1": [1, -2]})) is False
    assert program.reads == {"__p1"}


def test_programs_sharing_bindings_answer_as_on_their_own_data():
    values = {"object": {"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"n": [1, 2, 3]}}, "params": None}
    bindings = ENGINE.bind(values)
    for source in ["object.metadata.name", "object.spec.n.map(i, i * 2)", "object.metadata.labels",
                   "params == null", "object.spec.n.exists(i, object.spec.n.exists(j, i + j == 5))",
                   "object.metadata.name.matches('^[a-z]$')"]:
        program = ENGINE.compile(source, NAMES)
        assert program.evaluate(bindings) == program.evaluate(values), source


def test_errors_are_the_same_on_bindings():
    values = {"object": {"spec": {}}}
    for source in ["object.spec.missing", "lookups.x", "object.spec.n.matches('a')"]:
        program = ENGINE.compile(source, NAMES)
        with pytest.raises(CelEvalError) as on_bindings:
            program.evaluate(ENGINE.bind(values))
        with pytest.raises(CelEvalError) as on_data:
            program.evaluate(values)
        assert str(on_bindings.value) == str(on_data.value)


def test_timestamps_in_bindings():
    stamp = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    program = ENGINE.compile("object.at < timestamp('2027-01-01T00:00:00Z')", NAMES)
    assert program.evaluate(ENGINE.bind({"object": {"at": stamp}})) is True


def test_the_cost_bound_measures_only_the_values_a_program_reads():
    nested = ENGINE.compile("object.all(a, object.all(b, object.all(c, a + b + c >= 0)))", NAMES)
    big = list(range(200))  # 200^3 iterations: over the per-call limit
    small = ENGINE.bind({"object": [1, 2, 3], "lookups": big})
    assert nested.evaluate(small) is True
    with pytest.raises(CelCostExceeded):
        nested.evaluate(ENGINE.bind({"object": big}))


def test_bindings_convert_each_value_once():
    """The activation is built on first use and kept: a value changed in place afterwards is
    not seen (values are never changed once bound: new values make new bindings)."""
    obj = {"n": 1}
    bindings = Bindings({"object": obj})
    program = ENGINE.compile("object.n", NAMES)
    assert program.evaluate(bindings) == 1
    obj["n"] = 2
    assert program.evaluate(bindings) == 1
    assert program.evaluate(Bindings({"object": obj})) == 2
