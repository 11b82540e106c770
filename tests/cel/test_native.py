"""The native fast path (``webhook.cel.native``) against cel-expr, the authority.

Whenever the native program gives a value, it must be cel-expr's value, of the same CEL type;
it may give up (``NotNative``) whenever it likes. Checked on every evaluation the recorded
cases, the shipped policy suites, the example manifests and the Kubernetes library vectors
make, on a corpus of expressions over generated JSON, and on the semantics most easily got
wrong (bool is not int, Go's integer division, overflow, short-circuits).
"""

from __future__ import annotations

import copy
import math
import types

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cel import CelCostExceeded, CelError
from webhook.cel.engine.cel_expr import CelExprProgram
from webhook.cel.limits import ITERATION_BUDGET as MAX_ITERATIONS
from webhook.cel.native.runtime import NotNative
from webhook.offline.recorded_suites import load_suite
from webhook.offline.policy_suites import build_request, load_policy_suite
from webhook.offline.policy_suite_format import PolicySuite

from tests.cel import vectors
from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
from tests.support.paths import CASES, POLICY_SUITES
from tests.support.cel import EVALUATOR
from webhook.cel import Evaluator

ENGINE = Evaluator("cel-expr").engine


def _same(native, exact) -> bool:
    """Equal values of the same CEL type (Python's ``True == 1`` and ``1 == 1.0`` are not)."""
    if type(native) is not type(exact):
        return False
    if isinstance(native, list):
        return len(native) == len(exact) and all(_same(a, b) for a, b in zip(native, exact))
    if isinstance(native, dict):
        return native.keys() == exact.keys() and all(_same(native[k], exact[k]) for k in native)
    if isinstance(native, float) and math.isnan(native):
        return math.isnan(exact)
    return native == exact


def _agrees(program: CelExprProgram, activation) -> str | None:
    """None when the native answer (if any) is cel-expr's; else what differs."""
    try:
        value = program.native(activation)
    except NotNative:
        return None
    except CelCostExceeded:  # its own count: the bound measured before cel-expr must refuse too
        try:
            program.evaluate(activation)
        except CelCostExceeded:
            return None
        except CelError:
            pass
        return f"{program.expression!r}: native over its cost limit, cel-expr within its bound"
    try:
        exact = program.evaluate(activation)
    except CelCostExceeded:
        return None  # the bound is checked before either path runs
    except CelError as err:
        return f"{program.expression!r}: native {value!r}, cel-expr error {err}"
    if not _same(value, exact):
        return f"{program.expression!r}: native {value!r}, cel-expr {exact!r}"
    return None


def _compile(source: str, variables=("self",)) -> CelExprProgram:
    program = ENGINE.compile(source, list(variables))
    assert program.native is not None, source
    return program


# --- every evaluation of the real workloads --------------------------------------------------


@pytest.fixture
def recorded(monkeypatch):
    """Every (program, activation) evaluated while the test runs (copied: values are compared later)."""
    seen: dict[tuple[str, str], tuple[CelExprProgram, dict]] = {}
    original = CelExprProgram.evaluate

    def recording(self, activation, **kwargs):
        if self.native is not None:
            key = (self.expression, repr(sorted(activation.items(), key=lambda kv: kv[0])))
            if key not in seen:
                seen[key] = (self, copy.deepcopy(dict(activation)))
        return original(self, activation, **kwargs)

    monkeypatch.setattr(CelExprProgram, "evaluate", recording)
    return seen


def _check_all(seen) -> int:
    """Compare every recorded evaluation; the number the native path answered."""
    problems = [p for program, activation in seen.values() if (p := _agrees(program, activation)) is not None]
    assert not problems, "\n".join(problems[:20])
    return sum(1 for program, activation in seen.values() if _answers(program, activation))


def _answers(program: CelExprProgram, activation) -> bool:
    try:
        program.native(activation)
    except (NotNative, CelCostExceeded):
        return False
    return True


def test_recorded_cases(recorded):
    for suite in (load_suite(CASES / name, EVALUATOR) for name in OBJECT_SUITES):
        for case in suite.cases:
            recorded_outcome(case.suite.registry, case.data)
    assert len(recorded) >= 100
    assert _check_all(recorded) >= 200  # evaluations the native path answered (not all gave up)


def test_shipped_policy_suites_and_examples(recorded):
    for suite_file in sorted(POLICY_SUITES.glob("*.yaml")):
        data = yaml.safe_load(suite_file.read_text())
        model = PolicySuite.model_validate(data)
        suite = load_policy_suite(suite_file, data, EVALUATOR)
        for case in model.cases:
            suite.chain.run(build_request(suite.registry, model, case))
    assert len(recorded) >= 100
    # nearly every evaluation answered natively (not all gave up); a batch reading only
    # request fields is evaluated once per their values, so fewer evaluations are seen
    assert _check_all(recorded) >= 0.95 * len(recorded)


def test_kubernetes_library_vectors(recorded):
    for vector in vectors.load():
        vectors.outcome("cel-expr", vector)
    assert len(recorded) >= 200
    assert _check_all(recorded) >= 200


# --- a corpus of expressions over generated JSON ---------------------------------------------

CORPUS = [
    "self.a == self.b", "self.a != self.b", "self.a == 1", "self.a == 1.0", "self.a == true", "self.a == null",
    "self.a == 'x'", "self.a == [dyn(1), dyn('x')]", "self.a == {'k': 1}", "self.a < self.b", "self.a <= 3",
    "self.a > self.b", "self.a >= 2.5", "self.a + self.b", "self.a - self.b", "self.a * self.b",
    "self.a / self.b", "self.a % self.b", "-self.a", "!self.a", "self.a && self.b", "self.a || self.b",
    "self.a ? self.b : self.c", "self.a > 1 && has(self.b)", "!(self.a == 'x') || self.b in ['y', 'z']",
    "!has(self.a) && self.b.startsWith('x')", "self.a < 2 ? self.b == 1 : self.c != 2", "has(self.a)", "has(self.a.b)", "self.a.b", "self.a[0]", "self.a['k']",
    "self.a[self.b]", "size(self.a)", "self.a.size()", "self.a in self.b", "'x' in self.a", "1 in self.a",
    "string(self.a)", "int(self.a)", "dyn(self.a)", "self.a.startsWith('x')", "self.a.endsWith(self.b)",
    "self.a.contains('y')", "self.a.matches('^[a-z]+$')", "self.a.join(',')", "self.a.join()",
    "self.a.split(',')", "self.a.split(',', 2)", "self.a.lowerAscii()", "self.a.upperAscii()", "self.a.sort()",
    "self.a.trim()", "int(self.a.b)", "type(self.a) == string", "type(self.a) == int", "type(self.a) == double",
    "type(self.a) == map", "type(self.a) == list", "type(self.a) == bool", "type(self.a) == uint",
    "type(self.a) == type(self.b)", "type(self.a) == type(null)", "self.a.sum()", "self.a.min()", "self.a.max()",
    "self.a.all(x, x > 0)", "self.a.exists(x, x == 'x')", "self.a.exists_one(x, x == 1)",
    "self.a.map(x, x + 1)", "self.a.filter(x, x != null)", "self.a.map(x, x > 1, x * 2)",
    "self.a.all(k, v, v == self.b)", "self.a.exists(i, v, i == 0)", "self.a.all(x, self.b.exists(y, y == x))",
    "self.?a.orValue(1)", "self.?a.?b.orValue('d')", "self.?a.hasValue()", "self.a[?0].orValue(null)",
    "optional.of(self.a).value()", "optional.none().or(self.?a).orValue(0)", "[self.a, ?self.?b]",
    "{'k': self.a, ?'o': self.?b}", "{self.a: 1}", "[self.a].map(v, [v, v])[0]",
    "[self.a].filter(x, x > 1)", "[self.a].all(x, x > 1)", "[self.a].exists(x, x == 1)",
    "[self.a].map(x, x > 0, x)", "self.?a.?b.hasValue()", "self.a.?b.orValue(self.c)",
    "!has(self.a) || self.a.b.startsWith('x')", "self.a == 1 || self.b", "self.b && self.a == 1",
    "self.a.all(x, x.startsWith('a')) && size(self.a) < 3",
    "self.a + [self.b]", "self.a + 'x'", "[1, 2].map(x, x * self.a)", "self.a > 9223372036854775807 - self.b",
    # one-item bindings, as the policy batches write variables
    "[self.a].map(v, [self.b].map(w, v == w)[0])[0]", "[self.a].map(v, v.map(x, x + 1))[0]",
    "[self.a].map(v, [v].map(w, w.exists(x, x == v)))", "[self.a].map(v, [v, self.b])[0]",
]

_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(alphabet="xyaz,AB", max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abck"), children, max_size=3),
    max_leaves=8,
)
_PROGRAMS = [p for p in (ENGINE.compile(source, ["self"]) for source in CORPUS) if p.native is not None]


def test_the_corpus_is_native():
    # (string() of a dyn value is rewritten with branches for timestamps and durations, which
    # are outside the subset: those branches ask cel-expr when taken)
    assert {p.expression for p in _PROGRAMS} == set(CORPUS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.dictionaries(st.sampled_from("abc"), _json, max_size=3))
def test_generated_values_on_the_corpus(value):
    problems = [p for program in _PROGRAMS if (p := _agrees(program, {"self": value})) is not None]
    assert not problems, "\n".join(problems)


# --- semantics that are easy to get wrong ----------------------------------------------------


@pytest.mark.parametrize(("source", "self_value", "expected"), [
    ("self.a == 1", {"a": True}, False),            # bool is not int
    ("self.a == true", {"a": 1}, False),
    ("self.a == 1", {"a": 1.0}, True),              # numbers compare by value across int and double
    ("self.a == self.b", {"a": [1], "b": [1.0]}, True),
    ("self.a == self.b", {"a": [True], "b": [1]}, False),
    ("self.a == 'x'", {"a": ["x"]}, False),
    ("self.a / self.b", {"a": -7, "b": 2}, -3),     # Go truncates toward zero
    ("self.a % self.b", {"a": -7, "b": 2}, -1),     # ... and the remainder takes the dividend's sign
    ("true || self.a.missing", {"a": {}}, True),     # the right side is never read
    ("self.a > 0 || self.a.missing", {"a": 1}, True),
    ("self.a.split(',', 2)", {"a": "x,y,z"}, ["x", "y,z"]),
    ("self.a.map(x, x * 2)", {"a": [1, 2]}, [2, 4]),
    ("self.a.filter(x, x > 1)", {"a": [1, 2, 3]}, [2, 3]),
    ("self.a.exists_one(i, v, i == v)", {"a": [0, 5]}, True),
    ("self.a.exists(k, v, k == 'b' && v == 2)", {"a": {"a": 1, "b": 2}}, True),
    ("'y' in self.a", {"a": {"y": 1}}, True),
])
def test_semantics(source, self_value, expected):
    program = _compile(source)
    value = program.native({"self": self_value})
    assert _same(value, expected)
    assert _same(program.evaluate({"self": self_value}), expected)


@pytest.mark.parametrize(("source", "self_value"), [
    ("self.a + 1", {"a": 2**63 - 1}),               # overflow: cel-expr reports it
    ("self.a / 0", {"a": 1}),
    ("self.a.b", {"a": {}}),                        # no such key
    ("self.a.b", {"a": "ab"}),                      # a selection on a string
    ("self.a[3]", {"a": [1]}),
    ("self.a + self.b", {"a": 1, "b": 1.0}),        # no mixed arithmetic
    ("self.a.sort()", {"a": [1, "x"]}),
    ("self.a && true", {"a": 1}),                   # a non-bool operand
])
def test_errors_are_left_to_cel_expr(source, self_value):
    program = _compile(source)
    with pytest.raises(NotNative):
        program.native({"self": self_value})
    with pytest.raises(CelError):
        program.evaluate({"self": self_value})


def test_has_on_a_string_is_left_to_cel_expr():
    program = _compile("has(self.a.b)")
    with pytest.raises(NotNative):  # not a substring test: cel-go's answer for a scalar's field
        program.native({"self": {"a": "b"}})
    assert program.evaluate({"self": {"a": "b"}}) is False


def test_int_of_a_padded_string_is_left_to_cel_expr():
    with pytest.raises(NotNative):  # Go's strconv.ParseInt refuses " 1"
        _compile("int(self.a)").native({"self": {"a": " 1"}})


def test_iterations_past_cel_cpps_limit_are_left_to_cel_expr():
    program = _compile("self.a.all(x, x >= 0)")
    assert program.native({"self": {"a": list(range(MAX_ITERATIONS))}}) is True
    with pytest.raises(NotNative):
        program.native({"self": {"a": list(range(MAX_ITERATIONS + 1))}})


def test_values_outside_plain_json_are_left_to_cel_expr():
    import datetime
    program = _compile("self.a == self.b")
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    with pytest.raises(NotNative):
        program.native({"self": {"a": now, "b": now}})


def test_values_nested_past_the_stack_are_left_to_cel_expr():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    for source in ("self.a", "self.a == self.b"):
        with pytest.raises(NotNative):
            _compile(source).native({"self": {"a": deep, "b": deep}})


def test_programs_outside_the_subset_have_no_native_form():
    for source in ("quantity(self.a).isGreaterThan(quantity('1'))", "self.a.matches(self.b)", "1u == self.a",
                   "b'x' == self.a", "duration(self.a) > duration('1s')", "self.a.replace('a', 'b')"):
        assert ENGINE.compile(source, ["self"]).native is None, source


def test_a_branch_outside_the_subset_asks_cel_expr_only_when_taken():
    """A conditional whose branch the subset cannot express stays native for the other
    branch; the untranslated one gives up when taken, and cel-expr answers."""
    program = _compile("self.a > 1 ? (self.l.exists(x, x == 2) ? 'two' : 'none') : self.l.map(x, x.replace('a', 'b'))[0]")
    assert program.native({"self": {"a": 2, "l": [1, 2]}}) == "two"
    with pytest.raises(NotNative):
        program.native({"self": {"a": 0, "l": ["a"]}})
    assert program.evaluate({"self": {"a": 0, "l": ["a"]}}) == "b"
    # the loop begun in the untranslated branch leaves nothing behind: the other loop still runs
    nested = _compile("self.l.exists(y, y == 2 ? true : self.l.map(x, x.replace('a', 'b')) == [])")
    assert nested.native({"self": {"l": [2, 1]}}) is True
    with pytest.raises(NotNative):
        nested.native({"self": {"l": [1]}})


def test_evaluate_answers_natively_only_what_the_caller_accepts(monkeypatch):
    program = _compile("self.a > 1")
    calls, original = [], CelExprProgram.cel_expr_route
    monkeypatch.setattr(CelExprProgram, "cel_expr_route", lambda *args: calls.append(args) or original(*args))
    assert program.evaluate({"self": {"a": 2}}, accept=lambda v: v is True) is True
    assert calls == []  # answered natively
    assert program.evaluate({"self": {"a": 0}}, accept=lambda v: v is True) is False
    assert len(calls) == 1  # not accepted: cel-expr answered


def test_native_bounds_its_own_work(monkeypatch):
    """Nested loops: the native program counts its iterations' work and stops past the cost
    limit, so an evaluation it answers needs no measure of the activation first."""
    program = _compile("self.a.all(x, self.a.all(y, x + y >= 0))")
    data = {"self": {"a": list(range(60))}}
    assert program.cost.needs_measure
    with pytest.raises(CelCostExceeded):
        program.native(data, cost_limit=1000)
    import webhook.cel.engine.cel_expr as cel_expr

    def no_measure(*values):
        raise AssertionError("measured")

    monkeypatch.setattr(cel_expr, "measure", no_measure)
    assert program.evaluate(data, accept=lambda value: value is True) is True
    with pytest.raises(CelCostExceeded):
        program.evaluate(data, cost_limit=1000, accept=lambda value: value is True)
    with pytest.raises(AssertionError, match="measured"):  # an answer it cannot give: cel-expr, measured
        program.evaluate(data, accept=lambda value: value is False)


def test_a_run_makes_no_function_and_shares_no_variable():
    """Each loop's function is defined once, beside the program, and given the variables it
    reads: a run creates no function object and no cell, and nested loops still see their
    enclosing loops' variables (the inner ``all`` reads ``x`` and ``n``)."""
    program = _compile("[self.a.size()].map(n, self.a.all(x, self.a.all(y, x + y + n >= 0)))[0]")
    function = program.native.function
    assert not function.__code__.co_cellvars and not function.__code__.co_freevars
    assert not [c for c in function.__code__.co_consts if isinstance(c, types.CodeType)]
    generated = [v for v in function.__globals__.values()
                 if isinstance(v, types.FunctionType) and v.__code__.co_filename == "<cel native>"]
    assert len(generated) == 3  # the program and its two loops
    assert not any(f.__code__.co_freevars or f.__code__.co_cellvars for f in generated)
    assert program.native({"self": {"a": [1, 2, 3]}}) is True
    assert program.native({"self": {"a": [-5, 2, 3]}}) is False


def test_a_binding_is_an_expression_counted_as_its_loop():
    """``[x].map(v, e)[0]`` (a policy batch's variable) is written inline, no function, list or
    index of its own, and counts its one iteration as the loop did: the limit still trips."""
    program = _compile("[self.a].map(v, [v.size()].map(n, v.all(x, v.all(y, x + y + n >= 0)))[0])[0]")
    assert program.native.source.count("def ") == 3  # the program and its two loops
    data = {"self": {"a": list(range(60))}}
    assert program.native(data) is True
    with pytest.raises(CelCostExceeded):
        program.native(data, cost_limit=1000)
    assert program.evaluate(data, accept=lambda value: value is True) is True
