"""Fuzzing CEL evaluation with arbitrary JSON values, on both engines.

A program either returns a plain value or raises ``CelError`` (with a message): never
another exception, never a crash of the runtime, whatever the data (numbers beyond int64,
unicode, deep nesting, huge strings and lists). How fast is ``bench/cel_speed.py --extremes``'s
question (no timing here: a timed unit test fails under load).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cel import CelCostExceeded, CelError, Evaluator

from tests.support.paths import REPO

from .strategies import json_values

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# What CRD rules and policies do with data: navigation, comparison, conversion, macros,
# string and list functions, the Kubernetes libraries.
EXPRESSIONS = [
    "self", "other", "self == other", "self != other", "size(self)", "string(self)", "int(self)", "double(self)",
    "type(self) == list", "self + other", "self[0]", "self['a']", "self.a.b.c", "has(self.a)", "has(self.a.b)",
    "self.all(x, x == x)", "self.exists(x, x == other)", "self.map(x, x)", "self.filter(x, x != null)",
    "self.exists_one(x, true)", "[self, other].exists(x, x == self)", "{'k': self}.k == self",
    "self.startsWith('a') && self.endsWith('z')", "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
    "self.contains(other)", "self.split(',')", "self.lowerAscii()", "self.size() <= 63", "self in other",
    "self < other", "self.all(k, self[k] == other)", "dyn(self) == dyn(other)", "self.sum()", "self.max()",
    "self.indexOf(other)", "self.isSorted()", "isQuantity(self)", "isURL(self)", "isIP(self)", "isCIDR(self)",
    "isSemver(self)", "self.join(',')", "self.reverse()", "self.distinct()",
]


def compiled(engine_name: str) -> list[Any]:
    engine, programs = Evaluator(engine_name).engine, []
    for expression in EXPRESSIONS:
        try:
            programs.append(engine.compile(expression, ["self", "other"]))
        except CelError:
            pass  # a function this engine does not offer: its compile error is the answer
    return programs


PROGRAMS = {name: compiled(name) for name in ("cel-expr", "cel-python")}


def test_most_expressions_compile():
    for programs in PROGRAMS.values():
        assert len(programs) >= len(EXPRESSIONS) * 3 // 4


def evaluate(program, activation: dict[str, Any]) -> None:
    try:
        program.evaluate(activation)
    except CelError as err:
        assert str(err), program.expression


@pytest.mark.parametrize("engine", ["cel-expr", "cel-python"])
@FUZZ
@given(self_value=json_values, other=json_values)
def test_any_values_give_a_value_or_a_cel_error(engine, self_value, other):
    for program in PROGRAMS[engine]:
        evaluate(program, {"self": self_value, "other": other})


# The extremes run in a child process: a crash of the C++ runtime (a stack overflow on deep
# nesting is a segfault, not an exception) must fail one test, not end the test session.
CHILD = """
import sys, orjson
from webhook.cel import CelError, Evaluator
from webhook.document_limits import MAX_DEPTH

def nested(depth):
    value = "x"
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value

EXTREMES = {
    "deep-1000": lambda: nested(1000),
    "deep-limit": lambda: nested(MAX_DEPTH),
    "string-3MiB": lambda: "a" * (3 * 1024 * 1024),
    "list-10000": lambda: ["x"] * 10_000,
    "map-10000": lambda: {f"k{i}": i for i in range(10_000)},
    "int-beyond-int64": lambda: 2**64,
    "negative-beyond-int64": lambda: -(2**63) - 1,
    "huge-float": lambda: 1.7976931348623157e308,
    "unicode": lambda: "\u202e\ufeff\U0010ffff" * 1000,
}
engine_name, value_name, expressions = sys.argv[1], sys.argv[2], orjson.loads(sys.argv[3])
engine, value = Evaluator(engine_name).engine, EXTREMES[value_name]()
for expression in expressions:
    print(orjson.dumps({"expression": expression}).decode(), flush=True)  # the last line names a crash
    try:
        program = engine.compile(expression, ["self", "other"])
    except CelError:
        continue
    try:
        program.evaluate({"self": value, "other": "x"})
        outcome = "value"
    except CelError as err:
        outcome = "cel-error" if str(err) else "empty cel-error"
    except BaseException as err:
        outcome = f"{type(err).__name__}: {str(err)[:100]}"
    print(orjson.dumps({"expression": expression, "outcome": outcome}).decode(), flush=True)
"""

# Fewer expressions for the extremes: each evaluation converts the whole value.
EXTREME_EXPRESSIONS = [
    "self", "size(self)", "self == other", "string(self)", "self[0]", "self['a']", "has(self.a)",
    "self.all(x, x == x)", "self.exists(x, x == other)", "self.map(x, x)", "self.filter(x, x != null)",
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')", "self.split(',')", "self.sum()", "isQuantity(self)",
    "self.join(',')",
]
# Values nested deeper than webhook.document_limits.MAX_DEPTH never reach CEL: every input edge
# refuses them (test_nesting.py), as the C++ runtime would overflow its stack on them.
EXTREMES = ["deep-1000", "deep-limit", "string-3MiB", "list-10000", "map-10000", "int-beyond-int64",
            "negative-beyond-int64", "huge-float", "unicode"]


KNOWN: dict[str, str] = {}  # name -> why it fails (strict xfail: a fix makes the marker fail)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True)) if n in KNOWN else n for n in EXTREMES
])
def test_extreme_values(name, engine="cel-expr"):
    done = subprocess.run([sys.executable, "-c", CHILD, engine, name, orjson.dumps(EXTREME_EXPRESSIONS).decode()],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, f"the runtime crashed (exit {done.returncode}) on {lines[-1]['expression']!r}"
    results = [line for line in lines if "outcome" in line]
    bad = [r for r in results if r["outcome"] not in ("value", "cel-error")]
    assert not bad, bad


# cel-cpp copies a comprehension's accumulator on every append (quadratic); the runtime
# bound charges the copies, so such a program over 10,000 elements is refused before it
# starts, where it used to run ~5 s into the iteration budget. Small inputs still evaluate.
ACCUMULATING = {
    "self.map(x, x + 'y')": lambda n: ["x"] * n,
    "self.filter(x, x != 'y')": lambda n: ["x"] * n,
    "self.map(x, x != 'y', x)": lambda n: ["x"] * n,
    "self.transformList(i, v, v)": lambda n: ["x"] * n,
    "self.transformMap(k, v, v + 1)": lambda n: {f"k{i}": i for i in range(n)},
    "self.map(k, k)": lambda n: {f"k{i}": i for i in range(n)},
}


@pytest.mark.parametrize("expression", ACCUMULATING)
def test_accumulating_macros_are_refused_before_they_start(expression):
    program = Evaluator("cel-expr").engine.compile(expression, ["self"])
    make = ACCUMULATING[expression]
    assert len(program.evaluate({"self": make(300)})) == 300
    with pytest.raises(CelCostExceeded):
        program.evaluate({"self": make(10_000)})
