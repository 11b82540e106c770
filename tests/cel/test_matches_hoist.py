"""``matches`` with a constant pattern on selected data is computed before the evaluation
(``optimize.hoist_matches``): the same answers and errors as cel-cpp's own ``matches``."""

from __future__ import annotations

import pytest

from webhook.cel import CelEvalError
from webhook.cel import Evaluator
from webhook.cel.library.regex import matches
from cel_expr_python import cel

ENGINE = Evaluator("cel-expr").engine

DNS = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LITERAL = "'" + DNS.replace("\\", "\\\\") + "'"  # as a CEL string literal
RULE = f"self.name.matches({DNS_LITERAL})"


def _program(source: str):
    return ENGINE.compile_typed(source, {"self": cel.Type.DYN})


def test_the_call_is_hoisted_and_leaves_no_python_call():
    program = _program(RULE)
    assert program.hoisted_calls and program.python_calls == 0


@pytest.mark.parametrize("name, expected", [
    ("abc-def.ghi", True), ("-abc", False), ("ABC", False), ("a" * 300, True), ("é", False), ("", False),
])
def test_hoisted_answers_equal_cel_cpps(name, expected):
    hoisted = _program(RULE).evaluate({"self": {"name": name}})
    plain = _program(f"dyn(self).name.matches(dyn({DNS_LITERAL}))").evaluate({"self": {"name": name}})
    assert hoisted is plain is expected


def test_partial_match_in_utf8_as_re2():
    assert matches("xé-y", "é") and matches("é", "^.$") and not matches("a\nb", "^b")


@pytest.mark.parametrize("value, error", [({}, "no such key: name"), ({"name": 1}, "no such overload")])
def test_missing_or_mistyped_data_fails_as_in_cel(value, error):
    with pytest.raises(CelEvalError, match=error):
        _program(RULE).evaluate({"self": value})
