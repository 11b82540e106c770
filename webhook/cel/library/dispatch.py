"""Choosing a library overload by the runtime types of plain Python values (what a C++ or
celpy dispatch does by CEL type), for the calls computed in Python: folded, hoisted, counted
or evaluated by celpy."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from webhook.cel.common.typenames import parse_type
from webhook.cel.library import OPAQUE_TYPES
from webhook.cel.library.base import Overload

_OPAQUE_CLASSES = {t.cel_type: t for t in OPAQUE_TYPES}
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "int": (int,), "uint": (int,), "double": (float,), "bool": (bool,), "bytes": (bytes,),
    "list": (list,), "map": (dict,),
}


@lru_cache(maxsize=None)
def _accepted_types(params: tuple[str, ...]) -> tuple[tuple[type, ...] | None, ...]:
    """Per parameter, the exact Python types of its values (None: anything, dyn or a type parameter)."""
    accepted = []
    for param in params:
        name = parse_type(param).name
        accepted.append((_OPAQUE_CLASSES[name],) if name in _OPAQUE_CLASSES else _EXACT_TYPES.get(name))
    return tuple(accepted)


def select_overload(candidates: tuple[Overload, ...] | list[Overload], values: list[Any]) -> Overload | None:
    """The overload whose parameter types the (plain Python) ``values`` have."""
    for overload in candidates:
        if len(overload.params) != len(values):
            continue
        accepted = _accepted_types(overload.params)
        if all(types is None or type(v) in types for types, v in zip(accepted, values)):
            return overload
    return None


# functions whose failed dispatch on a dyn value reads as cel-go's ``no such overload: f(types)``:
# Kubernetes' list functions (but ``sum``, which stays on the native fast path) and the cel-go
# extensions whose overloads carry their own bindings (type-guarded; ``sort`` and ``flatten``
# are not: a trait check, an implementation that tests its arguments)
SIGNED_DISPATCH = frozenset({
    "isSorted", "min", "max", "indexOf", "lastIndexOf",
    "charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split", "substring", "trim",
    "join", "strings.quote", "reverse", "slice", "distinct", "lists.range", "first", "last",
    "sets.contains", "sets.equivalent", "sets.intersects",
})
