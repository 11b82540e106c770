"""Strict JSON equality (Go's ``reflect.DeepEqual`` on decoded JSON), enum membership as kube-openapi
compares it, and list item correlation."""

from __future__ import annotations

from typing import Any

from webhook.schema.structural import ABSENT, Node


def json_equal(a: Any, b: Any) -> bool:
    """Equality that, like Go, tells ``1`` from ``1.0`` and ``true``."""
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = b.get(key, ABSENT)
            if other is ABSENT or not json_equal(value, other):
                return False
        return True
    if ta is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a == b


def enum_matches(value: Any, candidate: Any) -> bool:
    """``reflect.Value.Convert`` then ``DeepEqual``, as kube-openapi compares enum members."""
    if isinstance(candidate, bool):
        return value is candidate
    if isinstance(candidate, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value) == candidate
    if isinstance(candidate, str):
        if isinstance(value, str):
            return value == candidate
        if isinstance(value, int) and not isinstance(value, bool):  # Go converts an int to a rune string
            try:
                return chr(value) == candidate if 0 <= value <= 0x10FFFF and not 0xD800 <= value <= 0xDFFF \
                    else candidate == "\ufffd"
            except (ValueError, OverflowError):
                return candidate == "\ufffd"
        return False
    if isinstance(candidate, int):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == candidate
    return json_equal(value, candidate)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("l", tuple(_hashable(v) for v in value))
    return (type(value).__name__, value)


class OldItems:
    """Finds the old item of a ``map`` list that has the same keys as a new one.

    Only map lists correlate: items of sets and atomic lists have no old counterpart
    (the apiserver calls them the "uncorrelatable portion" of the schema).
    """

    __slots__ = ("_index", "_keys")

    def __init__(self, node: Node, old: Any):
        self._keys = node.list_map_keys
        self._index: dict[Any, Any] | None = None
        if not isinstance(old, list) or node.list_type != "map" or not self._keys:
            return
        index: dict[Any, Any] = {}
        for item in old:
            key = self._key(item)
            if key is not None and key not in index:
                index[key] = item
        self._index = index

    def _key(self, item: Any) -> Any:
        if not isinstance(item, dict):
            return None
        return tuple(_hashable(item.get(k, ABSENT)) if k in item else ("absent",) for k in self._keys)

    def get(self, item: Any) -> Any:
        if self._index is None:
            return ABSENT
        key = self._key(item)
        return ABSENT if key is None else self._index.get(key, ABSENT)


def unchanged(node: Node | None, new: Any, old: Any) -> bool:
    """Whether a value counts as unchanged for ratcheting (``CorrelatedObject.CachedDeepEqual``).

    Like Go's DeepEqual, except that map-list items are compared by key (reordering is no
    change) and a field with no schema is not correlatable (its object never counts as unchanged).
    """
    if old is ABSENT:
        return False
    if new is None or old is None:
        return new is None and old is None
    if isinstance(new, dict):
        if not isinstance(old, dict) or len(new) != len(old) or node is None:
            return False
        props, additional = node.properties, node.additional
        for key, value in new.items():
            if key not in old:
                return False
            child = props.get(key, additional)
            if child is None or not unchanged(child, value, old[key]):
                return False
        return True
    if isinstance(new, list):
        if not isinstance(old, list) or len(new) != len(old):
            return False
        if node is not None and node.list_type == "map" and node.list_map_keys:
            items = OldItems(node, old)
            for item in new:
                match = items.get(item)
                if match is ABSENT or not unchanged(node.items, item, match):
                    return False
            return True
        return json_equal(new, old)
    return json_equal(new, old)
