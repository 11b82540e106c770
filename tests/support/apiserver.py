"""A fake kube-apiserver speaking the real wire format over HTTP, for every test that needs a
cluster: the watch cache (``webhook.state.kube``), the controller, the e2e set-up and sweep.

It behaves as the API does where the clients depend on it:

* one resourceVersion for the whole store, bumped by every write (as etcd's revision);
  ``metadata.generation`` moves when anything but metadata and status changes;
* GET, LIST (pages with ``limit``/``continue``, ``labelSelector``, the metadata-only view
  ``PartialObjectMetadataList`` when ``Accept`` asks for it), WATCH (JSON event lines from a
  resourceVersion, bookmarks, ``timeoutSeconds``; ``ERROR`` 410 Gone for a version older than
  the last compaction; ``sendInitialEvents``, the WatchList feature, as v1.36 serves it: the
  objects as ADDED then the bookmark annotated ``k8s.io/initial-events-end``, or, with
  ``watch_list=False`` as a server with the feature off, a 422; answers recorded in
  ``tests/state/data/watchlist``), a collection made ``forbidden`` answering RBAC's 403, POST (409 AlreadyExists, ``dryRun``), PUT (409 Conflict on a stale
  resourceVersion; status kept where ``/status`` is a subresource), PUT ``/status`` and
  ``/finalize``, server-side apply of a whole object by its one manager, server-side apply to ``/status`` (PATCH ``application/apply-patch+yaml``: 409 on
  a stale resourceVersion, or on another manager's field unless forced), a JSON merge patch of
  an object (PATCH ``application/merge-patch+json``), DELETE;
* managedFields of status as the apiserver keeps them (``tests.support.managed_fields``), and
  every write's field manager as it derives it (``?fieldManager=``, else the User-Agent's
  product): ``managers``;
* discovery (``/version``, ``/api/v1``, ``/apis/<group>/<version>``) lists what ``served``
  holds; a created CRD is served at once and Established.

Every collection path can be read (an unknown one lists empty); discovery says what exists.
Tests script the cluster directly (``put``, ``add``/``modify``/``delete`` on a served kind,
``bookmark``, ``compact``), inspect what was asked (``requests``, and per collection ``lists``,
``watch_requests``, ``views``, every byte ``sent``) and inject failures (``fail_next_watch``).
Serve it with ``aiohttp_server(fake.app())``, or from a thread of its own with
``with fake.running() as url:`` for synchronous clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from tests.support import managed_fields
from webhook.state.kube import WatchedKind

Key = tuple[str, str, "str | None", str]  # (apiVersion, plural, namespace, name)

CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "PriorityClass", "StorageClass", "DeviceClass", "ResourceSlice",
                  "ClusterRole", "ClusterRoleBinding", "InferenceServiceClass", "ClusterModel"}
# The built-in kinds a cluster serves (``FakeApiServer(builtins=True)``), by apiVersion.
BUILT_IN = {
    "v1": ["Namespace", "Pod", "Secret", "ConfigMap", "Service", "ServiceAccount", "Event"],
    "apps/v1": ["Deployment", "StatefulSet"],
    "coordination.k8s.io/v1": ["Lease"],
    "rbac.authorization.k8s.io/v1": ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    "policy/v1": ["PodDisruptionBudget"],
    "networking.k8s.io/v1": ["NetworkPolicy"],
    "scheduling.k8s.io/v1": ["PriorityClass"],
    "storage.k8s.io/v1": ["StorageClass"],
    "resource.k8s.io/v1": ["DeviceClass", "ResourceSlice", "ResourceClaim"],
    "admissionregistration.k8s.io/v1": ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"],
    "apiextensions.k8s.io/v1": ["CustomResourceDefinition"],
}


def plural_of(kind: str) -> str:
    lower = kind.lower()
    return lower + "es" if lower.endswith("s") else lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


ALWAYS_SERVED = {(api_version, plural_of(kind)) for api_version, kinds in BUILT_IN.items() for kind in kinds}


@dataclass
class Route:
    api_version: str
    namespace: str | None
    plural: str
    name: str | None
    subresource: str | None


def parse_path(path: str) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        api_version, rest = parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    return Route(api_version, namespace, rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)


def merge_patched(target: Any, patch: Any) -> Any:
    """RFC 7386's MergePatch(target, patch)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patched(out.get(key), value)
    return out


def status_body(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def status_error(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


def gone(rv: int | str, current: int) -> dict:
    return status_body(410, "Expired", f"too old resource version: {rv} ({current})")


def metadata_view(accept: str, as_kind: str) -> bool:
    """Whether an ``Accept`` header asks for the metadata view ``as_kind`` before any other
    media type (the apiserver serves the first one it can)."""
    for media_range in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in media_range.split(";")[1:] if "=" in p)
        if media_range.split(";")[0].strip() not in ("application/json", "*/*"):
            continue
        return params.get("as") == as_kind and params.get("g") == "meta.k8s.io" and params.get("v") == "v1"
    return False


_RECORDED = Path(__file__).resolve().parents[1] / "state" / "data" / "watchlist"


def watch_list_refused(feature_on: bool) -> dict:
    """The 422 of a watch with ``sendInitialEvents`` the apiserver refuses (recorded: without
    ``resourceVersionMatch=NotOlderThan``). With the WatchList feature off, the same Status names
    the other field, in validation.go's words."""
    body = json.loads((_RECORDED / "refused-without-resource-version-match.json").read_text())
    if not feature_on:
        text = "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        body["message"] = f'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: {text}'
        body["details"]["causes"] = [{"reason": "FieldValueForbidden", "message": text, "field": "sendInitialEvents"}]
    return body


def forbidden(watch: bool, route: Route) -> dict:
    """RBAC's 403 for a list or watch (recorded: a watch of Pods by a user without the verb)."""
    body = json.loads((_RECORDED / "forbidden.json").read_text())
    verb, scope = "watch" if watch else "list", (f'in the namespace "{route.namespace}"' if route.namespace
                                                 else "at the cluster scope")
    group = route.api_version.rpartition("/")[0]
    body["message"] = (f'{route.plural} is forbidden: User "system:serviceaccount:infergate:infergate" cannot {verb} resource "{route.plural}" '
                       f'in API group "{group}" {scope}')
    body["details"] = {"kind": route.plural} if not group else {"group": group, "kind": route.plural}
    return body


def partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": copy.deepcopy(obj["metadata"])}


def _matches_labels(obj: dict, selector: str) -> bool:
    """Equality-based label selectors (``a=b,c==d,e!=f``, ``g``), what the clients send."""
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


@dataclass(eq=False)
class Collection:
    """One resource collection (apiVersion + plural): what was asked of it, and its watchers."""

    api_version: str
    plural: str
    kind_name: str
    typed_list: bool = False  # list items without kind/apiVersion, as typed clients receive them
    kind: WatchedKind | None = None
    oldest: int = 0  # watches from before this resourceVersion get 410 Gone
    lists: int = 0
    watch_requests: list[dict] = field(default_factory=list)
    fail_next_watch: int | None = None  # an HTTP status to answer the next watch with, once
    forbidden: bool = False  # every list and watch answers 403, as RBAC without the verbs
    views: list[tuple[str, str]] = field(default_factory=list)  # (list or watch, full or metadata)
    sent: bytearray = field(default_factory=bytearray)  # every byte of every answer
    watchers: list[tuple[str | None, asyncio.Queue]] = field(default_factory=list)  # (namespace, events)
    store: dict[Key, dict] = field(default_factory=dict, repr=False)  # the server's store

    @property
    def objects(self) -> dict[str, dict]:
        """This collection's objects by name."""
        return {key[3]: obj for key, obj in self.store.items() if key[:2] == (self.api_version, self.plural)}


class FakeApiServer:
    def __init__(self, objects: tuple[dict, ...] | list[dict] = (), *, builtins: bool = False) -> None:
        self.resource_version = 100
        self.objects: dict[Key, dict] = {}
        self.resources: dict[tuple[str, str], Collection] = {}
        # discovery: apiVersion -> {plural: (kind, namespaced)}; what GET /api(s)/<version> lists
        self.served: dict[str, dict[str, tuple[str, bool]]] = {}
        # (apiVersion, plural) of CRD versions without a /status subresource: there a PUT writes
        # status and a create keeps it; every other kind's status changes only through /status
        self.plain_status: set[tuple[str, str]] = set()
        self.events: list[tuple[int, str, Key, dict]] = []  # (resourceVersion, type, key, object)
        self.requests: list[tuple[str, str]] = []
        self.managers: list[tuple[str, str, str]] = []  # (method, path, field manager) of every write
        self.on_change: Callable[[str, dict], None] | None = None
        self.watch_list = True  # serves sendInitialEvents (the WatchList feature, on by default since v1.34)
        if builtins:
            for api_version, kinds in BUILT_IN.items():
                for kind in kinds:
                    self.serve_resource(api_version, plural_of(kind), kind, kind not in CLUSTER_SCOPED,
                                        status=kind != "Namespace")
        for obj in objects:
            self.put(copy.deepcopy(obj), self._plural(obj["apiVersion"], obj["kind"]))

    # -- what is served ---------------------------------------------------------------------

    def serve_resource(self, api_version: str, plural: str, kind: str, namespaced: bool, *,
                       status: bool = False) -> Collection:
        self.served.setdefault(api_version, {})[plural] = (kind, namespaced)
        (self.plain_status.discard if status else self.plain_status.add)((api_version, plural))
        return self.collection(api_version, plural, kind)

    def serve(self, kind: WatchedKind, *, typed_list: bool = False) -> Collection:
        """Serve a kind the watch cache watches; the handle scripts and inspects it."""
        res = self.serve_resource(kind.api_version, kind.plural, kind.kind, kind.kind not in CLUSTER_SCOPED, status=True)
        res.kind, res.typed_list = kind, typed_list
        return res

    def collection(self, api_version: str, plural: str, kind: str | None = None) -> Collection:
        res = self.resources.get((api_version, plural))
        if res is None:
            res = self.resources[(api_version, plural)] = Collection(
                api_version, plural, kind or self._kind(api_version, plural), store=self.objects)
        elif kind and res.kind_name == plural:
            res.kind_name = kind
        return res

    def _kind(self, api_version: str, plural: str) -> str:
        return self.served.get(api_version, {}).get(plural, (plural,))[0]

    def _plural(self, api_version: str, kind: str) -> str:
        for plural, (served_kind, _) in self.served.get(api_version, {}).items():
            if served_kind == kind and "/" not in plural:
                return plural
        return plural_of(kind)

    # -- the store ----------------------------------------------------------------------------

    def _write(self, kind_of_event: str, key: Key, obj: dict) -> dict:
        self.resource_version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        if kind_of_event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = copy.deepcopy(obj)
        self.events.append((self.resource_version, kind_of_event, key, copy.deepcopy(obj)))
        if self.on_change is not None:
            self.on_change(kind_of_event, copy.deepcopy(obj))
        res = self.collection(key[0], key[1], obj.get("kind"))
        for namespace, queue in res.watchers:
            if namespace in (None, key[2]):
                queue.put_nowait({"type": kind_of_event, "object": copy.deepcopy(obj)})
        return obj

    def _serve_crd(self, crd: dict) -> None:
        """A created CRD is served at once and Established (a real apiserver takes a moment)."""
        spec = crd["spec"]
        for version in spec.get("versions", []):
            self.serve_resource(f"{spec['group']}/{version['name']}", spec["names"]["plural"], spec["names"]["kind"],
                                spec.get("scope") == "Namespaced",
                                status="status" in (version.get("subresources") or {}))
        conditions = (crd.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Established" for c in conditions):
            crd["status"] = {**(crd.get("status") or {}), "conditions": [{"type": "Established", "status": "True"}]}

    def put(self, obj: dict, plural: str) -> dict:
        """Create or replace an object directly (a test playing another client)."""
        meta = obj.setdefault("metadata", {})
        key = (obj["apiVersion"], plural, meta.get("namespace"), meta["name"])
        self.collection(obj["apiVersion"], plural, obj.get("kind"))
        old = self.objects.get(key)
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta["generation"] = (old or {}).get("metadata", {}).get("generation", 0) + (
            1 if old is None or _without_meta_and_status(old) != _without_meta_and_status(obj) else 0)
        if obj.get("kind") == "CustomResourceDefinition":
            self._serve_crd(obj)
        return self._write("ADDED" if old is None else "MODIFIED", key, obj)

    def get(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return copy.deepcopy(self.objects.get((api_version, plural, namespace, name)))

    def remove(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict:
        key = (api_version, plural, namespace, name)
        return self._write("DELETED", key, self.objects[key])

    def all_objects(self) -> list[dict]:
        return [copy.deepcopy(o) for o in self.objects.values()]

    def writes(self, suffix: str = "/status") -> list[str]:
        return [path for method, path in self.requests if method in ("PUT", "POST", "PATCH") and path.endswith(suffix)]

    # -- scripting a served kind (the watch cache's tests) -----------------------------------

    def _scripted(self, res: Collection, kind_of_event: str, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind_name)
        meta = obj.setdefault("metadata", {})
        if res.kind is not None and res.kind.namespace:  # a kind watched in one namespace
            meta.setdefault("namespace", res.kind.namespace)
        return self._write(kind_of_event, (res.api_version, res.plural, meta.get("namespace"), meta["name"]), obj)

    def add(self, res: Collection, obj: dict) -> dict:
        return self._scripted(res, "ADDED", obj)

    def modify(self, res: Collection, obj: dict) -> dict:
        return self._scripted(res, "MODIFIED", obj)

    def delete(self, res: Collection, obj: dict) -> dict:
        return self._scripted(res, "DELETED", obj)

    def bookmark(self, res: Collection) -> None:
        self.resource_version += 1
        event = {"type": "BOOKMARK", "object": {"kind": res.kind_name, "apiVersion": res.api_version,
                                                "metadata": {"resourceVersion": str(self.resource_version)}}}
        for _, queue in res.watchers:
            queue.put_nowait(event)

    def compact(self, res: Collection, *, silently_change: dict | None = None) -> None:
        """Expire the history (etcd compaction); live watchers get an ERROR 410 event.
        ``silently_change`` is written without any event: only a relist can see it."""
        if silently_change:
            self.resource_version += 1
            obj = copy.deepcopy(silently_change)
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.resource_version)
            self.objects[(res.api_version, res.plural, meta.get("namespace"), meta["name"])] = obj
        res.oldest = self.resource_version
        for _, queue in res.watchers:
            queue.put_nowait({"type": "ERROR", "object": gone(self.resource_version, self.resource_version)})
            queue.put_nowait(None)

    def end_streams(self, res: Collection) -> None:
        for _, queue in res.watchers:
            queue.put_nowait(None)

    # -- HTTP ---------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serve from a thread of its own (for synchronous clients); yields the base URL."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        runner = web.AppRunner(self.app(), shutdown_timeout=0.1)

        async def up() -> str:
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            return f"http://127.0.0.1:{runner.addresses[0][1]}"

        try:
            yield asyncio.run_coroutine_threadsafe(up(), loop).result(10)
        finally:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        manager = ""
        if request.method in ("POST", "PUT", "PATCH"):
            manager = request.query.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0]
            self.managers.append((request.method, request.path, manager))
        if request.path == "/version":
            return web.json_response({"major": "1", "minor": "36", "gitVersion": "v1.36.0"})
        discovery = self._discovery(request.path)
        if discovery is not None:
            return discovery
        route = parse_path(request.path)
        if route is None:
            return status_error(404, "NotFound", f"the server could not find the requested resource ({request.path})")
        if not self._routable(route.api_version, route.plural):
            return status_error(404, "NotFound", "the server could not find the requested resource")
        res = self.collection(route.api_version, route.plural)
        if request.method == "GET" and res.forbidden:
            return web.json_response(forbidden(request.query.get("watch") in ("true", "1"), route), status=403)
        if request.method == "GET" and route.name is None:
            if request.query.get("watch") in ("true", "1"):
                return await self.watch(request, res)
            return self.list(request, res)
        if request.method == "GET" and route.subresource is None:
            obj = self.get(route.api_version, route.plural, route.name, route.namespace)
            if obj is None:
                return self._not_found(route)
            return web.json_response(obj)
        if request.method == "POST" and route.name is None:
            return self._create(request, route, await request.json())
        if request.method == "PUT" and route.name is not None:
            return self._replace(route, await request.json(), manager)
        if request.method == "PATCH" and route.name is not None and route.subresource is None \
                and request.content_type == "application/apply-patch+yaml":
            return self._apply_whole(route, yaml.safe_load(await request.text()))
        if request.method == "PATCH" and route.name is not None and route.subresource is None \
                and request.content_type == "application/merge-patch+json":
            return self._merge_patch(route, await request.json())
        if request.method == "PATCH" and route.name is not None and route.subresource == "status":
            if request.content_type != "application/apply-patch+yaml":
                return status_error(415, "UnsupportedMediaType", f"{request.content_type} is not supported here")
            return self._apply_status(route, yaml.safe_load(await request.text()), manager,
                                      request.query.get("force") == "true")
        if request.method == "DELETE" and route.name is not None and route.subresource is None:
            if self.get(route.api_version, route.plural, route.name, route.namespace) is None:
                return self._not_found(route)
            return web.json_response(self.remove(route.api_version, route.plural, route.name, route.namespace))
        return status_error(405, "MethodNotAllowed", f"{request.method} is not supported here")

    def _routable(self, api_version: str, plural: str) -> bool:
        """Served: a built-in kind, a kind discovery lists, or one the test served or stored."""
        return ((api_version, plural) in ALWAYS_SERVED or (api_version, plural) in self.resources
                or plural in self.served.get(api_version, {}))

    def _not_found(self, route: Route) -> web.Response:
        return status_error(404, "NotFound", f'{route.plural} "{route.name}" not found')

    def _discovery(self, path: str) -> web.Response | None:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) == 2:
            api_version = parts[1]
        elif parts[:1] == ["apis"] and len(parts) == 3:
            api_version = f"{parts[1]}/{parts[2]}"
        else:
            return None
        resources = self.served.get(api_version)
        if not resources:
            return status_error(404, "NotFound", "the server could not find the requested resource")
        return web.json_response({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
            "resources": [{"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind,
                           "verbs": ["get", "list", "watch", "create", "update", "delete"]}
                          for plural, (kind, namespaced) in sorted(resources.items())],
        })

    def _items(self, res: Collection, namespace: str | None) -> list[dict]:
        return [copy.deepcopy(o) for (v, p, ns, _), o in sorted(self.objects.items(), key=lambda kv: (kv[0][3], str(kv[0][2])))
                if (v, p) == (res.api_version, res.plural) and namespace in (None, ns)]

    def list(self, request: web.Request, res: Collection) -> web.Response:
        res.lists += 1
        items = self._items(res, parse_path(request.path).namespace)
        selector = request.query.get("labelSelector")
        if selector:
            items = [o for o in items if _matches_labels(o, selector)]
        named = _selected_name(request)
        if named is not None:
            items = [o for o in items if o.get("metadata", {}).get("name") == named]
        metadata_only = metadata_view(request.headers.get("Accept", ""), "PartialObjectMetadataList")
        res.views.append(("list", "metadata" if metadata_only else "full"))
        if metadata_only:
            items = [partial(o) for o in items]
        elif res.typed_list:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        metadata = {"resourceVersion": str(self.resource_version)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        kind, api_version = ("PartialObjectMetadataList", "meta.k8s.io/v1") if metadata_only else (
            f"{res.kind_name}List", res.api_version)
        body = json.dumps({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}).encode()
        res.sent += body
        return web.Response(body=body, content_type="application/json")

    async def watch(self, request: web.Request, res: Collection) -> web.StreamResponse:
        namespace = parse_path(request.path).namespace
        res.watch_requests.append(dict(request.query))
        since = request.query.get("resourceVersion") or ""
        initial_events = request.query.get("sendInitialEvents") == "true"
        if initial_events and (not self.watch_list or request.query.get("resourceVersionMatch") != "NotOlderThan"):
            return web.json_response(watch_list_refused(self.watch_list), status=422)
        if res.fail_next_watch:
            status, res.fail_next_watch = res.fail_next_watch, None
            body = gone(since, self.resource_version) if status == 410 else status_body(status, "InternalError", "boom")
            return web.json_response(body, status=status)
        metadata_only = metadata_view(request.headers.get("Accept", ""), "PartialObjectMetadata")
        res.views.append(("watch", "metadata" if metadata_only else "full"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if since not in ("", "0") and int(since) < res.oldest:
            await response.write(json.dumps({"type": "ERROR", "object": gone(since, self.resource_version)}).encode() + b"\n")
            return response
        queue: asyncio.Queue = asyncio.Queue()
        named = _selected_name(request)
        if since in ("", "0"):  # no version: the current objects as ADDED, then what changes
            for obj in self._items(res, namespace):
                queue.put_nowait({"type": "ADDED", "object": obj})
            if initial_events:  # their end, as a bookmark (the real one carries the kind's empty shape)
                queue.put_nowait({"type": "BOOKMARK", "object": {
                    "kind": res.kind_name, "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.resource_version),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}}})
        else:
            for rv, kind_of_event, key, obj in self.events:
                if rv > int(since) and key[:2] == (res.api_version, res.plural) and namespace in (None, key[2]):
                    queue.put_nowait({"type": kind_of_event, "object": copy.deepcopy(obj)})
        watcher = (namespace, queue)
        res.watchers.append(watcher)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(request.query.get("timeoutSeconds") or 1800)
        try:
            while loop.time() < deadline:
                try:
                    event = await asyncio.wait_for(queue.get(), 0.05)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the client went away
                    continue
                if event is None:
                    break
                if named is not None and event["type"] in ("ADDED", "MODIFIED", "DELETED") \
                        and event["object"].get("metadata", {}).get("name") != named:
                    continue  # not the one name the field selector asks for
                if metadata_only and event["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    event = {"type": event["type"], "object": partial(event["object"])}
                line = json.dumps(event).encode() + b"\n"
                res.sent += line
                await response.write(line)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            res.watchers.remove(watcher)
        return response

    def _create(self, request: web.Request, route: Route, body: dict) -> web.Response:
        meta = body.setdefault("metadata", {})
        if route.namespace:
            meta.setdefault("namespace", route.namespace)
        body.setdefault("apiVersion", route.api_version)
        if self.get(route.api_version, route.plural, meta.get("name", ""), route.namespace) is not None:
            kind = self._kind(route.api_version, route.plural)
            return status_error(409, "AlreadyExists", f'{kind} "{meta.get("name")}" already exists')
        if (route.api_version, route.plural) not in self.plain_status:
            body.pop("status", None)  # a create ignores status where /status is a subresource
        if request.query.get("dryRun"):
            return web.json_response(body, status=201)
        return web.json_response(self.put(body, route.plural), status=201)

    def _apply_whole(self, route: Route, body: dict) -> web.Response:
        """Server-side apply of a whole object by the one manager that writes it (what the
        controller's generated objects get): created when absent, else the object becomes what
        was applied, its system metadata kept. Fields of other managers are not modelled here."""
        current = self.get(route.api_version, route.plural, route.name, route.namespace)
        body.setdefault("apiVersion", route.api_version)
        meta = body.setdefault("metadata", {})
        if route.namespace:
            meta.setdefault("namespace", route.namespace)
        if current is not None:
            system = ("name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion")
            body["metadata"] = {**{k: v for k, v in meta.items() if k not in system},
                                **{k: v for k, v in current["metadata"].items() if k in system}}
            if body == current:  # a no-op apply writes nothing, as the apiserver's
                return web.json_response(copy.deepcopy(current))
        return web.json_response(self.put(body, route.plural), status=200 if current is not None else 201)

    def _merge_patch(self, route: Route, patch: dict) -> web.Response:
        """A JSON merge patch (RFC 7386: a ``null`` removes the field) of an existing object; a
        patch that changes nothing writes nothing, as the apiserver's."""
        current = self.get(route.api_version, route.plural, route.name, route.namespace)
        if current is None:
            return self._not_found(route)
        updated = merge_patched(current, patch)
        if updated == current:
            return web.json_response(current)
        return web.json_response(self.put(updated, route.plural))

    def _apply_status(self, route: Route, body: dict, manager: str, force: bool) -> web.Response:
        key = (route.api_version, route.plural, route.namespace, route.name)
        current = self.objects.get(key)
        if current is None:
            return self._not_found(route)
        sent_version = (body.get("metadata") or {}).get("resourceVersion")
        if sent_version and sent_version != current["metadata"]["resourceVersion"]:
            return status_error(
                409, "Conflict",
                f'Operation cannot be fulfilled on {route.plural} "{route.name}": the object has been modified; '
                f"please apply your changes to the latest version and try again",
            )
        try:
            updated = managed_fields.apply(current, body, manager, root="status", subresource="status", force=force)
        except managed_fields.ApplyConflict as exc:
            return status_error(409, "Conflict", str(exc))
        if updated != current:  # a no-op apply writes nothing, as the apiserver's
            self.put(updated, route.plural)
        return web.json_response(copy.deepcopy(self.objects[key]))

    def _replace(self, route: Route, body: dict, manager: str = "") -> web.Response:
        key = (route.api_version, route.plural, route.namespace, route.name)
        current = self.objects.get(key)
        if current is None:
            return self._not_found(route)
        sent_version = (body.get("metadata") or {}).get("resourceVersion")
        if sent_version and sent_version != current["metadata"]["resourceVersion"]:  # none sent: unconditional
            return status_error(
                409, "Conflict",
                f'Operation cannot be fulfilled on {route.plural} "{route.name}": the object has been modified; '
                f"please apply your changes to the latest version and try again",
            )
        updated = copy.deepcopy(current)
        if route.subresource == "status":
            updated["status"] = body.get("status")
            updated = managed_fields.update(current, updated, manager, root="status", subresource="status")
        elif route.subresource == "finalize":
            updated["spec"] = body.get("spec")
        elif route.subresource is not None:
            return status_error(404, "NotFound", f"no subresource {route.subresource}")
        else:
            updated = copy.deepcopy(body)
            if (route.api_version, route.plural) not in self.plain_status or "status" not in body:
                updated.pop("status", None)
                if "status" in current:
                    updated["status"] = copy.deepcopy(current["status"])
            system = ("name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion")
            updated["metadata"] = {**{k: v for k, v in body.get("metadata", {}).items() if k not in system},
                                   **{k: v for k, v in current["metadata"].items() if k in system}}
        self.put(updated, route.plural)
        return web.json_response(copy.deepcopy(self.objects[key]))


def _without_meta_and_status(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _selected_name(request: web.Request) -> str | None:
    """The name of a ``fieldSelector=metadata.name=NAME`` (the one field selector served)."""
    selector = request.query.get("fieldSelector", "")
    return selector.removeprefix("metadata.name=") if selector.startswith("metadata.name=") else None


async def eventually(predicate: Callable[[], Any], timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")
