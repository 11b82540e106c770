"""``x-kubernetes-list-type`` set/map uniqueness (apiextensions' ``listtype.ValidateListSetsAndMaps``).

Most objects have no duplicates, and for those the walk, which builds a path at every node it
passes, only answers "no errors". So a schema's list types also become one generated predicate
(as ``fastvalid`` does for the structural checks) that says only "surely no duplicates": sets
of distinct strings or integers, maps of objects with one key of distinct such values. Anything
else (nulls, mixed types, compound items, several keys) runs the walk, which writes the errors.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from webhook.gocompat.fmt import go_json
from webhook.schema import fielderrors as fe
from webhook.schema.codegen import NodeCodegen, surely
from webhook.schema.structural import Node

_UNSPECIFIED = object()


def _child(path: str | None, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate_list_types(node: Node, value: Any, path: str | None = None) -> list[fe.FieldError]:
    """Duplicate items of ``set`` lists and duplicate keys of ``map`` lists, anywhere in ``value``."""
    if not node.has_list_types or not isinstance(value, dict):
        return []
    if surely_unique(node)(value):
        return []
    errs: list[fe.FieldError] = []
    walk_object(node, value, path, errs)
    return errs


def _walk(node: Node, value: Any, path: str | None, errs: list[fe.FieldError]) -> None:
    if not node.has_list_types:
        return
    if isinstance(value, list):
        _walk_list(node, value, path, errs)
    elif isinstance(value, dict):
        walk_object(node, value, path, errs)


def walk_object(node: Node, value: dict, path: str | None, errs: list[fe.FieldError]) -> None:
    """Append to ``errs`` the list-type errors under an object node's value (the walk that
    ``surely_unique`` stands in for)."""
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


# -- the fast path: "surely no duplicates" as generated Python ------------------------------

def _distinct(values: list) -> bool:
    """Items all strings or all integers (where Python's equality is the walk's identity), none twice."""
    first = type(values[0])
    if first is not str and first is not int:
        return False
    for value in values:
        if type(value) is not first:
            return False
    return len(set(values)) == len(values)


def _distinct_keys(items: list, key: str) -> bool:
    """A map list's items all objects holding ``key``, its values distinct (``_distinct``)."""
    values = []
    for item in items:
        if type(item) is not dict or key not in item:
            return False
        values.append(item[key])
    return _distinct(values)


def _objects(items: list) -> bool:
    return all(type(item) is dict for item in items)


class _Codegen(NodeCodegen):
    def __init__(self) -> None:
        super().__init__({"_distinct": _distinct, "_distinct_keys": _distinct_keys, "_objects": _objects})

    def define(self, node: Node, name: str) -> list[str]:
        """The function for ``node``: what the walk checks there, False on the first doubt."""
        body = ["t = type(v)"]
        array = self.array(node)
        if array:
            body += ["if t is list:"] + ["    " + line for line in array]
        children = [(key, self.function(child)) for key, child in node.sorted_properties if child.has_list_types]
        additional = node.additional if node.additional is not None and node.additional.has_list_types else None
        if children or additional is not None:
            body.append("if t is dict:")
            for key, function in children:
                body += [f"    x = v.get({key!r})", f"    if x is not None and not {function}(x): return False"]
            if additional is not None:
                known = self.value(frozenset(node.properties))
                body += ["    for k, x in v.items():",
                         f"        if k not in {known} and not {self.function(additional)}(x): return False"]
        body.append("return True")
        return [f"def {name}(v):"] + ["    " + line for line in body]

    def array(self, node: Node) -> list[str]:
        out = []
        if node.list_type == "set":
            out.append("if len(v) > 1 and not _distinct(v): return False")
        elif node.list_type == "map":
            keys = node.list_map_keys
            out.append("if not _objects(v): return False")  # the walk's "must be an object"
            if len(keys) == 1:
                out.append(f"if len(v) > 1 and not _distinct_keys(v, {keys[0]!r}): return False")
            else:
                out.append("if len(v) > 1: return False")
        if node.items is not None and node.items.has_list_types:
            out += ["for x in v:", f"    if not {self.function(node.items)}(x): return False"]
        return out


def _never(value: Any) -> bool:
    return False


@lru_cache(maxsize=256)
def surely_unique(root: Node) -> Callable[[Any], bool]:
    """``root``'s predicate: True when ``validate_list_types(root, value)`` surely finds
    nothing; never True for a schema it cannot write (nested past Python's limits)."""
    try:
        return surely(_Codegen().build(root, "<list types fast path>"))
    except (RecursionError, SyntaxError, MemoryError):
        return _never
