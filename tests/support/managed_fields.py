"""Server-side apply and managedFields, as kube-apiserver keeps them, for a fake apiserver.

Faithful for what status writers do: fields are paths of map keys; a list of maps with a
``type`` key (``conditions``) is a list-map keyed by ``type`` (as CRDs declare it:
``x-kubernetes-list-type: map``, ``x-kubernetes-list-map-keys: [type]``), every other list is
atomic. What structured-merge-diff does, reduced to that:

* an **apply** by a manager owns exactly the fields it sends; a field it owned before and sends
  no more is removed, unless another manager owns it too; a field another manager owns with a
  different value is a conflict (409 "Apply failed with N conflicts"), unless forced, which moves
  the field to the applier; the same value makes both owners;
* an **update** (PUT, or a merge patch) gives its manager the fields whose values it changed,
  and takes them from the others.

managedFields entries are written as the apiserver writes them (``manager``, ``operation``,
``apiVersion``, ``time``, ``fieldsType: FieldsV1``, ``fieldsV1``, ``subresource``), so what a
test reads is what ``kubectl get -o yaml --show-managed-fields`` shows on a real cluster.
"""

from __future__ import annotations

import copy
import json
from typing import Any

Path = tuple  # ("status", "conditions", ("type", "Ready"), "status")
_MISSING = object()


def _keyed(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "type" in v for v in value)


def leaves(value: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Every owned field under ``value``: map keys recursively, list-map entries by key, the
    rest (scalars, atomic lists) as leaves."""
    if isinstance(value, dict) and value:
        found: dict[Path, Any] = {}
        for key, item in value.items():
            found.update(leaves(item, prefix + (key,)))
        return found
    if _keyed(value):
        found = {}
        for item in value:
            entry = prefix + (("type", item["type"]),)
            found[entry + ("type",)] = item["type"]
            for key, field in item.items():
                if key != "type":
                    found.update(leaves(field, entry + (key,)))
        return found
    return {prefix: value}


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        if isinstance(part, tuple):
            obj = next((item for item in obj if isinstance(item, dict) and item.get("type") == part[1]), _MISSING) \
                if isinstance(obj, list) else _MISSING
        else:
            obj = obj.get(part, _MISSING) if isinstance(obj, dict) else _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def _set(obj: dict, path: Path, value: Any) -> None:
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(part, tuple):
            item = next((it for it in obj if it.get("type") == part[1]), None)
            if item is None:
                item = {"type": part[1]}
                obj.append(item)
            obj = item
        else:
            if not isinstance(obj.get(part), (dict, list)):
                obj[part] = [] if isinstance(nxt, tuple) else {}
            obj = obj[part]
    last = path[-1]
    if isinstance(last, tuple):  # never: an entry's own path ends in a field
        raise ValueError(path)
    obj[last] = copy.deepcopy(value)


def _remove(obj: dict, path: Path) -> None:
    parent = _get(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    if last == "type" and len(path) > 1 and isinstance(path[-2], tuple):  # the entry itself goes
        holder = _get(obj, path[:-2])
        if isinstance(holder, list):
            holder[:] = [item for item in holder if item.get("type") != path[-2][1]]


def _prune(value: Any) -> Any:
    """Maps and list-map entries left empty by removals go too."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if not (isinstance(v, dict) and not _prune(v))}
    return value


def fields_v1(paths: set[Path]) -> dict:
    tree: dict = {}
    for path in sorted(paths, key=str):
        node = tree
        for part in path:
            key = f"k:{json.dumps({part[0]: part[1]}, separators=(',', ':'))}" if isinstance(part, tuple) else f"f:{part}"
            node = node.setdefault(key, {})
            if isinstance(part, tuple):
                node.setdefault(".", {})
    return tree


def paths_of(tree: dict, prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, sub in tree.items():
        if key == ".":
            continue
        if key.startswith("k:"):
            (name, value), = json.loads(key[2:]).items()
            part: Any = (name, value)
        else:
            part = key[2:]
        children = {k: v for k, v in sub.items() if k != "."}
        found |= paths_of(children, prefix + (part,)) if children else {prefix + (part,)}
    return found


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]):
        self.conflicts = conflicts
        shown = "\n".join(f'* {manager}: .{_dotted(path)}' for manager, path in conflicts)
        super().__init__(f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) != 1 else ''}: "
                         f"conflicts with {shown}")


def _dotted(path: Path) -> str:
    return ".".join(f'[type="{p[1]}"]' if isinstance(p, tuple) else p for p in path)


def _entries(obj: dict) -> list[dict]:
    return obj.setdefault("metadata", {}).setdefault("managedFields", [])


def owned(obj: dict, manager: str, subresource: str | None = None) -> set[Path]:
    return {p for e in _entries(obj) if e["manager"] == manager and e.get("subresource") == subresource
            for p in paths_of(e.get("fieldsV1") or {})}


def _owners(obj: dict) -> dict[tuple[str, str | None, str], set[Path]]:
    return {(e["manager"], e.get("subresource"), e["operation"]): paths_of(e.get("fieldsV1") or {})
            for e in _entries(obj)}


def _write_entries(obj: dict, owners: dict[tuple[str, str | None, str], set[Path]], api_version: str, now: str) -> None:
    kept = []
    for (manager, subresource, operation), paths in owners.items():
        if not paths:
            continue
        entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
                 "fieldsType": "FieldsV1", "fieldsV1": fields_v1(paths)}
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    obj["metadata"]["managedFields"] = kept


def apply(current: dict, applied: dict, manager: str, *, root: str, subresource: str | None, force: bool = False,
          now: str = "2026-01-01T00:00:00Z") -> dict:
    """``current`` after ``manager`` applies ``applied``'s ``root`` (e.g. ``status``); raises
    ``ApplyConflict``."""
    result = copy.deepcopy(current)
    owners = _owners(result)
    mine = (manager, subresource, "Apply")
    sent = {(root,) + p: v for p, v in leaves(applied.get(root) or {}).items()} if applied.get(root) else {}
    conflicts = [(m, p) for (m, _, _), paths in owners.items() if m != manager
                 for p in sent if p in paths and _get(result, p) != sent[p]]
    if conflicts and not force:
        raise ApplyConflict(sorted(conflicts, key=str))
    before = owners.get(mine, set())
    others = set().union(*(paths for key, paths in owners.items() if key != mine))
    for path in before - set(sent):
        if path not in others:
            _remove(result, path)
    for path, value in sent.items():
        _set(result, path, value)
    for key, paths in owners.items():
        if key != mine and force:
            owners[key] = paths - {p for _, p in conflicts}
    owners[mine] = set(sent)
    result[root] = _prune(result.get(root) or {})
    _write_entries(result, owners, applied.get("apiVersion", current.get("apiVersion", "")), now)
    return result


def update(current: dict, new: dict, manager: str, *, root: str, subresource: str | None,
           now: str = "2026-01-01T00:00:00Z") -> dict:
    """``new`` (a whole replacement of ``root``), with the fields whose values changed given to
    ``manager`` and removed fields owned by no one."""
    result = copy.deepcopy(new)
    result.setdefault("metadata", {})["managedFields"] = copy.deepcopy(_entries(copy.deepcopy(current)))
    owners = _owners(result)
    old_fields = {(root,) + p: v for p, v in leaves(current.get(root) or {}).items()} if current.get(root) else {}
    new_fields = {(root,) + p: v for p, v in leaves(new.get(root) or {}).items()} if new.get(root) else {}
    changed = {p for p, v in new_fields.items() if old_fields.get(p, _MISSING) != v}
    gone = set(old_fields) - set(new_fields)
    for key in owners:
        owners[key] = owners[key] - changed - gone
    mine = (manager, subresource, "Update")
    owners[mine] = owners.get(mine, set()) | changed
    _write_entries(result, owners, new.get("apiVersion", ""), now)
    return result
