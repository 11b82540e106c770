"""What decoding does to a custom resource: prune unknown fields and nulls, apply defaults.

Mirrors apiextensions-apiserver's ``pruning.PruneWithOptions``,
``defaulting.PruneNonNullableNullsWithoutDefaults``, ``objectmeta.CoerceWithOptions`` and
``defaulting.Default``. All functions mutate the object in place.
"""

from __future__ import annotations

from typing import Any

import orjson

from webhook.schema.objectmeta import MetadataDecodeError, coerce_object_meta
from webhook.schema.structural import ABSENT, Node

_META_FIELDS = frozenset(("apiVersion", "kind", "metadata"))
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def copy_json(value: Any) -> Any:
    """Deep copy of decoded JSON as Go would hold it (keys strings, integers beyond int64 floats)."""
    try:  # the fast path; it refuses integers beyond 53 bits, non-string keys and non-JSON values
        return orjson.loads(orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER))
    except (TypeError, orjson.JSONEncodeError):
        return _copy_slow(value)


def _copy_slow(value: Any) -> Any:
    # Iterative: values nested past orjson's 255 levels land here, and may go past Python's
    # recursion limit too (the server lets up to 1021 levels through).
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, target container, key in it)
    while stack:
        source, target, key = stack.pop()
        if isinstance(source, dict):
            copied: Any = {}
            for k, v in source.items():
                k = k if isinstance(k, str) else _key_text(k)
                copied[k] = None
                stack.append((v, copied, k))
        elif isinstance(source, list):
            copied = [None] * len(source)
            stack.extend((v, copied, i) for i, v in enumerate(source))
        elif type(source) is int and not _INT64_MIN <= source <= _INT64_MAX:
            copied = float(source)
        elif not isinstance(source, (str, int, float, bool, type(None))):
            copied = str(source)  # dates and other YAML scalars arrive as their text
        else:
            copied = source
        target[key] = copied
    return root[0]


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(value: Any, node: Node | None, *, root: bool = False, path: str = "", out: list[str] | None = None,
          keep_nulls: bool = False) -> list[str]:
    """Remove fields the schema does not know, and ``null`` where the schema is neither nullable
    nor defaulted (``PruneWithOptions`` then ``PruneNonNullableNullsWithoutDefaults``, in one walk).
    ``keep_nulls``: the nulls stay (an object as admission mutations leave it: the apiserver
    validates it before the storage's decoding prunes, so a null there is a type error).

    Returns the paths of the unknown fields, sorted.
    """
    unknown: list[str] = [] if out is None else out
    _prune(value, node, root, path, unknown, keep_nulls)
    if out is None:
        unknown.sort()
    return unknown


def _drops_null(child: Node) -> bool:
    return not child.nullable and child.default is ABSENT


def _prune(value: Any, node: Node | None, embedded: bool, path: str, unknown: list[str],
           keep_nulls: bool = False) -> None:
    if node is not None and node.preserve_unknown:
        _skip_prune(value, node, embedded or node.embedded, path, unknown, keep_nulls)
        return
    if isinstance(value, dict):
        if node is None:
            unknown.extend(_join(path, k) for k in value)
            value.clear()
            return
        embedded = embedded or node.embedded
        props, additional = node.properties, node.additional
        for key in list(value):
            child = props.get(key)
            if embedded and key in _META_FIELDS:
                if child is not None and value[key] is None and _drops_null(child) and not keep_nulls:
                    del value[key]
                continue
            if child is None:
                child = additional
                if child is None:
                    if key not in _META_FIELDS or path:
                        unknown.append(_join(path, key))
                    del value[key]
                    continue
            item = value[key]
            if item is None:
                if _drops_null(child) and not keep_nulls:
                    del value[key]
            elif isinstance(item, (dict, list)):
                _prune(item, child, False, f"{path}.{key}" if path else key, unknown, keep_nulls)
    elif isinstance(value, list):
        items = node.items if node is not None else None
        for i, item in enumerate(value):
            if isinstance(item, (dict, list)):
                _prune(item, items, False, f"{path}[{i}]", unknown, keep_nulls)


def _skip_prune(value: Any, node: Node | None, embedded: bool, path: str, unknown: list[str],
                keep_nulls: bool = False) -> None:
    if node is None:
        return
    if isinstance(value, dict):
        for key in list(value):
            child = node.properties.get(key, node.additional)
            if child is None:
                continue
            item = value[key]
            if item is None:
                if _drops_null(child) and not keep_nulls:
                    del value[key]
            elif not (embedded and key in _META_FIELDS):
                _prune(item, child, False, _join(path, key), unknown, keep_nulls)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _skip_prune(item, node.items, False, f"{path}[{i}]", unknown, keep_nulls)


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
