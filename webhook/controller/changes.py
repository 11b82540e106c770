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

from webhook import kinds
from webhook.kinds import Kind
from webhook.controller.reconcilers.service_class import CERTIFICATE_NAMESPACE

# (kind, namespace, name) of an owned object: the work-queue key.
Key = tuple[Kind, str | None, str]


@dataclass(frozen=True)
class Change:
    kind: Kind
    obj: Mapping[str, Any]  # the new object, or the last one seen when deleted
    deleted: bool = False
    old: Mapping[str, Any] | None = None  # the previous version of a modified object

    @property
    def status_only(self) -> bool:
        """Only the status moved (e.g. this controller's own write): nothing else depends on it."""
        if self.old is None or self.deleted:
            return False
        old_meta, new_meta = self.old.get("metadata") or {}, self.obj.get("metadata") or {}
        return self.old.get("spec") == self.obj.get("spec") and all(
            old_meta.get(k) == new_meta.get(k) for k in ("labels", "annotations", "deletionTimestamp")
        )


class ChangeFeed:
    """Polls a cluster view for changed objects.

    A kind whose generation (``ClusterState.kind_generation``) has not moved is unchanged, and
    is not listed at all. A kind that moved is diffed by key and resourceVersion against what
    the previous poll kept of each object: the object itself (the state layer stores a new dict
    for every version and keeps it unmodified, so an object that is the very same is unchanged),
    but of a Pod only its version and labels, read from the state's summaries: a cluster has
    many, and the state makes a new dict of each one read.
    """

    def __init__(self, state, watched: Iterable[Kind] = kinds.WATCHED):
        self.state = state
        self.watched = tuple(watched)
        # kind -> key -> (resourceVersion, the object, or for a Pod its labels)
        self._seen: dict[Kind, dict[tuple, tuple[Any, Any]]] = {}
        self._generations: dict[Kind, int] = {}

    def poll(self) -> list[Change]:
        changes = []
        for kind in self.watched:
            generation = self.state.kind_generation(kind.api_version, kind.kind)
            if kind in self._seen and self._generations.get(kind) == generation:
                continue
            self._generations[kind] = generation
            if kind == kinds.POD:
                changes += self._pods(kind)
                continue
            before = self._seen.get(kind, {})
            now: dict[tuple, tuple[Any, Any]] = {}
            for obj in self.state.list(kind.api_version, kind.kind):
                meta = obj.get("metadata") or {}
                key = (meta.get("namespace"), meta.get("name"))
                version = meta.get("resourceVersion")
                now[key] = (version, obj)
                old = before.get(key)
                if old is None:
                    changes.append(Change(kind, obj))
                elif old[1] is not obj and (old[0] != version or version is None):
                    changes.append(Change(kind, obj, old=old[1]))
            changes += [Change(kind, obj, deleted=True) for key, (_, obj) in before.items() if key not in now]
            self._seen[kind] = now
        return changes

    def _pods(self, kind: Kind) -> list[Change]:
        """The Pods that moved, from the state's summaries: what reads a Pod's change reads its
        namespace, name and labels (``affected``), so no dict is made of the others."""
        changes = []
        before = self._seen.get(kind, {})
        now: dict[tuple, tuple[Any, Any]] = {}
        for (namespace, name), version, labels in self.state.summaries(kind.api_version, kind.kind):
            key = (namespace or None, name)
            now[key] = (version, labels)
            old = before.get(key)
            if old is None or old[0] != version or version is None:
                changes.append(Change(kind, _pod(kind, key, version, labels)))
        changes += [Change(kind, _pod(kind, key, version, labels), deleted=True)
                    for key, (version, labels) in before.items() if key not in now]
        self._seen[kind] = now
        return changes


def _pod(kind: Kind, key: tuple, version: Any, labels: Any) -> dict:
    metadata = {"namespace": key[0], "name": key[1], "resourceVersion": version}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}


@dataclass(frozen=True)
class Scope:
    """Every owned object of ``kind`` (in ``namespace``; of class ``class_name`` or of no
    class, for orders): one change of a shared input touches many objects, and several such
    changes in one poll expand to the same keys only once."""

    kind: Kind
    namespace: str | None = None
    class_name: str | None = None

    def keys(self, state) -> Iterator[Key]:
        objects = state.list(self.kind.api_version, self.kind.kind, self.namespace)
        if self.class_name is not None:
            objects = [o for o in objects
                       if (o.get("spec") or {}).get("inferenceServiceClassName") in (self.class_name, None, "")]
        for obj in objects:
            meta = obj.get("metadata") or {}
            yield self.kind, meta.get("namespace"), meta.get("name", "")


def all_owned(state, only: Iterable[Kind] = kinds.OWNED) -> Iterator[Key]:
    for kind in only:
        yield from Scope(kind).keys(state)


ALL_CLASSES, ALL_ORDERS = Scope(kinds.INFERENCE_SERVICE_CLASS), Scope(kinds.INFERENCE_SERVICE)


def affected(change: Change) -> Iterator[Key | Scope]:
    """The keys, or scopes of keys, whose status may depend on the changed object."""
    kind, meta = change.kind, change.obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    if kind in kinds.OWNED:
        yield kind, namespace, name
        if change.status_only:
            return
    if kind == kinds.INFERENCE_SERVICE_CLASS:
        # its orders; orders naming no class follow the default class, which this may be
        yield Scope(kinds.INFERENCE_SERVICE, class_name=name)
    elif kind in (kinds.INFERENCE_MODEL, kinds.INFERENCE_POOL):
        yield Scope(kinds.INFERENCE_MODEL, namespace)
    elif kind == kinds.POD:
        yield Scope(kinds.KUBEAI_MODEL, namespace)
        yield Scope(kinds.INFERENCE_POOL, namespace)
    elif kind == kinds.PVC:
        yield Scope(kinds.KUBEAI_MODEL, namespace)
    elif kind in (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE, kinds.PRIORITY_CLASS, kinds.STORAGE_CLASS,
                  kinds.CLUSTER_ISSUER) or (kind == kinds.SECRET and namespace == CERTIFICATE_NAMESPACE):
        # class validity or the inventory: every class and every order
        yield ALL_CLASSES
        yield ALL_ORDERS
    elif kind in (kinds.SECRET, kinds.CATALOG_MODEL):
        yield Scope(kinds.INFERENCE_SERVICE, namespace)
    elif kind in (kinds.CATALOG_CLUSTER_MODEL, kinds.MODULE_CONFIG):
        yield ALL_ORDERS
    elif kind in (kinds.STATEFUL_SET, kinds.DEPLOYMENT, kinds.SERVICE, kinds.RESOURCE_CLAIM):
        order = (meta.get("labels") or {}).get(kinds.INFERENCE_SERVICE_LABEL)
        if order:
            yield kinds.INFERENCE_SERVICE, namespace, order


def affected_keys(changes: Iterable[Change], state, only: Iterable[Kind] = kinds.OWNED) -> set[Key]:
    """Every key of the kinds ``only`` the changes touch, each scope expanded once."""
    written = frozenset(only)
    keys: set[Key] = set()
    scopes: set[Scope] = set()
    for change in changes:
        for item in affected(change):
            if (item.kind if isinstance(item, Scope) else item[0]) in written:
                (scopes if isinstance(item, Scope) else keys).add(item)
    if ALL_ORDERS in scopes:  # subsumes every narrower scope of orders
        scopes = {s for s in scopes if s.kind != kinds.INFERENCE_SERVICE} | {ALL_ORDERS}
    for scope in scopes:
        keys.update(scope.keys(state))
    return keys


def invalidates_inventory(change: Change) -> bool:
    return change.kind in (kinds.DEVICE_CLASS, kinds.RESOURCE_SLICE)
