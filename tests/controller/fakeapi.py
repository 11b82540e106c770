"""A small Kubernetes API server for tests, speaking the real wire format over HTTP.

GET object, LIST (with resourceVersion), WATCH (JSON event lines), POST (create; 409
AlreadyExists), PUT (replace; 409 Conflict on a stale resourceVersion), PUT ``/status``
(only ``status`` changes; same 409) and server-side apply to ``/status`` (PATCH
``application/apply-patch+yaml``: managedFields kept by ``tests.support.managed_fields``, 409 on
a stale resourceVersion or on another manager's field). Every write's field manager is
recorded as the apiserver derives it (``?fieldManager=``, else the User-Agent's product). Every write bumps a global resourceVersion, as etcd does;
``metadata.generation`` moves when ``spec`` changes. Every request is recorded, so tests can
count writes. ``on_change`` lets a test mirror objects into an in-memory cluster view.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml
from aiohttp import web

from tests.support import managed_fields


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


def status_error(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


@dataclass
class FakeApiServer:
    kinds: dict[str, str] = field(default_factory=dict)  # plural -> kind
    objects: dict[tuple, dict] = field(default_factory=dict)  # (apiVersion, plural, ns, name) -> object
    requests: list[tuple[str, str]] = field(default_factory=list)
    managers: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, field manager) per write
    events: list[tuple[int, str, tuple, dict]] = field(default_factory=list)  # (rv, type, key, object)
    resource_version: int = 100
    on_change: Callable[[str, dict], None] | None = None
    # discovery: api_version -> {plural: (kind, namespaced)}; what GET /apis/<g>/<v> lists
    served: dict[str, dict[str, tuple[str, bool]]] = field(default_factory=dict)

    def __post_init__(self):
        self._changed = asyncio.Condition()

    # -- store ------------------------------------------------------------------------------

    def _bump(self) -> str:
        self.resource_version += 1
        return str(self.resource_version)

    def _record(self, kind_of_event: str, key: tuple, obj: dict) -> None:
        self.events.append((self.resource_version, kind_of_event, key, copy.deepcopy(obj)))
        if self.on_change is not None:
            self.on_change(kind_of_event, copy.deepcopy(obj))

        async def notify():
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_event_loop().create_task(notify())

    def put(self, obj: dict, plural: str) -> dict:
        """Create or replace an object directly (a test playing another client)."""
        meta = obj.setdefault("metadata", {})
        key = (obj["apiVersion"], plural, meta.get("namespace"), meta["name"])
        self.kinds[plural] = obj["kind"]
        old = self.objects.get(key)
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta["generation"] = (old or {}).get("metadata", {}).get("generation", 0) + (
            1 if old is None or old.get("spec") != obj.get("spec") else 0)
        meta["resourceVersion"] = self._bump()
        self.objects[key] = copy.deepcopy(obj)
        self._record("ADDED" if old is None else "MODIFIED", key, obj)
        return obj

    def delete(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> None:
        key = (api_version, plural, namespace, name)
        obj = self.objects.pop(key)
        obj["metadata"]["resourceVersion"] = self._bump()
        self._record("DELETED", key, obj)

    def get(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return copy.deepcopy(self.objects.get((api_version, plural, namespace, name)))

    def status_of(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict:
        return (self.get(api_version, plural, name, namespace) or {}).get("status") or {}

    def writes(self, suffix: str = "/status") -> list[str]:
        return [path for method, path in self.requests if method in ("PUT", "POST", "PATCH") and path.endswith(suffix)]

    # -- HTTP -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if request.method in ("POST", "PUT", "PATCH"):
            # as the apiserver: the fieldManager parameter, else the User-Agent up to its first "/"
            manager = request.query.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0]
            self.managers.append((request.method, request.path, manager))
        discovery = self._discovery(request.path)
        if discovery is not None:
            return discovery
        route = parse_path(request.path)
        if route is None:
            return status_error(404, "NotFound", f"the server could not find the requested resource ({request.path})")
        if request.method == "GET" and route.name is None:
            if request.query.get("watch") in ("true", "1"):
                return await self._watch(request, route)
            return self._list(route)
        if request.method == "GET":
            obj = self.get(route.api_version, route.plural, route.name, route.namespace)
            if obj is None:
                return status_error(404, "NotFound", f'{route.plural} "{route.name}" not found')
            return web.json_response(obj)
        if request.method == "POST" and route.name is None:
            return self._create(route, await request.json())
        if request.method == "PUT" and route.name is not None:
            return self._replace(route, await request.json(), self.managers[-1][2])
        if request.method == "PATCH" and route.name is not None and route.subresource == "status":
            if request.content_type != "application/apply-patch+yaml":
                return status_error(415, "UnsupportedMediaType", f"{request.content_type} is not supported here")
            return self._apply(route, yaml.safe_load(await request.text()), self.managers[-1][2],
                               request.query.get("force") == "true")
        return status_error(405, "MethodNotAllowed", f"{request.method} is not supported here")

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
                           "verbs": ["get", "list", "watch", "create", "update"]}
                          for plural, (kind, namespaced) in sorted(resources.items())],
        })

    def _list(self, route: Route) -> web.Response:
        items = [copy.deepcopy(o) for (v, p, ns, _), o in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
                 if v == route.api_version and p == route.plural and route.namespace in (None, ns)]
        kind = self.kinds.get(route.plural, route.plural)
        return web.json_response({"apiVersion": route.api_version, "kind": f"{kind}List",
                                  "metadata": {"resourceVersion": str(self.resource_version)}, "items": items})

    async def _watch(self, request: web.Request, route: Route) -> web.StreamResponse:
        since = int(request.query.get("resourceVersion") or self.resource_version)
        timeout = float(request.query.get("timeoutSeconds") or 30)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        sent = since
        try:
            while loop.time() < deadline:
                for rv, kind_of_event, key, obj in self.events:
                    if rv <= sent or key[0] != route.api_version or key[1] != route.plural:
                        continue
                    if route.namespace not in (None, key[2]):
                        continue
                    line = json.dumps({"type": kind_of_event, "object": obj}) + "\n"
                    await response.write(line.encode())
                    sent = rv
                sent = max(sent, self.resource_version)
                async with self._changed:
                    try:
                        await asyncio.wait_for(self._changed.wait(), max(0.01, deadline - loop.time()))
                    except asyncio.TimeoutError:
                        pass
        except ConnectionResetError:  # the client went away
            pass
        return response

    def _create(self, route: Route, body: dict) -> web.Response:
        meta = body.setdefault("metadata", {})
        if route.namespace:
            meta.setdefault("namespace", route.namespace)
        if self.get(route.api_version, route.plural, meta.get("name", ""), route.namespace) is not None:
            return status_error(409, "AlreadyExists", f'{route.plural} "{meta.get("name")}" already exists')
        body.setdefault("apiVersion", route.api_version)
        return web.json_response(self.put(body, route.plural), status=201)

    def _apply(self, route: Route, body: dict, manager: str, force: bool) -> web.Response:
        key = (route.api_version, route.plural, route.namespace, route.name)
        current = self.objects.get(key)
        if current is None:
            return status_error(404, "NotFound", f'{route.plural} "{route.name}" not found')
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
        if updated != current:  # a no-op apply writes nothing, as the apiserver
            self.put(updated, route.plural)
        return web.json_response(copy.deepcopy(self.objects[key]))

    def _replace(self, route: Route, body: dict, manager: str = "") -> web.Response:
        key = (route.api_version, route.plural, route.namespace, route.name)
        current = self.objects.get(key)
        if current is None:
            return status_error(404, "NotFound", f'{route.plural} "{route.name}" not found')
        sent_version = (body.get("metadata") or {}).get("resourceVersion")
        if sent_version != current["metadata"]["resourceVersion"]:
            return status_error(
                409, "Conflict",
                f'Operation cannot be fulfilled on {route.plural} "{route.name}": the object has been modified; '
                f"please apply your changes to the latest version and try again",
            )
        updated = copy.deepcopy(current)
        if route.subresource == "status":
            updated["status"] = body.get("status")
            updated = managed_fields.update(current, updated, manager, root="status", subresource="status")
        else:
            updated = {**body, "status": current.get("status")} if "status" in current else dict(body)
            updated["metadata"] = {**current["metadata"], **{k: v for k, v in body["metadata"].items()
                                                             if k in ("labels", "annotations")}}
        self.put(updated, route.plural)
        return web.json_response(copy.deepcopy(self.objects[key]))
