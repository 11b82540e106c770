"""What decoding does to a custom resource: prune unknown fields, prune nulls, apply defaults.

Mirrors apiextensions-apiserver's ``pruning.PruneWithOptions``,
``defaulting.PruneNonNullableNullsWithoutDefaults``, ``objectmeta.CoerceWithOptions`` and
``defaulting.Default``. All functions mutate the object in place.
"""

from __future__ import annotations

from typing import Any

from webhook.schema.objectmeta import MetadataDecodeError, coerce_object_meta
from webhook.schema.structural import ABSENT, Node

_META_FIELDS = frozenset(("apiVersion", "kind", "metadata"))
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def copy_json(value: Any) -> Any:
    """Deep copy of decoded JSON, with integers outside int64 turned to floats as Go decodes them.

    Iterative: a request may nest values a thousand levels deep, past Python's recursion limit.
    """
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, target container, key in it)
    while stack:
        source, target, key = stack.pop()
        if isinstance(source, dict):
            copied: Any = dict.fromkeys(source)
            stack.extend((v, copied, k) for k, v in source.items())
        elif isinstance(source, list):
            copied = [None] * len(source)
            stack.extend((v, copied, i) for i, v in enumerate(source))
        elif type(source) is int and not _INT64_MIN <= source <= _INT64_MAX:
            copied = float(source)
        else:
            copied = source
        target[key] = copied
    return root[0]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(value: Any, node: Node | None, *, root: bool = False, path: str = "", out: list[str] | None = None
          ) -> list[str]:
    """Remove fields the schema does not know; returns their paths, sorted."""
    unknown: list[str] = [] if out is None else out
    _prune(value, node, root, path, unknown)
    if out is None:
        unknown.sort()
    return unknown


def _prune(value: Any, node: Node | None, embedded: bool, path: str, unknown: list[str]) -> None:
    if node is not None and node.preserve_unknown:
        _skip_prune(value, node, embedded or node.embedded, path, unknown)
        return
    if isinstance(value, dict):
        if node is None:
            unknown.extend(_join(path, k) for k in value)
            value.clear()
            return
        embedded = embedded or node.embedded
        props, additional = node.properties, node.additional
        for key in list(value):
            if embedded and key in _META_FIELDS:
                continue
            child = props.get(key)
            if child is not None:
                _prune(value[key], child, False, _join(path, key), unknown)
            elif additional is not None:
                _prune(value[key], additional, False, _join(path, key), unknown)
            else:
                if key not in _META_FIELDS or path:
                    unknown.append(_join(path, key))
                del value[key]
    elif isinstance(value, list):
        items = node.items if node is not None else None
        for i, item in enumerate(value):
            _prune(item, items, False, f"{path}[{i}]", unknown)


def _skip_prune(value: Any, node: Node | None, embedded: bool, path: str, unknown: list[str]) -> None:
    if node is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if embedded and key in _META_FIELDS:
                continue
            child = node.properties.get(key)
            if child is not None:
                _prune(item, child, False, _join(path, key), unknown)
            elif node.additional is not None:
                _prune(item, node.additional, False, _join(path, key), unknown)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _skip_prune(item, node.items, False, f"{path}[{i}]", unknown)


def prune_nulls(value: Any, node: Node | None) -> None:
    """Drop ``null`` where the schema is neither nullable nor defaulted (defaults come later)."""
    if node is None:
        return
    if isinstance(value, dict):
        props, additional = node.properties, node.additional
        for key in list(value):
            child = props.get(key, additional)
            if child is None:
                continue
            item = value[key]
            if item is None:
                if not child.nullable and child.default is ABSENT:
                    del value[key]
            else:
                prune_nulls(item, child)
    elif isinstance(value, list):
        items = node.items
        if items is not None:
            for item in value:
                if item is not None:
                    prune_nulls(item, items)


def apply_defaults(value: Any, node: Node | None) -> None:
    """Fill defaults; a default is itself defaulted further down (nested defaults materialise)."""
    if node is None:
        return
    if isinstance(value, dict):
        if node.has_defaults:
            for key, child in node.sorted_properties:
                if child.default is not ABSENT:
                    current = value.get(key, ABSENT)
                    if current is ABSENT or (current is None and not child.nullable):
                        value[key] = copy_json(child.default)
            for key, item in value.items():
                child = node.properties.get(key, node.additional)
                if child is not None and child.has_defaults:
                    apply_defaults(item, child)
    elif isinstance(value, list):
        items = node.items
        if items is not None and items.has_defaults:
            for item in value:
                apply_defaults(item, items)


class EmbeddedMetadataError(ValueError):
    """Malformed ``metadata`` of an embedded resource: the request cannot be decoded."""

    def __init__(self, path: str, value: Any, message: str):
        super().__init__(message)
        self.path, self.value, self.message = path, value, message


def coerce_embedded(value: Any, node: Node | None, path: str, unknown: list[str]) -> None:
    """Round-trip ``metadata`` of embedded resources through ObjectMeta (unknown fields dropped)."""
    if node is None or not node.has_embedded:
        return
    if isinstance(value, dict):
        if node.embedded and "metadata" in value:
            try:
                meta, paths = coerce_object_meta(value["metadata"], path)
            except MetadataDecodeError as exc:
                raise EmbeddedMetadataError(_join(path, "metadata"), value["metadata"], str(exc)) from None
            unknown.extend(paths)
            if meta is None:
                del value["metadata"]
            else:
                value["metadata"] = meta
        for key, item in value.items():
            child = node.properties.get(key, node.additional)
            if child is not None and child.has_embedded:
                coerce_embedded(item, child, _join(path, key), unknown)
    elif isinstance(value, list) and node.items is not None:
        for i, item in enumerate(value):
            coerce_embedded(item, node.items, f"{path}[{i}]", unknown)
