"""From "something in the cluster view changed" to "these objects need a new status".

``ChangeFeed`` notices changes in any ``ClusterState`` by comparing each object's
resourceVersion with the previous poll: the state layer (a watch cache in a cluster) keeps
the objects current, the feed only asks it what moved — a dictionary walk, no API call.

``affected`` maps one changed object to the owned objects whose status depends on it,
following exactly what the reconcilers read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.controller import kinds
from webhook.controller.kinds import Kind
from webhook.controller.reconcilers.service_class import CERTIFICATE_NAMESPACE

# (kind, namespace, name) of an owned object: the work-queue key.
Key = tuple[Kind, str | None, str]


@dataclass(frozen=True)
class Change:
    kind: Kind
    obj: Mapping[str, Any]  # the new object, or the last one seen when deleted
    deleted: bool = False


def _version(obj: Mapping) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion") or id(obj)


class ChangeFeed:
    def __init__(self, state, watched: Iterable[Kind] = kinds.WATCHED):
        self.state = state
        self.watched = tuple(watched)
        self._seen: dict[Kind, dict[tuple, tuple[Any, Mapping]]] = {}

    def poll(self) -> list[Change]:
        changes = []
        for kind in self.watched:
            before = self._seen.get(kind, {})
            now: dict[tuple, tuple[Any, Mapping]] = {}
            for obj in self.state.list(kind.api_version, kind.kind):
                meta = obj.get("metadata") or {}
                key = (meta.get("namespace"), meta.get("name"))
                version = _version(obj)
                now[key] = (version, obj)
                old = before.get(key)
                if old is None or old[0] != version:
                    changes.append(Change(kind, obj))
            for key, (_, obj) in before.items():
                if key not in now:
                    changes.append(Change(kind, obj, deleted=True))
            self._seen[kind] = now
        return changes


def _keys(kind: Kind, objects: Iterable[Mapping]) -> Iterator[Key]:
    for obj in objects:
        meta = obj.get("metadata") or {}
        yield kind, meta.get("namespace"), meta.get("name", "")


def all_owned(state, only: Iterable[Kind] = kinds.OWNED) -> Iterator[Key]:
    for kind in only:
        yield from _keys(kind, state.list(kind.api_version, kind.kind))


def _list(state, kind: Kind, namespace: str | None = None, selector: str | None = None) -> list[dict]:
    return state.list(kind.api_version, kind.kind, namespace, selector)


def affected(change: Change, state) -> Iterator[Key]:
    kind, obj = change.kind, change.obj
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    if kind in kinds.OWNED:
        yield kind, namespace, name
    if kind == kinds.INFERENCE_SERVICE_CLASS:
        # its orders; orders naming no class follow the default class, which this may be
        yield from _keys(kinds.INFERENCE_SERVICE, (
            o for o in _list(state, kinds.INFERENCE_SERVICE)
            if (o.get("spec") or {}).get("inferenceServiceClassName") in (name, None, "")
        ))
    elif kind in (kinds.INFERENCE_MODEL, kinds.INFERENCE_POOL):
        yield from _keys(kinds.INFERENCE_MODEL, _list(state, kinds.INFERENCE_MODEL, namespace))
    elif kind == kinds.POD:
        yield from _keys(kinds.KUBEAI_MODEL, _list(state, kinds.KUBEAI_MODEL, namespace))
        yield from _keys(kinds.INFERENCE_POOL, _list(state, kinds.INFERENCE_POOL, namespace))
    elif kind == kinds.PVC:
        yield from _keys(kinds.KUBEAI_MODEL, _list(state, kinds.KUBEAI_MODEL, namespace))
    elif kind in (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE, kinds.PRIORITY_CLASS, kinds.STORAGE_CLASS,
                  kinds.CLUSTER_ISSUER) or (kind == kinds.SECRET and namespace == CERTIFICATE_NAMESPACE):
        # class validity or the inventory: every class and every order
        yield from all_owned(state, (kinds.INFERENCE_SERVICE_CLASS, kinds.INFERENCE_SERVICE))
    elif kind in (kinds.SECRET, kinds.CATALOG_MODEL):
        yield from _keys(kinds.INFERENCE_SERVICE, _list(state, kinds.INFERENCE_SERVICE, namespace))
    elif kind in (kinds.CATALOG_CLUSTER_MODEL, kinds.MODULE_CONFIG):
        yield from all_owned(state, (kinds.INFERENCE_SERVICE,))
    elif kind in (kinds.STATEFUL_SET, kinds.DEPLOYMENT, kinds.SERVICE, kinds.RESOURCE_CLAIM):
        order = (meta.get("labels") or {}).get(kinds.INFERENCE_SERVICE_LABEL)
        if order:
            yield kinds.INFERENCE_SERVICE, namespace, order


def invalidates_inventory(change: Change) -> bool:
    return change.kind in (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE)
