"""Every Kubernetes CEL library vector this package owns, replayed on both engines.

A vector listed in an engine's ``KNOWN_GAPS`` must still fail there (and says why); one that
starts passing fails the test, so the lists only ever shrink.
"""

import pytest

from tests.cel import vectors

VECTORS = vectors.load()

# as CRD rules (vectors with a schema), both engines share webhook.cel.crd's gaps (none now:
# a rule is charged cel-go's actual cost, webhook.cel.cost.count)
_CRD_RULE_GAPS: dict[str, str] = {}
KNOWN_GAPS = {
    "cel-expr": {
        **_CRD_RULE_GAPS,
    },
    "cel-python": {
        **_CRD_RULE_GAPS,
        # celpy's own value types, which this backend evaluates with: not fixable around it
        "strings-0272": "celpy's durations are datetime.timedelta subclasses (microseconds): duration('2ns') is "
                        "0s before string.format sees it",
        "strings-0275": "celpy's maps are Python dicts, where the keys 1 and true are one key: the literal "
                        "{1: ..., true: ...} fails before string.format sees it",
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
