"""The cel-python fallback: the syntax celpy cannot parse, the runtime bound, and agreement
with the default engine where the library vectors do not reach (both replay every vector in
``test_vectors.py``)."""

import subprocess
import sys

import pytest

from tests.cel.vectors import engine_for

from webhook import cli
from webhook.cli import ENGINE_VARIABLE
from webhook.cel import CelCompileError, CelCostExceeded, CelEvalError, Evaluator
from webhook.cel.celpy import evaluator
from webhook.cel.celpy.rewrite import celpy_source
from tests.support.paths import CASES, POLICY_SUITES, REPO

ENGINES = ["cel-expr", "cel-python"]


@pytest.mark.parametrize("source, rewritten", [
    ("self.?a.?b", '__opt_select__(__opt_select__(self, "a"), "b")'),
    ("self.a.?b.c", '__opt_select__(self.a, "b").c'),
    ("m[?'k'].orValue('')", "__opt_index__(m, 'k').orValue('')"),
    ("['a', ?x, 'c']", "__opt_list__(['a', x, 'c'], [1])"),
    ("{?'k': o, 'j': 1}", "__opt_map__(['k', o, 'j', 1], [0])"),
    ("l.all(i, v, l[?(i + 1)].hasValue())", "l.all(i, v, __opt_index__(l, (i + 1)).hasValue())"),
    ("x.?a.optMap(v, [?v.?b])", '__opt_select__(x, "a").optMap(v, __opt_list__([__opt_select__(v, "b")], [0]))'),
    ("'''l1\nl2''' == s", '"l1\\nl2" == s'),
    ("a ? b : c", "a ? b : c"),  # nothing to do
    ("'?' + '.?x'", "'?' + '.?x'"),  # inside string literals
])
def test_optional_syntax_is_spelled_as_calls(source, rewritten):
    assert celpy_source(source) == rewritten


def outcome(engine, expression, activation):
    try:
        program = engine_for(engine).compile(expression, activation.keys())
    except CelCompileError as err:
        return "compile", str(err)
    try:
        return "value", program.evaluate(activation)
    except CelCostExceeded as err:
        return "cost", str(err)
    except CelEvalError as err:
        return "error", str(err)


# (expression, activation): what neither engine may answer differently
AGREEING = [
    ("self.all(x, true)", {"self": list(range(9_999))}),                 # 9,999 iterations: allowed
    ("self.all(x, true) && self.all(x, true)", {"self": list(range(5_000))}),  # 10,000: over the bound
    ("self.all(x, other.all(y, true))", {"self": list(range(900)), "other": list(range(900))}),  # measured first
    ("self.exists(x, x == 0)", {"self": list(range(20_000))}),           # stops at the first element
    ("self.all(x, x == x)", {"self": "a" * (3 * 1024 * 1024)}),          # a string is no range
    ("lists.range(self).all(x, true)", {"self": 2_000_000}),
    ("[0, 1].exists(x, 1 / x == 1)", {}),                                # the error does not decide
    ("[1, 0].all(x, 1 / x == 1)", {}),
    ("[0, 2].all(x, 1 / x == 1)", {}),                                   # false decides
    ("[1, 0].exists_one(x, 1 / x == 1)", {}),
    ("[1, 0].map(x, 1 / x)", {}),
    ("[1, 2, 3].map(x, x % 2 == 1, x * 10)", {}),
    ("{'a': 1, 'b': 2}.all(k, v, k != 'c' && v > 0)", {}),
    ("{'a': 1, 'b': 2}.transformMap(k, v, v > 1, k + string(v))", {}),
    ("[1, 1].transformMapEntry(i, v, {v: i})", {}),
    ("self.?a.?b.orValue('none')", {"self": {"a": {"c": 1}}}),
    ("self.?a.b", {"self": {"a": {"b": 2}}}),
    ("self.a.?b", {"self": {}}),
    ("self[?3].hasValue() || self[?0] == optional.of(1)", {"self": [1]}),
    ("[?optional.none(), ?optional.of(self[0]), 3]", {"self": [1]}),
    ("{?'a': optional.none(), ?'b': optional.of(self)}", {"self": 1}),
    ("self.m[1.0]", {"self": {"m": {1: "one"}}}),
    ("dyn(1) == 1.0 && dyn(2u) < 2.5 && [1, 2.0] == dyn([1.0, 2])", {}),
    ("self / 0", {"self": 1}),
    ("self % 0", {"self": 1}),
    ("self + 9223372036854775807", {"self": 1}),
    ("self / 2.0", {"self": 1}),
    ("self[3]", {"self": [1]}),
    ("self.missing", {"self": {}}),
    ("duration(self) == duration('0s')", {"self": "0"}),
    ("duration(self)", {"self": "x"}),
    ("type(ip('10.0.0.1')) == net.IP && type(self) == string && string == type(self)", {"self": "x"}),
    ("[type(1u) == uint, type(null) == null_type, type([]) == list, type(self) == int]", {"self": "x"}),
    ("'x'.contains('x') && sets.contains([1, 2], [2])", {}),
    ("has(self.a.b)", {"self": {}}),                                     # the operand's error
    ("has(self.a) && !has(self.b)", {"self": {"a": 1}}),
    ("string(true) + string(100.0) + string(1234567.0) + string(0.00001) + string(-7)", {}),
    ("string(self)", {"self": None}),
    ("int(self)", {"self": "0x10"}),
    ("int(self)", {"self": None}),
    ("size(self)", {"self": None}),
    ("double(self)", {"self": True}),
    ("uint(self)", {"self": -1.0}),
    ("self.join(',')", {"self": {"a": "b"}}),
    ("self.lowerAscii()", {"self": {"a": "b"}}),
    ("self.reverse()", {"self": "ab"}),
    ("dyn(1.5) + dyn(self)", {"self": True}),
    ("dyn('a') < dyn(self)", {"self": 1}),
    ("1 / self == 1 ? 1 : 2", {"self": 0}),
    ("1 / self == 1 || 1 / self == 2", {"self": 0}),
    ("1 / self == 1 || true", {"self": 0}),
    ("[1, 2].exists(x, [3].exists(y, x + y == 5)) && [1].all(x, [2].all(x, x == 2))", {}),
]


@pytest.mark.parametrize("expression, activation", AGREEING, ids=[e for e, _ in AGREEING])
def test_the_fallback_answers_as_the_default_engine(expression, activation):
    expected = outcome("cel-expr", expression, activation)
    assert outcome("cel-python", expression, activation) == expected


def test_conversions_to_string_print_as_cel_go_does():
    """Where the default engine prints as cel-cpp does (``.500Z``, ``1.500s``), the fallback
    prints as Kubernetes' cel-go: RFC 3339 with the shortest fraction, seconds likewise."""
    program = engine_for("cel-python").compile(
        "[string(timestamp('2020-01-01T00:00:00.5Z')), string(duration('1.5s')), string(duration('90m'))]", [])
    assert program.evaluate({}) == ["2020-01-01T00:00:00.5Z", "1.5s", "5400s"]


@pytest.mark.parametrize("expression", [
    "self.all(x, true)", "self.exists(x, false)", "self.exists_one(x, false)", "self.map(x, x * 2).size() > 0",
    "self.filter(x, x > 0).size() > 0", "self.all(i, v, true)", "self.transformList(i, v, v).size() > 0",
    "self.transformMap(i, v, v).size() > 0", "self.transformMapEntry(i, v, {i: v}).size() > 0",
    "self.sortBy(x, -x)[0] == 0",
])
def test_every_macro_spends_the_iteration_bound(expression, monkeypatch):
    monkeypatch.setattr(evaluator, "ITERATION_BUDGET", 100)  # the real one takes celpy seconds
    program = engine_for("cel-python").compile(expression, ["self"])
    assert program.evaluate({"self": list(range(99))}) is not None
    with pytest.raises(CelCostExceeded):
        program.evaluate({"self": list(range(100))})


def test_the_recorded_cases_and_shipped_policy_suites_pass_on_the_fallback():
    """``infergate --cel-engine cel-python`` gives the real apiserver's answers too."""
    for suites, options in ((CASES, ["--crd-only"]), (POLICY_SUITES, [])):
        done = subprocess.run([sys.executable, "-m", "webhook", "--cel-engine", "cel-python", "test", "-q", *options,
                               str(suites)], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert done.stdout.strip().endswith(" passed, 0 failed"), done.stdout[-2000:]


def test_the_engine_option_runs_a_command_on_that_backend(monkeypatch, capsys):
    monkeypatch.setenv(ENGINE_VARIABLE, "cel-expr")  # the flag wins over the environment
    assert cli.main(["--cel-engine", "cel-python", "test", "-q", "--crd-only", str(CASES / "gateway-inference.yaml")]) == 0
    with pytest.raises(SystemExit):
        cli.main(["--cel-engine", "cel-cpp", "test", "x"])
    assert "invalid choice: 'cel-cpp'" in capsys.readouterr().err
