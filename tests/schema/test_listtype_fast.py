"""The generated "surely no duplicates" predicate of list types (``listtype.surely_unique``)
against the walk: whenever it says True, the walk reports nothing; it must say True for the
valid example manifests (else it saves nothing) and False wherever the walk reports."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.schema import CRDRegistry
from webhook.schema.listtype import walk_object, surely_unique
from webhook.schema.structural import compile_schema
from tests.support.paths import MANIFESTS
from tests.support.cel import EVALUATOR

REGISTRY = CRDRegistry.shipped(evaluator=EVALUATOR)


def _walk(node, value) -> list:
    errs: list = []
    if isinstance(value, dict):
        walk_object(node, value, None, errs)
    return errs


def _agree(node, value) -> bool:
    passes = surely_unique(node)(value)
    if passes:
        assert _walk(node, value) == [], value
    return passes


def test_valid_example_manifests_pass_without_the_walk():
    checked = 0
    for path in sorted((MANIFESTS / "valid").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            served = isinstance(obj, dict) and REGISTRY.served(obj.get("apiVersion"), obj.get("kind"))
            if served and served.schema.has_list_types:
                prepared, _ = REGISTRY.prepare("CREATE", copy.deepcopy(obj), namespace=obj["metadata"].get("namespace"))
                assert _agree(served.schema, prepared), obj["metadata"]["name"]
                checked += 1
    assert checked >= 5


SCHEMA = compile_schema({
    "type": "object",
    "properties": {
        "names": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "numbers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "pairs": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                  "items": {"type": "object"}},
        "nested": {"type": "array", "items": {"type": "array", "x-kubernetes-list-type": "set",
                                              "items": {"type": "string"}}},
        "byName": {"type": "object", "additionalProperties": {
            "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}},
    },
})

_scalar = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(-1, 1, width=32) | st.sampled_from(["a", "b", ""])
_item = _scalar | st.dictionaries(st.sampled_from(["name", "a", "b"]), _scalar, max_size=3) | st.lists(_scalar, max_size=2)
_list = st.lists(_item, max_size=4) | _item


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.fixed_dictionaries({}, optional={
    "names": _list, "numbers": _list, "ports": _list, "pairs": _list,
    "nested": st.lists(_list, max_size=3) | _item,
    "byName": st.dictionaries(st.sampled_from(["x", "y", "names"]), _list, max_size=2) | _item,
}))
def test_generated_values(value):
    _agree(SCHEMA, value)


def test_duplicates_are_left_to_the_walk():
    for value in ({"names": ["a", "a"]}, {"numbers": [1, 2, 1]}, {"ports": [{"name": "x"}, {"name": "x"}]},
                  {"nested": [["a"], ["b", "b"]]}, {"byName": {"x": ["a", "a"]}}, {"ports": ["x"]}):
        assert not surely_unique(SCHEMA)(value) and _walk(SCHEMA, value), value
    assert surely_unique(SCHEMA)({"names": ["a", "b"], "numbers": [1, 2], "ports": [{"name": "x"}, {"name": "y"}],
                                  "nested": [["a", "b"], []], "byName": {"x": ["a"], "y": ["a", "b"]}})
