"""The CEL batch's generated selection (``celbatch.compile_select``) against the generic walk
(``celbatch.select_walk``): the same value, or both refusing the data, for every object and old
object the recorded cases hand to a batch plan, and for edits of the example manifests."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.offline.recorded_suites import load_suite
from webhook.schema import CRDRegistry
from webhook.schema.celbatch import BatchPlan, InvalidData, select_walk

from tests.schema.helpers import json_paths
from tests.schema.helpers import OBJECT_SUITES, recorded_outcome
from tests.support.paths import CASES, MANIFESTS
from tests.support.cel import EVALUATOR

REGISTRY = CRDRegistry.shipped(evaluator=EVALUATOR)


def _either(function, value):
    """("value", the selection) or ("refused", None): either refusal sends the object to the walk."""
    try:
        return "value", function(value)
    except (InvalidData, KeyError, TypeError, AttributeError, ValueError):
        return "refused", None


def _agree(plan: BatchPlan, value) -> None:
    generated, walked = _either(plan.select, value), _either(lambda v: select_walk(plan.root, v), value)
    assert generated == walked, value


def test_recorded_cases(monkeypatch):
    seen = []
    original = BatchPlan.holds

    def recording(self, obj, old, *routes):
        seen.append((self, copy.deepcopy(obj), copy.deepcopy(old)))
        return original(self, obj, old, *routes)

    monkeypatch.setattr(BatchPlan, "holds", recording)
    for suite in (load_suite(CASES / name, EVALUATOR) for name in OBJECT_SUITES):
        for case in suite.cases:
            recorded_outcome(case.suite.registry, case.data)
    assert len(seen) >= 100
    for plan, obj, old in seen:
        _agree(plan, obj)
        if plan.reads_old:
            _agree(plan, old)


def _plans_and_objects():
    found = []
    for path in sorted(MANIFESTS.glob("*/*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            served = isinstance(obj, dict) and REGISTRY.served(obj.get("apiVersion"), obj.get("kind"))
            if served and served.cel is not None:
                for update in (False, True):
                    plan = served.cel.plan(update)
                    if plan is not None:
                        found.append((plan, obj))
    return found


PLANS = _plans_and_objects()
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, width=32) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_edits_of_the_examples(data):
    plan, obj = data.draw(st.sampled_from(PLANS))
    obj = copy.deepcopy(obj)
    path = data.draw(st.sampled_from([p for p in json_paths(obj) if p]))
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = data.draw(_json)
    _agree(plan, obj)
