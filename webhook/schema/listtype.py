"""``x-kubernetes-list-type`` set/map uniqueness (apiextensions' ``listtype.ValidateListSetsAndMaps``)."""

from __future__ import annotations

from typing import Any

from webhook.gofmt import go_json
from webhook.schema import fielderrors as fe
from webhook.schema.structural import Node

_UNSPECIFIED = object()


def _child(path: str | None, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate_list_types(node: Node, value: Any, path: str | None = None) -> list[fe.FieldError]:
    """Duplicate items of ``set`` lists and duplicate keys of ``map`` lists, anywhere in ``value``."""
    if not node.has_list_types or not isinstance(value, dict):
        return []
    errs: list[fe.FieldError] = []
    _walk_object(node, value, path, errs)
    return errs


def _walk(node: Node, value: Any, path: str | None, errs: list[fe.FieldError]) -> None:
    if not node.has_list_types:
        return
    if isinstance(value, list):
        _walk_list(node, value, path, errs)
    elif isinstance(value, dict):
        _walk_object(node, value, path, errs)


def _walk_object(node: Node, value: dict, path: str | None, errs: list[fe.FieldError]) -> None:
    if node.additional is not None and node.additional.has_list_types:
        for key in sorted(value):
            if key not in node.properties:
                _walk(node.additional, value[key], f"{path}[{key}]" if path else f"[{key}]", errs)
    for key, child in node.sorted_properties:
        if child.has_list_types and key in value:
            _walk(child, value[key], _child(path, key), errs)


def _walk_list(node: Node, value: list, path: str | None, errs: list[fe.FieldError]) -> None:
    if node.list_type == "set":
        for i in _non_unique(value):
            errs.append(fe.duplicate(f"{path}[{i}]", value[i]))
    elif node.list_type == "map":
        errs += _validate_map(node, value, path)
    if node.items is not None and node.items.has_list_types:
        for i, item in enumerate(value):
            _walk(node.items, item, f"{path}[{i}]", errs)


def _identity(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return ("compound", go_json(value))
    if value is _UNSPECIFIED:
        return ("unspecified",)
    return (type(value).__name__, value)


def _non_unique(values: list) -> list[int]:
    """Index of the second appearance of every repeated value."""
    if len(values) <= 1:
        return []
    seen: dict[Any, int] = {}
    out = []
    for i, value in enumerate(values):
        key = _identity(value)
        count = seen.get(key, 0)
        if count == 1:
            out.append(i)
        seen[key] = count + 1
    return out


def _validate_map(node: Node, value: list, path: str | None) -> list[fe.FieldError]:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [fe.invalid(f"{path}[{i}]", item, "must be an object for an array of list-type map")]
    if len(value) <= 1:
        return []
    keys = node.list_map_keys
    if len(keys) == 1:
        key_field = keys[0]
        key_values = [_UNSPECIFIED if item is None or key_field not in item else item[key_field] for item in value]
        return [fe.duplicate(f"{path}[{i}]", {} if key_values[i] is _UNSPECIFIED else {key_field: key_values[i]})
                for i in _non_unique(key_values)]
    key_maps = [{} if item is None else {k: item[k] for k in keys if k in item} for item in value]
    return [fe.duplicate(f"{path}[{i}]", key_maps[i]) for i in _non_unique(key_maps)]
