"""The cluster view in a cluster: a watch cache on the official ``kubernetes`` client.

One daemon thread per watched kind runs the informer loop of client-go, reduced to
what admission needs: list (paged) and replace, then watch from the list's
resourceVersion with bookmarks (metadata only where that is all it needs: see
:attr:`WatchedKind.metadata_only`); a 410 Gone (expired resourceVersion, on the request or
as an ERROR event) relists; any other failure reconnects with exponential backoff.
The HTTP client is blocking, so it lives in those threads and never on the event loop;
readers only touch the in-memory :class:`~webhook.state.base.ObjectStore`.

A kind the cluster does not serve (404 in every version: its CRD is not installed) is *not
served*, not broken: it is empty and synced, and its thread looks again when a watched CRD
changes, or every :attr:`Backoff.unserved` seconds. Only a request the apiserver did not
answer (or answered with an error other than 404 and 410) marks a kind interrupted; any
answer clears the mark. An interrupted kind keeps serving its last synced picture, as a
client-go informer does: readiness depends on the first sync, never on the connection.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from webhook.apiversion import api_version_of, group_of
from webhook.kinds import CUSTOM_RESOURCE_DEFINITION
from webhook.state.base import ClusterState
from webhook.state.knowledge import EVERYTHING, Knowledge
from webhook.state.selectors import Selector

__all__ = ["KubeState", "WatchedKind"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WatchedKind:
    api_version: str
    kind: str
    plural: str
    namespace: str | None = None  # watch one namespace only
    field_selector: str | None = None
    label_selector: str | None = None
    # list and watch PartialObjectMetadata, as client-go's metadata informers do: the objects'
    # other fields (a Secret's values) never leave the apiserver
    metadata_only: bool = False
    # older versions of the same group to watch instead, in order, while ``api_version`` is not
    # served (404): one CRD serves the same objects under each of its versions, and a cluster on
    # an older release of it serves only the older one
    older_versions: tuple[str, ...] = ()
    # the kind's scope as discovery answered it (a native policy's param kind of a custom
    # resource, whose scope no table holds); None: not looked up
    namespaced: bool | None = None

    @property
    def names(self) -> frozenset[str] | None:
        """The one name a ``metadata.name=`` field selector watches (None: any name)."""
        selector = self.field_selector or ""
        if selector.startswith("metadata.name=") and "," not in selector:
            return frozenset([selector.removeprefix("metadata.name=")])
        return None

    @property
    def path(self) -> str:
        return self.path_of(self.api_version)

    def path_of(self, api_version: str) -> str:
        base = f"/apis/{api_version}" if group_of(api_version) else f"/api/{api_version}"
        scope = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{base}{scope}/{self.plural}"

    @property
    def api_versions(self) -> tuple[str, ...]:
        group = group_of(self.api_version)
        return (self.api_version, *(api_version_of(group, v) for v in self.older_versions))

    def __str__(self) -> str:
        return f"{self.kind}.{group_of(self.api_version) or 'core'}"


def _interrupt(resp: Any) -> None:
    """Wake a thread blocked reading ``resp``: shut its socket down.

    (Closing the response from another thread would wait on the reader's buffer lock.)
    """
    sock = getattr(getattr(resp, "connection", None), "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


class _Gone(Exception):
    """The resourceVersion is too old: relist."""


@dataclass(frozen=True, slots=True)
class Backoff:
    # reconnects of a handful of watches cost the apiserver little; a long wait after it is
    # back would keep the cache stale for nothing
    initial: float = 0.5
    maximum: float = 5.0
    # a kind not served is looked for again this often (sooner when a watched CRD changes):
    # a dozen absent kinds per replica then cost the apiserver a request every few seconds
    unserved: float = 30.0

    def delays(self):
        delay = self.initial
        while True:
            yield delay * random.uniform(0.8, 1.2)
            delay = min(delay * 2, self.maximum)


class KubeState(ClusterState):
    """A watch cache of ``kinds``; :attr:`ready` after every kind's first list."""

    def __init__(
        self,
        api_client: ApiClient | None,
        kinds: tuple[WatchedKind, ...],
        *,
        watch_timeout_s: int = 300,
        page_size: int = 500,
        backoff: Backoff = Backoff(),
        stream: bool = True,
    ) -> None:
        super().__init__()
        self._api = api_client or ApiClient()
        self.kinds = tuple(kinds)
        self._watched = {(group_of(k.api_version), k.kind) for k in self.kinds}
        self._reported: set[tuple[str, str]] = set()
        self._watch_timeout_s = watch_timeout_s
        self._page_size = page_size
        self._backoff = backoff
        self._stopping = threading.Event()
        self._ready_event = threading.Event()
        self._lock = threading.Lock()
        self._synced: set[WatchedKind] = set()
        # kind -> when (monotonic) its requests began to fail (the apiserver unreachable, an
        # error status): its cache may be missing changes until a request is answered again
        self._interrupted: dict[WatchedKind, float] = {}
        # kinds the cluster serves in no version (404): empty, synced, looked for again later
        self._unserved: set[WatchedKind] = set()
        self._crd_changed = threading.Condition(self._lock)  # wakes the unserved kinds' threads
        self._crd_generation = 0
        self._open: dict[WatchedKind, Any] = {}  # the response each thread is reading, for stop()
        self._threads: dict[WatchedKind, threading.Thread] = {}
        # each kind's thread stops when its event is set (stop(): all; set_kinds(): those dropped)
        self._halts: dict[WatchedKind, threading.Event] = {}
        # kinds added after the first sync (a policy reload's lookup) and not synced yet: what
        # reads them is unknown meanwhile (``knowledge``), and readiness does not wait for them;
        # the value is why (the last failure, e.g. RBAC's 403)
        self._pending: dict[WatchedKind, str] = {}
        # the first sync streams a watch (``sendInitialEvents``) while the apiserver serves it
        # (None: not tried yet; False: refused, paged lists instead)
        self._stream: bool | None = None if stream else False
        self._listeners: dict[tuple[str, str], list[Callable[[], None]]] = {}
        self.lists = 0  # counters, for metrics and tests: first syncs by paged list, by stream
        self.streams = 0
        self.relists_on_gone = 0

    # -- reads ---------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self._check_watched(api_version, kind)
        return super().get(api_version, kind, name, namespace)

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None, *, selector: Selector | None = None) -> list[dict[str, Any]]:
        self._check_watched(api_version, kind)
        return super().list(api_version, kind, namespace, label_selector, selector=selector)

    def _check_watched(self, api_version: str, kind: str) -> None:
        # a policy's lookup of a kind nobody watches would silently see an empty cluster
        key = (group_of(api_version), kind)
        if key not in self._watched and key not in self._reported:
            self._reported.add(key)
            log.warning("cluster state: %s/%s is not watched, so reads of it find nothing; add it to the "
                        "watched kinds", api_version, kind)

    def namespaced(self, api_version: str, kind: str) -> bool | None:
        """The scope a watch of ``kind`` carries (discovered), None when none does or the
        cluster serves it in no version."""
        key = (group_of(api_version), kind)
        with self._lock:
            for watched in self.kinds:
                if (group_of(watched.api_version), watched.kind) == key and watched.namespaced is not None:
                    return None if watched in self._unserved else watched.namespaced
        return None

    def pending_reason(self, api_version: str, kind: str) -> str | None:
        """Why ``kind``, watched since the first sync, is not synced (``not synced yet``, the last
        failure such as RBAC's ``403``); None when it is synced (or was there from the start)."""
        key = (group_of(api_version), kind)
        with self._lock:
            for watched, why in self._pending.items():
                if (group_of(watched.api_version), watched.kind) == key:
                    return why
        return None

    def on_change(self, api_version: str, kind: str, listener: Callable[[], None]) -> None:
        """Call ``listener`` (in the watch's thread) after every change to ``kind``'s objects;
        a kind's first list calls it before the state becomes :attr:`ready`."""
        self._listeners.setdefault((group_of(api_version), kind), []).append(listener)

    def _changed(self, kind: WatchedKind) -> None:
        if (group_of(kind.api_version), kind.kind) == (CUSTOM_RESOURCE_DEFINITION.group, CUSTOM_RESOURCE_DEFINITION.kind):
            with self._lock:  # a kind not served may be now: its thread looks at once
                self._crd_generation += 1
                self._crd_changed.notify_all()
        for listener in self._listeners.get((group_of(kind.api_version), kind.kind), ()):
            try:
                listener()
            except Exception:  # noqa: BLE001 - a listener's fault must not stop the watch
                log.exception("cluster state: a listener of %s failed", kind)

    @property
    def knowledge(self) -> Knowledge:
        """Every kind whole, but those added since the first sync and not synced yet."""
        with self._lock:
            if not self._pending:
                return EVERYTHING
            return Knowledge(None, "cluster", missing=frozenset(
                (group_of(k.api_version), k.kind) for k in self._pending))

    @property
    def pending(self) -> str | None:
        """None when every kind added since the first sync is synced, else which are not and why
        (their lookups are unknown meanwhile)."""
        with self._lock:
            kinds = sorted(f"{kind} ({why})" for kind, why in self._pending.items())
        return f"not synced, lookups unknown: {', '.join(kinds)}" if kinds else None

    def set_kinds(self, kinds: tuple[WatchedKind, ...] | list[WatchedKind]) -> None:
        """Watch ``kinds`` from now on: start the watches of those added (unknown until synced,
        once the state is ready: see :attr:`pending`) and stop those dropped, forgetting their
        objects."""
        kinds = tuple(dict.fromkeys(kinds))
        with self._lock:
            added = [k for k in kinds if k not in self.kinds]
            dropped = [k for k in self.kinds if k not in kinds]
            self.kinds = kinds
            self._watched = {(group_of(k.api_version), k.kind) for k in kinds}
            ready = self._ready_event.is_set()
            for kind in added:
                if ready:
                    self._pending[kind] = "not synced yet"
            for kind in dropped:
                self._synced.discard(kind)
                self._unserved.discard(kind)
                self._interrupted.pop(kind, None)
                self._pending.pop(kind, None)
                halt = self._halts.get(kind)
                if halt is not None:
                    halt.set()
                resp = self._open.get(kind)
                if resp is not None:
                    _interrupt(resp)
            self._crd_changed.notify_all()
            started = bool(self._threads) and not self._stopping.is_set()
            if not ready and self._synced >= set(self.kinds):
                self._ready_event.set()
        for kind in dropped:
            thread = self._threads.pop(kind, None)
            if thread is not None:
                thread.join(5.0)
            self._halts.pop(kind, None)
            if (group_of(kind.api_version), kind.kind) not in self._watched:
                self._store.drop(group_of(kind.api_version), kind.kind)
        if added:
            self._store.touch()  # what was read while they were not watched may read differently now
        if started:
            for kind in added:
                self._start(kind)
        if added or dropped:
            log.info("cluster state: watching %d kinds (%s added, %s dropped)", len(kinds),
                     ", ".join(map(str, added)) or "none", ", ".join(map(str, dropped)) or "none")

    # -- lifecycle --------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._ready_event.is_set()

    @property
    def interrupted(self) -> str | None:
        now = time.monotonic()
        with self._lock:
            kinds = sorted(f"{kind} ({now - since:.0f}s)" for kind, since in self._interrupted.items())
        return f"watch interrupted, reconnecting: {', '.join(kinds)}" if kinds else None

    @property
    def unserved(self) -> tuple[str, ...]:
        """The watched kinds the cluster serves in no version (their CRD is not installed)."""
        with self._lock:
            return tuple(sorted(str(kind) for kind in self._unserved))

    def disconnected_seconds(self) -> float:
        """How long the longest-interrupted kind has been cut off (0 when none is)."""
        now = time.monotonic()
        with self._lock:
            return max((now - since for since in self._interrupted.values()), default=0.0)

    async def wait_ready(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self._ready_event.wait, timeout)

    def start(self) -> None:
        if self._threads:
            return
        self._stopping.clear()
        for kind in self.kinds:
            self._start(kind)

    def _start(self, kind: WatchedKind) -> None:
        halt = self._halts[kind] = threading.Event()
        thread = threading.Thread(target=self._run, args=(kind, halt), name=f"watch-{kind}", daemon=True)
        self._threads[kind] = thread
        thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        with self._lock:
            for halt in self._halts.values():
                halt.set()
            self._crd_changed.notify_all()
            responses = list(self._open.values())
        for resp in responses:
            _interrupt(resp)
        for thread in self._threads.values():
            thread.join(timeout)
        self._threads.clear()
        self._halts.clear()

    # -- the informer loop --------------------------------------------------------
    def _run(self, kind: WatchedKind, halt: threading.Event) -> None:
        resource_version: str | None = None
        delays = self._backoff.delays()
        versions = kind.api_versions
        served = 0  # which of them is watched
        unserved = 0  # how many in a row answered 404
        while not halt.is_set():
            try:
                if resource_version is None:
                    # (a streamed sync watches on to the stream's end: the version is its last event's)
                    resource_version = self._sync(kind, versions[served], halt)
                    unserved = 0
                resource_version = self.watch(kind, resource_version, versions[served])
                delays = self._backoff.delays()  # a clean end of stream: reconnect at once
            except _Gone:
                self.relists_on_gone += 1
                resource_version = None
            except ApiException as exc:
                if exc.status == 410:
                    self.relists_on_gone += 1
                    resource_version = None
                    continue
                if exc.status == 404:  # version not served (CRD not installed yet): empty until it is
                    resource_version = None
                    served, unserved = (served + 1) % len(versions), unserved + 1
                    if unserved < len(versions):  # another version of the group may be served: at once
                        continue
                    unserved = 0
                    self._not_served(kind)
                    delays = self._backoff.delays()
                    self._wait_for_crds(self._backoff.unserved, halt)
                    continue
                self._interrupt_kind(kind, f"HTTP {exc.status} {exc.reason}")
                log.warning("watch %s: HTTP %s %s; retrying", kind, exc.status, exc.reason)
                halt.wait(next(delays))
            except Exception as exc:  # noqa: BLE001 - network errors of every kind: reconnect
                if halt.is_set():
                    break
                self._interrupt_kind(kind, str(exc))
                log.warning("watch %s: %s; retrying", kind, exc)
                halt.wait(next(delays))

    def _not_served(self, kind: WatchedKind) -> None:
        """Every version answered 404: the kind is empty and synced, and nothing is wrong."""
        with self._lock:
            self._interrupted.pop(kind, None)
            newly = kind not in self._unserved
            self._unserved.add(kind)
        if newly:
            log.info("watch %s: not served by the cluster (no CRD); looking again when a CRD changes", kind)
            self._store.replace(group_of(kind.api_version), kind.kind, (), names=kind.names)
            self._changed(kind)
        self._mark_synced(kind)

    def _wait_for_crds(self, timeout: float, halt: threading.Event) -> None:
        """Until a watched CRD changes, the kind's watch stops or ``timeout`` seconds."""
        with self._lock:
            seen = self._crd_generation
            self._crd_changed.wait_for(lambda: self._crd_generation != seen or halt.is_set(), timeout)

    def _interrupt_kind(self, kind: WatchedKind, why: str) -> None:
        with self._lock:
            self._interrupted.setdefault(kind, time.monotonic())
            if kind in self._pending:
                self._pending[kind] = why

    def _mark_synced(self, kind: WatchedKind) -> None:
        with self._lock:
            if kind not in self.kinds:  # dropped meanwhile
                return
            self._synced.add(kind)
            self._pending.pop(kind, None)
            if self._synced >= set(self.kinds):
                self._ready_event.set()

    def _query(self, kind: WatchedKind, **params: Any) -> list[tuple[str, Any]]:
        query = [(k, v) for k, v in params.items() if v is not None]
        if kind.field_selector:
            query.append(("fieldSelector", kind.field_selector))
        if kind.label_selector:
            query.append(("labelSelector", kind.label_selector))
        return query

    def _get(self, kind: WatchedKind, api_version: str, query: list[tuple[str, Any]], timeout: Any, *,
             watch: bool = False):
        request = self._api.param_serialize(
            method="GET",
            resource_path=kind.path_of(api_version),
            query_params=query,
            header_params={"Accept": _accept(kind, watch)},
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        with self._lock:  # answered: what follows on this stream is current again
            self._interrupted.pop(kind, None)
            self._unserved.discard(kind)
        return response.response

    def _sync(self, kind: WatchedKind, api_version: str, halt: threading.Event) -> str:
        """The kind's first sync (or a relist): a streamed watch where the apiserver serves it
        (then watched on to the stream's end), else paged lists; the resourceVersion to watch from."""
        if self._stream is not False:
            try:
                return self._streamed(kind, api_version, halt)
            except ApiException as exc:
                if exc.status not in (400, 422):  # 422: sendInitialEvents refused (WatchList off)
                    raise
                log.info("watch %s: the apiserver does not stream initial events (HTTP %s); listing in pages",
                         kind, exc.status)
                self._stream = False
        return self._list(kind, api_version)

    def _list(self, kind: WatchedKind, api_version: str) -> str:
        metadata: dict[str, Any] = {}

        def pages():  # stored as they are read (Pods as records): no page is held past its turn
            token: str | None = None
            while True:
                resp = self._get(kind, api_version, self._query(kind, limit=self._page_size, **{"continue": token}), 60)
                try:
                    body = orjson.loads(resp.data)  # refuses nesting past the server's limit (webhook.document_limits)
                finally:
                    resp.release_conn()
                items = body.get("items") or ()
                metadata.clear()
                metadata.update(body.get("metadata") or {})
                del body
                for item in items:
                    yield _typed(kind, api_version, item)
                token = metadata.get("continue")
                if not token:
                    break

        self._store.replace(group_of(kind.api_version), kind.kind, pages(), names=kind.names)
        self.lists += 1
        self._changed(kind)
        self._mark_synced(kind)
        return metadata.get("resourceVersion") or ""

    def _streamed(self, kind: WatchedKind, api_version: str, halt: threading.Event) -> str:
        """A watch that begins with the kind's objects (``sendInitialEvents``, from the
        apiserver's watch cache, consistent as of the request) and a bookmark marking their end,
        client-go's WatchList: the objects are stored one event at a time, never as one list."""
        query = self._query(kind, watch="true", sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
                            allowWatchBookmarks="true", timeoutSeconds=self._watch_timeout_s)
        resp = self._get(kind, api_version, query, (10, self._watch_timeout_s + 30), watch=True)
        self._stream = True
        resource_version = ""
        with self._lock:
            self._open[kind] = resp
            stopping = halt.is_set()
        if stopping:
            _interrupt(resp)
        try:
            lines = _lines(resp)

            def initial():
                nonlocal resource_version
                for line in lines:
                    if halt.is_set():
                        break
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    kind_of_event, obj = event.get("type"), event.get("object") or {}
                    if kind_of_event == "ERROR":
                        _raise_watch_error(obj)
                    metadata = obj.get("metadata") or {}
                    resource_version = metadata.get("resourceVersion") or resource_version
                    if kind_of_event == "ADDED":
                        yield _typed(kind, api_version, obj)
                    elif kind_of_event == "BOOKMARK" and \
                            (metadata.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true":
                        return
                raise ConnectionError("the stream ended before its initial events did")

            self._store.replace(group_of(kind.api_version), kind.kind, initial(), names=kind.names)
            self.streams += 1
            self._changed(kind)
            self._mark_synced(kind)
            for line in lines:
                if halt.is_set():
                    break
                if line.strip():
                    resource_version = self._apply(kind, api_version, orjson.loads(line), resource_version)
        finally:
            with self._lock:
                self._open.pop(kind, None)
            resp.release_conn()
        return resource_version

    def watch(self, kind: WatchedKind, resource_version: str, api_version: str) -> str:
        """One watch of ``kind`` from ``resource_version``, until the apiserver ends it; the
        resourceVersion to watch on from (the last event's or bookmark's)."""
        query = self._query(
            kind,
            watch="true",
            resourceVersion=resource_version or None,
            allowWatchBookmarks="true",
            timeoutSeconds=self._watch_timeout_s,
        )
        halt = self._halts.get(kind) or self._stopping
        resp = self._get(kind, api_version, query, (10, self._watch_timeout_s + 30), watch=True)
        with self._lock:
            # stop() sets the flag before it looks at _open: one of the two sees the other
            self._open[kind] = resp
            stopping = halt.is_set()
        if stopping:
            _interrupt(resp)
        try:
            for line in _lines(resp):
                if halt.is_set():
                    break
                if not line.strip():
                    continue
                resource_version = self._apply(kind, api_version, orjson.loads(line), resource_version)
        finally:
            with self._lock:
                self._open.pop(kind, None)
            resp.release_conn()
        return resource_version

    def _apply(self, kind: WatchedKind, api_version: str, event: dict[str, Any], resource_version: str) -> str:
        kind_of_event, obj = event.get("type"), event.get("object") or {}
        if kind_of_event == "ERROR":
            _raise_watch_error(obj)
        obj = _typed(kind, api_version, obj)
        if kind_of_event in ("ADDED", "MODIFIED"):
            self._store.put(obj)
        elif kind_of_event == "DELETED":
            self._store.delete(obj)
        if kind_of_event in ("ADDED", "MODIFIED", "DELETED"):
            self._changed(kind)
        # BOOKMARK carries only a resourceVersion to resume from
        return (obj.get("metadata") or {}).get("resourceVersion") or resource_version


def _lines(resp: Any):
    """The lines of a streamed response as they arrive (bytes, empty ones skipped). The client's
    own ``iter_resp_lines`` copies what is left of a segment after each line: quadratic in the
    segment's size, and a streamed first sync's segments hold thousands of objects."""
    pending = b""
    for segment in resp.stream(amt=None, decode_content=False):
        if isinstance(segment, str):
            segment = segment.encode()
        lines = (pending + segment).split(b"\n") if pending else segment.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _raise_watch_error(status: dict[str, Any]) -> None:
    if status.get("code") == 410:
        raise _Gone(status.get("message", "resourceVersion too old"))
    raise RuntimeError(f"watch error: {status.get('message') or status}")


# the bookmark that ends a streamed watch's initial events (metav1.InitialEventsAnnotationKey)
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_JSON = "application/json"
# the apiserver's metadata views (client-go's metadata client asks the same, with the same
# fallback to whole objects for a server without them: the store then drops what it must)
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


def _accept(kind: WatchedKind, watch: bool) -> str:
    if not kind.metadata_only:
        return _JSON
    return f"{_METADATA if watch else _METADATA_LIST}, {_JSON}"


def _typed(kind: WatchedKind, api_version: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the watched kind: typed lists omit each item's apiVersion and kind, and
    metadata views call every object ``meta.k8s.io/v1`` ``PartialObjectMetadata``."""
    if kind.metadata_only:
        obj["apiVersion"], obj["kind"] = api_version, kind.kind
    else:
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind.kind)
    return obj
