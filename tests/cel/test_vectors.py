"""Every Kubernetes CEL library vector this package owns, replayed on the default engine.

A vector listed in ``KNOWN_GAPS`` must still fail (and says why); one that starts passing
fails the test so the list only ever shrinks.
"""

import pytest

from tests.cel import vectors

VECTORS = vectors.load()

_ARITY = "cel-cpp reports a call with an unknown arity as 'undeclared reference', cel-go as 'no matching overload'"
KNOWN_GAPS = {
    "lists-0037": "self is dyn here, so an empty list's sum() is 0, not duration('0') (schema typing gives it)",
    "optional-0049": "cel-cpp's ofNonZeroValue() treats 0001-01-01T00:00:00Z as a non-zero timestamp",
    "strings-0142": _ARITY,
    "strings-0151": _ARITY,
    "strings-0157": _ARITY,
    "strings-0158": _ARITY,
    "strings-0272": "cel-expr-python hands durations to Python as datetime.timedelta (microseconds): 2ns prints as 0s",
    "strings-0275": "map keys 1 and true collide in the Python dict cel-expr-python hands to string.format",
    "sets-0049": "variables are dyn by contract (they stand for schema-typed values), so [dynVar, 32] is not flagged",
    "ext_lists-0082": "Kubernetes answers with a Go panic text ('interface conversion: ...'); we say 'no such overload'",
}


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_kubernetes_vector(vector):
    problem = vectors.judge("cel-expr", vector)
    if vector["id"] in KNOWN_GAPS:
        assert problem is not None, f"{vector['id']} passes now: remove it from KNOWN_GAPS"
        pytest.xfail(KNOWN_GAPS[vector["id"]])
    assert problem is None, f"{vector['expression']}: {problem}"
