"""Lookup arguments read in Python (``webhook.policy.arguments``): for every shape it reads,
the same value as CEL, and ``UNREAD`` (ask CEL) wherever CEL answers an error."""

from __future__ import annotations

import itertools

import pytest

from webhook.cel import CelError
from webhook.policy import CEL_VARIABLES
from webhook.policy.arguments import UNREAD, reader
from tests.support.cel import EVALUATOR

SOURCES = [
    "'platform'",
    "request.namespace",
    "object.spec.?poolRef.?name.orValue('')",
    "object.spec.?inferenceServiceClassName.orValue('')",
    "object.spec.model.ref.?namespace.orValue(request.namespace)",
    "object.spec.model.ref.?kind.orValue('') == 'Model' ? object.spec.model.ref.name : ''",
    "'ClusterModel' != object.spec.model.ref.?kind.orValue('') ? '' : object.spec.model.ref.name",
    "params.?selector.orValue(null)",
    "object.metadata.name",
]

OBJECTS = [
    {"metadata": {"name": "a"}, "spec": {}},
    {"metadata": {"name": "a"}, "spec": {"poolRef": {"name": "pool"}, "inferenceServiceClassName": "gpu"}},
    {"metadata": {"name": "a"}, "spec": {"poolRef": "not-a-map", "inferenceServiceClassName": 3}},
    {"metadata": {"name": "a"}, "spec": {"poolRef": {"name": None}}},
    {"metadata": {"name": "a"}, "spec": {"model": {"ref": {"kind": "Model", "name": "m", "namespace": "x"}}}},
    {"metadata": {"name": "a"}, "spec": {"model": {"ref": {"kind": "ClusterModel", "name": "c"}}}},
    {"metadata": {"name": "a"}, "spec": {"model": {"ref": {"kind": 7}}}},
    {"metadata": {"name": "a"}, "spec": {"model": {"ref": {"kind": "Model"}}}},  # no name: CEL's error
    {"metadata": {"name": "a"}, "spec": {"model": "hf://x"}},
    {"metadata": {}, "spec": None},
    {"spec": {}},
]
PARAMS = [None, {"selector": "app=x"}, {"other": 1}, "text"]


@pytest.mark.parametrize("source", SOURCES)
def test_python_reads_what_cel_reads(source):
    read = reader(source)
    assert read is not None, source
    program = EVALUATOR.engine.compile(source, CEL_VARIABLES)
    answered = 0
    for obj, params in itertools.product(OBJECTS, PARAMS):
        activation = {"object": obj, "request": {"namespace": "team"}, "params": params}
        value = read(activation)
        try:
            expected = program.evaluate(activation)
        except CelError:
            assert value is UNREAD, (source, obj, params)
            continue
        if value is not UNREAD:
            assert value == expected and type(value) is type(expected), (source, obj, params)
            answered += 1
    assert answered  # the usual inputs are read in Python


@pytest.mark.parametrize("source", [
    "lookups.cls.metadata.name", "object.spec.name + '-x'", "size(object.spec)", "object.spec.?a.b.orValue('')",
    "variables.a", "object.spec.?a", "[object.spec.name][0]", "object.spec['name']",
])
def test_other_shapes_are_left_to_cel(source):
    assert reader(source) is None


def _lookup_subjects() -> list[dict]:
    """Orders and models whose lookups find something, nothing, or must be asked of CEL."""
    subjects = []
    for spec in ({"inferenceServiceClassName": "a30-shared", "model": {"src": "ai-models", "ref": {
                     "kind": "Model", "name": "qwen3-8b"}}},
                 {"inferenceServiceClassName": "nope", "model": {"src": "ai-models", "ref": {
                     "kind": "ClusterModel", "name": "llama-3-1-70b"}}},
                 {"model": {"src": "ai-models", "ref": {"kind": "Model", "name": "m", "namespace": "other"}}},
                 {"model": {"src": "ai-models", "ref": {"kind": "Model"}}},  # no name: CEL's error
                 {"inferenceServiceClassName": 3, "poolRef": {"name": "vllm-mistral-7b"}},
                 {"poolRef": "not-a-map"}, {}):
        subjects.append({"metadata": {"name": "x", "namespace": "ml-team"}, "spec": spec})
    return subjects


def test_review_lookups_find_what_the_lookups_evaluated_by_cel_find():
    """``arguments.review_lookups`` (one generated function per policy) against each lookup's
    arguments evaluated by CEL, for every shipped policy with lookups that read the review."""
    from webhook.policy import PolicyInput
    from webhook.policy.messages import RuleError
    from tests.support.policy import example_state, shipped_policies

    state = example_state()
    checked = 0
    for policy in shipped_policies().policies:
        review = getattr(policy, "batches", None) and policy.batches.review_lookups
        if not review:
            continue
        read = policy.batches.review_reader()
        assert read is not None, policy.name  # the shipped policies' arguments have the usual shapes
        for obj in _lookup_subjects():
            for namespace in ("ml-team", "team-a"):
                request = {"namespace": namespace, "operation": "CREATE", "kind": {"group": "", "kind": ""}}
                inp = PolicyInput(request, obj, None, None, state)
                params, kept, _ = policy.batches.of_state(state)
                found = read({"object": obj, "oldObject": None, "request": request, "namespaceObject": None,
                              "params": params}, state, kept)
                activation = {"object": obj, "oldObject": None, "request": request, "namespaceObject": None,
                              "params": params, "lookups": {}, "variables": {}}
                try:
                    expected = {lookup.name: kept[lookup.name] if lookup.name in kept else
                                policy.exact.lookup(lookup, exprs, activation, state, None)
                                for lookup, exprs in policy.exact.lookups}
                except RuleError:  # an argument CEL answers with an error: never read in Python
                    assert found is UNREAD, (policy.name, obj)
                    continue
                if found is not UNREAD:
                    assert list(found) == list(expected), policy.name
                    assert all(found[k] is expected[k] or found[k] == expected[k] for k in expected), (policy.name, obj)
                    assert policy.batches.lookups_of_review(inp, params, kept) == found
                    checked += 1
    assert checked >= 20
