"""The cluster view shared by the admission chain and the controller.

:class:`ClusterState` is the read interface; :class:`ObjectStore` is the in-memory
index both backends fill (files once, the watch cache continuously). Objects are keyed
by API *group* and kind, not version: a DeviceClass read as ``resource.k8s.io/v1beta1``
is the same object as ``resource.k8s.io/v1``.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, Callable, Iterable, Mapping

from webhook.apiversion import group_of
from webhook.state.knowledge import EVERYTHING, Knowledge
from webhook.state.pods import PodParts, PodRecord, expand
from webhook.state.selectors import Selector, parse_selector

__all__ = ["ClusterState", "ObjectStore", "sanitize", "trim_pod"]

GroupKind = tuple[str, str]
ObjectKey = tuple[str, str]  # (namespace or "", name)


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def sanitize(obj: dict[str, Any]) -> dict[str, Any]:
    """What the state keeps of an object: Secrets keep metadata and type only; Pods only what
    their readers use (:func:`trim_pod`); every other object as it is.

    A Secret's data never enters the cache, and neither does kubectl's last-applied
    annotation, which would carry the same data in clear.
    """
    kind = obj.get("kind")
    if (kind != "Secret" and kind != "Pod") or group_of(obj.get("apiVersion", "v1")) != "":
        return obj
    if kind == "Pod":
        return trim_pod(obj)
    metadata = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != _LAST_APPLIED}
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    # the key names are metadata (which keys exist), the values are not
    keys = sorted({*(obj.get("data") or {}), *(obj.get("stringData") or {})})
    kept = {"apiVersion": obj.get("apiVersion", "v1"), "kind": "Secret", "metadata": metadata}
    if "type" in obj:
        kept["type"] = obj["type"]
    if keys:
        kept["dataKeys"] = keys
    return kept


# What a Pod keeps in the state: the fields policies and reconcilers read (selection by labels,
# container ports, phase, readiness). A cluster holds many Pods, and a whole Pod is mostly what
# none of them reads (env, volumes, probes, managedFields, container statuses).
_POD_METADATA = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "labels")


def _container_ports(containers: Any, *, init: bool = False) -> list[dict[str, Any]]:
    kept = []
    for container in containers or ():
        if not isinstance(container, dict):
            continue
        # an init container serves only as a sidecar (restartPolicy Always), as the EPP counts it
        if init and container.get("restartPolicy") != "Always":
            continue
        entry: dict[str, Any] = {"name": container.get("name", "")}
        ports = [{k: p[k] for k in ("name", "containerPort", "protocol") if k in p}
                 for p in container.get("ports") or () if isinstance(p, dict)]
        if ports:
            entry["ports"] = ports
        if init:
            entry["restartPolicy"] = "Always"
        kept.append(entry)
    return kept


def trim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The part of a Pod the state keeps: metadata for selection (name, namespace, labels,
    versions, timestamps), each container's name and ports (sidecars' too), the phase and the
    Ready condition's status. Idempotent: a trimmed Pod is kept as it is."""
    metadata = pod.get("metadata") or {}
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    kept: dict[str, Any] = {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": {k: metadata[k] for k in _POD_METADATA if k in metadata},
        "spec": {"containers": _container_ports(spec.get("containers"))},
    }
    sidecars = _container_ports(spec.get("initContainers"), init=True)
    if sidecars:
        kept["spec"]["initContainers"] = sidecars
    trimmed_status: dict[str, Any] = {}
    if "phase" in status:
        trimmed_status["phase"] = status["phase"]
    conditions = [{"type": "Ready", "status": c.get("status")}
                  for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "Ready"]
    if conditions:
        trimmed_status["conditions"] = conditions
    if trimmed_status:
        kept["status"] = trimmed_status
    return kept


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


_POD: GroupKind = ("", "Pod")


def _labels_of(stored: Any) -> Any:
    if isinstance(stored, PodRecord):
        return stored.labels
    return (stored.get("metadata") or {}).get("labels")


def _read(stored: Any) -> dict[str, Any]:
    """What a reader gets of a stored object: itself, or a Pod's record as a dict."""
    return expand(stored) if isinstance(stored, PodRecord) else stored


class ObjectStore:
    """A thread-safe index ``(group, kind) -> {(namespace, name): object}``.

    Writers replace whole kinds (a list/relist) or single objects (watch events);
    readers get the stored objects themselves (never mutated after insertion: a change
    is a new dict), so a read copies no object, only the list of references. Pods are the
    exception: each is kept as a :class:`~webhook.state.pods.PodRecord` (a cluster has many,
    mostly alike) and read as a new dict of the same parts each time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[GroupKind, dict[ObjectKey, Any]] = {}
        self._pod_parts: PodParts | None = None
        # a kind's sorted lists, per namespace (None: all), until the kind is written: a
        # policy lists a kind in the request's namespace on every review
        self._lists: dict[GroupKind, dict[str | None, list[Any]]] = {}
        # bumped by every write: a reader may keep what it read while this stays the same
        self.generation = 0
        self._kind_generations: dict[GroupKind, int] = {}
        self._listeners: dict[GroupKind, list[Callable[[], None]]] = {}

    def _stored(self, gk: GroupKind, obj: dict[str, Any], parts: PodParts | None) -> Any:
        if gk == _POD and parts is not None:
            return parts.record(trim_pod(obj))
        return sanitize(obj)

    def listen(self, group: str, kind: str, listener: Callable[[], None]) -> None:
        """Call ``listener`` (in the writer's thread, outside the lock) after every write to
        the kind's objects."""
        with self._lock:
            self._listeners.setdefault((group, kind), []).append(listener)

    def _notify(self, gk: GroupKind) -> None:
        for listener in self._listeners.get(gk, ()):
            listener()

    def replace(self, group: str, kind: str, objects: Iterable[dict[str, Any]], *,
                names: frozenset[str] | None = None) -> None:
        """The kind's objects are now ``objects`` (consumed before anything changes: a
        generator that fails leaves the kind as it was); with ``names``, only its objects of
        those names are (a list that selected them by name says nothing of the others)."""
        gk = (group, kind)
        parts = None
        if gk == _POD:  # a new table for a whole list; each kind has one writer (its watch)
            parts = PodParts() if names is None or self._pod_parts is None else self._pod_parts
        fresh = {_key(o): self._stored(gk, o, parts) for o in objects}
        with self._lock:
            if names is not None:
                kept = {key: obj for key, obj in self._kinds.get(gk, {}).items() if key[1] not in names}
                fresh = {**kept, **fresh}
            self._kinds[gk] = fresh
            if gk == _POD:
                self._pod_parts = parts
            self._written(gk)
        self._notify(gk)

    def drop(self, group: str, kind: str) -> None:
        """Forget the kind's objects (no longer watched)."""
        gk = (group, kind)
        with self._lock:
            if self._kinds.pop(gk, None) is not None:
                if gk == _POD:
                    self._pod_parts = None
                self._written(gk)
        self._notify(gk)

    def put(self, obj: dict[str, Any]) -> None:
        gk = (group_of(obj.get("apiVersion", "")), obj.get("kind", ""))
        with self._lock:
            if gk == _POD and self._pod_parts is None:
                self._pod_parts = PodParts()
            objects = self._kinds.setdefault(gk, {})
            objects[_key(obj)] = self._stored(gk, obj, self._pod_parts)
            if gk == _POD and self._pod_parts.should_prune():
                self._pod_parts.prune(objects.values())
            self._written(gk)
        self._notify(gk)

    def delete(self, obj: Mapping[str, Any]) -> None:
        gk = (group_of(obj.get("apiVersion", "")), obj.get("kind", ""))
        with self._lock:
            self._kinds.get(gk, {}).pop(_key(obj), None)
            self._written(gk)
        self._notify(gk)

    def _written(self, gk: GroupKind) -> None:
        self._lists.pop(gk, None)
        self.generation += 1
        self._kind_generations[gk] = self.generation

    def touch(self) -> None:
        """Bump the generation: what was read may read differently (what the view knows changed)."""
        with self._lock:
            self.generation += 1

    def kind_generation(self, group: str, kind: str) -> int:
        """Changes whenever an object of the kind does (0: never written)."""
        return self._kind_generations.get((group, kind), 0)

    def get(self, group: str, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        stored = self._kinds.get((group, kind), {}).get((namespace or "", name))
        return None if stored is None else _read(stored)

    def list(self, group: str, kind: str, namespace: str | None,
             selector: Selector | None = None) -> list[dict[str, Any]]:
        """The kind's objects (in ``namespace``; None: all; those whose labels ``selector``
        matches) in (namespace, name) order; a new list each call (of the stored objects
        themselves, or for Pods of dicts made from their records)."""
        gk = (group, kind)
        with self._lock:
            lists = self._lists.setdefault(gk, {})
            found = lists.get(namespace)
            if found is None:
                items = self._kinds.get(gk, {}).items()
                if namespace is not None:
                    items = [kv for kv in items if kv[0][0] == namespace]
                found = lists[namespace] = [obj for _, obj in sorted(items, key=lambda kv: kv[0])]
        if selector is not None and not selector.empty:
            found = [o for o in found if selector.matches(_labels_of(o))]
        if gk == _POD:
            return [expand(o) for o in found]
        return list(found)

    def kinds(self) -> list[GroupKind]:
        with self._lock:
            return sorted(self._kinds)

    def summaries(self, group: str, kind: str) -> list[tuple[ObjectKey, Any, Any]]:
        """((namespace, name), resourceVersion, labels) of each object of the kind, making no
        dict of a Pod."""
        with self._lock:
            stored = list(self._kinds.get((group, kind), {}).items())
        out = []
        for key, obj in stored:
            if isinstance(obj, PodRecord):
                out.append((key, obj.resource_version, obj.labels))
            else:
                metadata = obj.get("metadata") or {}
                out.append((key, metadata.get("resourceVersion"), metadata.get("labels")))
        return out


class ClusterState(abc.ABC):
    """Read access to the objects admission and the controller depend on; ``knowledge``: the
    kinds it holds whole (``webhook.state.knowledge``: a live cluster's, every kind)."""

    knowledge: Knowledge = EVERYTHING

    def __init__(self) -> None:
        self._store = ObjectStore()

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or ``None``; ``namespace`` is ``None`` for cluster-scoped kinds."""
        return self._store.get(group_of(api_version), kind, name, namespace)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        selector: Selector | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind, in (namespace, name) order; ``namespace=None`` means all; those
        whose labels match ``label_selector`` (the string form) or ``selector``."""
        if label_selector:
            selector = parse_selector(label_selector)
        return self._store.list(group_of(api_version), kind, namespace, selector)

    def on_change(self, api_version: str, kind: str, listener: Callable[[], None]) -> None:
        """Call ``listener`` (in the writer's thread) after every change to ``kind``'s objects."""
        self._store.listen(group_of(api_version), kind, listener)

    @property
    def generation(self) -> int:
        """Changes whenever a stored object does: what was read from the state stays true
        while it stays the same."""
        return self._store.generation

    def kind_generation(self, api_version: str, kind: str) -> int:
        """Changes whenever an object of the kind does: what was read of it stays true while
        it stays the same."""
        return self._store.kind_generation(group_of(api_version), kind)

    def summaries(self, api_version: str, kind: str) -> list[tuple[tuple[str, str], Any, Any]]:
        """((namespace or "", name), resourceVersion, labels) of each object of the kind: what
        moved, read without making a dict of each (Pods)."""
        return self._store.summaries(group_of(api_version), kind)

    def namespaced(self, api_version: str, kind: str) -> bool | None:
        """Whether ``kind`` is namespaced, where the view learned it from the cluster (a live
        view's discovery of a policy's param kind); None: the view does not say (a CRD or the
        built-in kinds' table answers instead)."""
        return None

    @property
    @abc.abstractmethod
    def ready(self) -> bool:
        """True once every kind the backend serves has been loaded at least once."""

    @property
    def interrupted(self) -> str | None:
        """None while the loaded objects are kept current, else why they may not be (a watch
        cut off): what is served is then the last picture, possibly stale."""
        return None

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until :attr:`ready` (or ``timeout`` seconds); returns :attr:`ready`."""
        return self.ready

    def start(self) -> None:
        """Begin loading/watching; a no-op for static backends."""

    def stop(self) -> None:
        """Stop background work; a no-op for static backends."""
