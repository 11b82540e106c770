"""What counts as "unchanged" for ratcheting (the apiserver's CorrelatedObject.CachedDeepEqual)."""

from webhook.schema.equality import OldItems, json_equal, unchanged
from webhook.schema.structural import ABSENT, compile_schema

SCHEMA = compile_schema({"type": "object", "properties": {
    "n": {"type": "number"},
    "rules": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
              "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}}}},
    "tags": {"type": "array", "items": {"type": "string"}},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}})


def test_go_deep_equal_tells_numbers_and_booleans_apart():
    assert json_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not json_equal(1, 1.0) and not json_equal(1, True) and not json_equal({"a": 1}, {"a": 1, "b": 2})


def test_map_lists_compare_by_key_other_lists_by_position():
    old = {"rules": [{"k": "a", "v": 1}, {"k": "b", "v": 2}], "tags": ["x", "y"]}
    assert unchanged(SCHEMA, {"rules": [{"k": "b", "v": 2}, {"k": "a", "v": 1}], "tags": ["x", "y"]}, old)
    assert not unchanged(SCHEMA, {"rules": old["rules"], "tags": ["y", "x"]}, old)
    assert not unchanged(SCHEMA, {"rules": [{"k": "a", "v": 1}, {"k": "b", "v": 3}], "tags": ["x", "y"]}, old)


def test_absent_old_and_schema_less_fields_never_count_as_unchanged():
    assert not unchanged(SCHEMA, {"n": 1}, ABSENT)
    assert not unchanged(SCHEMA, {"free": {"a": 1}}, {"free": {"a": 1}})
    assert unchanged(SCHEMA, {"free": {}}, {"free": {}})
    assert unchanged(SCHEMA, None, None) and not unchanged(SCHEMA, None, {})


def test_old_items_of_a_map_list_are_found_by_key():
    items = OldItems(SCHEMA.properties["rules"], [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
    assert items.get({"k": "b"}) == {"k": "b", "v": 2}
    assert items.get({"k": "c"}) is ABSENT and items.get("not an object") is ABSENT
    assert OldItems(SCHEMA.properties["tags"], ["x"]).get("x") is ABSENT  # atomic lists do not correlate
