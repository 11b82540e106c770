"""Lookup arguments read in Python (``webhook.policy.arguments``): for every shape it reads,
the same value as CEL, and ``UNREAD`` (ask CEL) wherever CEL answers an error."""

from __future__ import annotations

import itertools

import pytest

from webhook.cel import CelError, get_engine
from webhook.policy import CEL_VARIABLES
from webhook.policy.arguments import UNREAD, reader

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
    program = get_engine().compile(source, CEL_VARIABLES)
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
