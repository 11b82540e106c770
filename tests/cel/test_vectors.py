"""Every Kubernetes CEL library vector this package owns, replayed on both engines.

A vector listed in an engine's ``KNOWN_GAPS`` must still fail there (and says why); one that
starts passing fails the test, so the lists only ever shrink.
"""

import pytest

from tests.cel import vectors

VECTORS = vectors.load()

_ARITY = "cel-cpp reports a call with an unknown arity as 'undeclared reference', cel-go as 'no matching overload'"
_UNTYPED_SUM = "self is dyn here, so an empty list's sum() is 0, not duration('0') (schema typing gives it)"
_DYN_VARIABLE = "variables are dyn by contract (they stand for schema-typed values), so [dynVar, 32] is not flagged"
_GO_PANIC = "Kubernetes answers with a Go panic text ('interface conversion: ...'); we say 'no such overload'"
# both engines type-check with cel-expr, so a checker difference is a gap of both
_CHECKER_GAPS = {
    "lists-0037": _UNTYPED_SUM,
    "strings-0142": _ARITY,
    "strings-0151": _ARITY,
    "strings-0157": _ARITY,
    "strings-0158": _ARITY,
    "sets-0049": _DYN_VARIABLE,
    "ext_lists-0082": _GO_PANIC,
}
KNOWN_GAPS = {
    "cel-expr": {
        **_CHECKER_GAPS,
        "optional-0049": "cel-cpp's ofNonZeroValue() treats 0001-01-01T00:00:00Z as a non-zero timestamp",
        "strings-0272": "cel-expr-python hands durations to Python as datetime.timedelta (microseconds): 2ns prints as 0s",
        "strings-0275": "map keys 1 and true collide in the Python dict cel-expr-python hands to string.format",
    },
    "cel-python": {
        **_CHECKER_GAPS,
        "strings-0272": "celpy's durations are datetime.timedelta (microseconds): duration('2ns') is 0s",
        "strings-0275": "map keys 1 and true collide in celpy's map (a Python dict): the literal fails",
    },
}


@pytest.mark.parametrize("engine", list(KNOWN_GAPS))
@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_kubernetes_vector(engine, vector):
    problem = vectors.judge(engine, vector)
    gaps = KNOWN_GAPS[engine]
    if vector["id"] in gaps:
        assert problem is not None, f"{vector['id']} passes on {engine} now: remove it from KNOWN_GAPS"
        pytest.xfail(gaps[vector["id"]])
    assert problem is None, f"{vector['expression']}: {problem}"
