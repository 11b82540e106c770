"""An in-memory cluster view with the ``ClusterState`` read interface (contracts.md).

The reconcilers only ever call ``get`` and ``list``; this class answers them from a set of
objects indexed by kind and namespace. It serves tests, benchmarks and any caller holding
a plain list of manifests. ``put``/``delete`` let the runner's tests and benchmarks play
events into it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping


def parse_label_selector(selector: str | None) -> list[tuple[str, str, str | None]]:
    """``"a=b,c!=d,e,!f"`` -> [(key, op, value)] with op one of ``= != exists !exists``."""
    requirements = []
    for part in (selector or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append((key.strip(), "!=", value.strip()))
        elif "=" in part:
            key, value = part.split("==", 1) if "==" in part else part.split("=", 1)
            requirements.append((key.strip(), "=", value.strip()))
        elif part.startswith("!"):
            requirements.append((part[1:].strip(), "!exists", None))
        else:
            requirements.append((part, "exists", None))
    return requirements


def labels_match(labels: Mapping[str, str] | None, requirements) -> bool:
    labels = labels or {}
    for key, op, value in requirements:
        present = key in labels
        if op == "=" and (not present or labels[key] != value):
            return False
        if op == "!=" and present and labels[key] == value:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
    return True


def selector_string(match_labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


class MemoryState:
    """Objects by (apiVersion, kind) -> namespace -> name."""

    ready = True

    def __init__(self, objects: Iterable[Mapping] = ()):
        self._objects: dict[tuple[str, str], dict[str | None, dict[str, dict]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        for obj in objects:
            self.put(obj)

    def put(self, obj: Mapping) -> None:
        meta = obj.get("metadata") or {}
        self._objects[(obj.get("apiVersion", ""), obj.get("kind", ""))][meta.get("namespace")][
            meta.get("name", "")
        ] = dict(obj)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self._objects.get((api_version, kind), {}).get(namespace, {}).pop(name, None)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        return self._objects.get((api_version, kind), {}).get(namespace, {}).get(name)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict]:
        by_namespace = self._objects.get((api_version, kind), {})
        if namespace is None:
            candidates = [obj for objects in by_namespace.values() for obj in objects.values()]
        else:
            candidates = list(by_namespace.get(namespace, {}).values())
        if label_selector:
            requirements = parse_label_selector(label_selector)
            candidates = [
                obj for obj in candidates
                if labels_match((obj.get("metadata") or {}).get("labels"), requirements)
            ]
        return candidates
