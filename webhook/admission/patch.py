"""The smallest RFC 6902 JSON patch from one document to another.

Maps are compared key by key (``add``/``remove`` for keys on one side only, recursion
for keys on both); lists of equal length element by element, a list that only grew
gets its new items appended; anything else is one ``replace``. Keys are escaped as
RFC 6901 says (``~`` -> ``~0``, ``/`` -> ``~1``), so annotation keys such as
``ai.deckhouse.io/is-default-class`` patch correctly.
"""

from __future__ import annotations

from typing import Any


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    # Python says True == 1 == 1.0; JSON does not, so types must match all the way down
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def make_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    if _same(old, new):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in new.items():
            child = f"{path}/{escape(key)}"
            if key in old:
                ops += make_patch(old[key], value, child)
            else:
                ops.append({"op": "add", "path": child, "value": value})
        return ops
    if isinstance(old, list) and isinstance(new, list):
        if len(old) == len(new):
            return [op for i, (a, b) in enumerate(zip(old, new)) for op in make_patch(a, b, f"{path}/{i}")]
        if len(new) > len(old) and all(_same(a, b) for a, b in zip(old, new)):
            return [{"op": "add", "path": f"{path}/-", "value": v} for v in new[len(old):]]
    return [{"op": "replace", "path": path, "value": new}]
