"""The engine contract, for both backends."""

from datetime import datetime, timedelta, timezone

import pytest

from webhook.cel import CelCompileError, CelEvalError, Evaluator

ENGINES = ["cel-expr", "cel-python"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return Evaluator(request.param).engine


def test_evaluates_with_dynamic_variables(engine):
    program = engine.compile("self.replicas + 1 <= limit", ["self", "limit"])
    assert program.evaluate({"self": {"replicas": 3}, "limit": 4}) is True
    assert program.evaluate({"self": {"replicas": 4}, "limit": 4}) is False


def test_plain_values_out(engine):
    program = engine.compile("{'a': [dyn(1), dyn(2.5), dyn('x'), dyn(b'y'), dyn(null), dyn(true)]}", [])
    assert program.evaluate({}) == {"a": [1, 2.5, "x", b"y", None, True]}


def test_compile_error(engine):
    with pytest.raises(CelCompileError):
        engine.compile("self.a +", ["self"])


def test_eval_error(engine):
    program = engine.compile("1 / self.zero", ["self"])
    with pytest.raises(CelEvalError, match="divide by zero|division by zero"):
        program.evaluate({"self": {"zero": 0}})


def test_compile_is_cached(engine):
    assert engine.compile("1 + 1", ["a", "b"]) is engine.compile("1 + 1", ["b", "a"])


def test_unknown_engine_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown CEL engine"):
        Evaluator("nope").engine


def test_an_evaluator_builds_the_backend_it_names():
    assert Evaluator("cel-python").engine.name == "cel-python"
    assert Evaluator().engine.name == "cel-expr"


@pytest.mark.parametrize("expression,variables,expected", [
    ("duration('1h2m3s4ms').getMilliseconds()", {}, 3723004),  # cel-go: the whole duration, not 4
    ("duration('-1.5s').getMilliseconds()", {}, -1500),
    ("d.getMilliseconds()", {"d": timedelta(seconds=90061, milliseconds=2)}, 90061002),  # dyn: by type at runtime
    ("t.getMilliseconds()", {"t": datetime(2011, 8, 18, 19, 3, 37, 10000, tzinfo=timezone.utc)}, 10),
    ("[duration('1s'), duration('2ms')].map(x, x.getMilliseconds())", {}, [1000, 2]),
])
def test_get_milliseconds_as_cel_go(engine, expression, variables, expected):
    assert engine.compile(expression, list(variables)).evaluate(variables) == expected


@pytest.mark.parametrize("expression,variables,expected", [
    ("string(timestamp('2011-08-18T18:03:37.01Z'))", {}, "2011-08-18T18:03:37.01Z"),  # Go's RFC3339Nano
    ("string(timestamp('2011-08-18T18:03:30.000Z'))", {}, "2011-08-18T18:03:30Z"),
    ("string(duration('1.010s'))", {}, "1.01s"),  # FormatFloat(seconds, 'f', -1) + "s"
    ("string(duration('-1.5s'))", {}, "-1.5s"),
    ("string(duration('1h'))", {}, "3600s"),
    ("string(d) + ' ' + string(n) + ' ' + string(s)", {"d": timedelta(milliseconds=2500), "n": 10, "s": "1.50s"},
     "2.5s 10 1.50s"),  # dyn: only timestamps and durations are re-spelled
])
def test_time_strings_as_cel_go_on_the_default_engine(expression, variables, expected):
    assert Evaluator("cel-expr").engine.compile(expression, list(variables)).evaluate(variables) == expected
