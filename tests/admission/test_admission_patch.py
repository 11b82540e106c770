"""webhook.admission.patch: minimal RFC 6902 patches, checked with the jsonpatch library."""

import copy

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission.patch import escape, make_patch


def roundtrip(old, new):
    patch = make_patch(old, new)
    assert jsonpatch.JsonPatch(patch).apply(copy.deepcopy(old)) == new
    return patch


def test_keys_with_slash_and_tilde_are_escaped():
    old = {"metadata": {"annotations": {}}}
    new = {"metadata": {"annotations": {"ai.deckhouse.io/is-default-class": "true", "a~b": "1", "~/": "2"}}}
    patch = roundtrip(old, new)
    assert sorted(op["path"] for op in patch) == [
        "/metadata/annotations/ai.deckhouse.io~1is-default-class",
        "/metadata/annotations/a~0b",
        "/metadata/annotations/~0~1",
    ]
    assert escape("~1") == "~01"  # ~ first, so a literal "~1" does not turn into "/"


def test_removing_and_replacing_escaped_keys():
    old = {"metadata": {"labels": {"app.kubernetes.io/name": "x", "keep": "1", "t~": "a"}}}
    new = {"metadata": {"labels": {"keep": "1", "t~": "b"}}}
    assert roundtrip(old, new) == [
        {"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1name"},
        {"op": "replace", "path": "/metadata/labels/t~0", "value": "b"},
    ]


def test_minimal_for_defaults():
    old = {"spec": {"url": "hf://x", "engine": "VLLM"}}
    new = {"spec": {"url": "hf://x", "engine": "VLLM", "minReplicas": 0}}
    assert roundtrip(old, new) == [{"op": "add", "path": "/spec/minReplicas", "value": 0}]
    assert make_patch(old, copy.deepcopy(old)) == []


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ([1, 2], [1, 3], [{"op": "replace", "path": "/1", "value": 3}]),
        ([1], [1, 2, 3], [{"op": "add", "path": "/-", "value": 2}, {"op": "add", "path": "/-", "value": 3}]),
        ([1, 2], [2], [{"op": "replace", "path": "", "value": [2]}]),
        ({"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
        ({"a": 1}, {"a": 1.5}, [{"op": "replace", "path": "/a", "value": 1.5}]),
        ({"a": {"b": 1}}, {"a": None}, [{"op": "replace", "path": "/a", "value": None}]),
    ],
)
def test_lists_and_types(old, new, expected):
    assert roundtrip(old, new) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(alphabet="ab/~", max_size=3), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(json_values, json_values)
def test_any_two_documents(old, new):
    roundtrip(old, new)
