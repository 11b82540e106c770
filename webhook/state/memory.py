"""A cluster view held in memory: a ``ClusterState`` filled by its owner.

The reconcilers read any ``ClusterState``; this one is filled from a list of objects and
changed with ``put``/``delete`` — for ``infergate reconcile`` with extra manifests laid over a
directory, and for tests and benchmarks that play a cluster's changes. Storage, Secret
sanitising and label selectors are those of every cluster view (``webhook.state.base``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.state.base import ClusterState


class MemoryState(ClusterState):
    def __init__(self, objects: Iterable[Mapping] = ()):
        super().__init__()
        for obj in objects:
            self.put(obj)

    @property
    def ready(self) -> bool:
        return True

    def put(self, obj: Mapping) -> None:
        """Add or replace ``obj`` (stored as a new dict: a change is a new object)."""
        self._store.put(dict(obj))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self._store.delete({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}})

    @classmethod
    def overlay(cls, base: ClusterState, objects: Iterable[Mapping], kinds: Iterable) -> "MemoryState":
        """``base``'s objects of ``kinds`` with ``objects`` laid over them (same name wins)."""
        view = cls(obj for kind in kinds for obj in base.list(kind.api_version, kind.kind))
        for obj in objects:
            view.put(obj)
        return view
