"""KubeState against the Kubernetes API's wire format.

A small aiohttp server speaks what kube-apiserver speaks to an informer: paged list
JSON (typed lists omit each item's kind), chunked ``?watch=true`` streams of
ADDED/MODIFIED/DELETED/BOOKMARK events, ``ERROR`` events carrying a 410 ``Status``,
and plain HTTP errors. The client is a real ``kubernetes.client.ApiClient``.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from aiohttp import web
from kubernetes.client import ApiClient, Configuration

from webhook.state.kube import Backoff, KubeState, WatchedKind

NAMESPACES = WatchedKind("v1", "Namespace", "namespaces")
SECRETS = WatchedKind("v1", "Secret", "secrets")
CLASSES = WatchedKind("ai.deckhouse.io/v1alpha1", "InferenceServiceClass", "inferenceserviceclasses")
MISSING = WatchedKind("ai.deckhouse.io/v1alpha1", "ClusterModel", "clustermodels")


def gone(rv):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rv} (9999)", "reason": "Expired", "code": 410}


class Resource:
    """One collection: its objects, a resourceVersion history and live watchers."""

    def __init__(self, kind: WatchedKind, typed_list: bool):
        self.kind, self.typed_list = kind, typed_list
        self.objects: dict[str, dict] = {}
        self.history: list[tuple[int, dict]] = []
        self.watchers: list[asyncio.Queue] = []
        self.oldest = 0  # watches from before this resourceVersion get 410
        self.lists = 0
        self.watch_requests: list[dict] = []
        self.fail_next_watch: int | None = None  # an HTTP status to answer once


class FakeApiServer:
    def __init__(self):
        self.rv = 100
        self.resources: dict[str, Resource] = {}
        self.app = web.Application()
        self.app.router.add_get("/{path:.*}", self.handle)

    def serve(self, kind: WatchedKind, *, typed_list: bool = False) -> Resource:
        self.resources[kind.path] = Resource(kind, typed_list)
        return self.resources[kind.path]

    # -- scripting the cluster --------------------------------------------------
    def _event(self, res: Resource, type_: str, obj: dict) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", res.kind.api_version)
        obj.setdefault("kind", res.kind.kind)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        name = obj["metadata"]["name"]
        if type_ == "DELETED":
            self.objects_of(res).pop(name, None)
        else:
            self.objects_of(res)[name] = obj
        event = {"type": type_, "object": obj}
        res.history.append((self.rv, event))
        for queue in res.watchers:
            queue.put_nowait(event)

    def objects_of(self, res):
        return res.objects

    def add(self, res, obj):
        self._event(res, "ADDED", obj)

    def modify(self, res, obj):
        self._event(res, "MODIFIED", obj)

    def delete(self, res, obj):
        self._event(res, "DELETED", obj)

    def bookmark(self, res):
        self.rv += 1
        event = {"type": "BOOKMARK", "object": {"kind": res.kind.kind, "apiVersion": res.kind.api_version,
                                                "metadata": {"resourceVersion": str(self.rv)}}}
        for queue in res.watchers:
            queue.put_nowait(event)

    def compact(self, res, *, silently_change: dict | None = None):
        """Expire history (etcd compaction); live watchers get an ERROR 410 event.
        ``silently_change`` is written without any event: only a relist can see it."""
        if silently_change:
            self.rv += 1
            obj = copy.deepcopy(silently_change)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            res.objects[obj["metadata"]["name"]] = obj
        res.oldest = self.rv
        for queue in res.watchers:
            queue.put_nowait({"type": "ERROR", "object": gone(self.rv)})
            queue.put_nowait(None)

    def end_streams(self, res):
        for queue in res.watchers:
            queue.put_nowait(None)

    # -- the HTTP side -------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        res = self.resources.get("/" + request.match_info["path"])
        if res is None:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "the server could not find the requested resource",
                                      "reason": "NotFound", "code": 404}, status=404)
        if request.query.get("watch") == "true":
            return await self.watch(request, res)
        return self.list(request, res)

    def list(self, request, res):
        res.lists += 1
        items = [copy.deepcopy(o) for _, o in sorted(res.objects.items())]
        if res.typed_list:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        start = int(request.query.get("continue", "0"))
        limit = int(request.query.get("limit", "0")) or len(items)
        page = items[start:start + limit]
        metadata = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return web.json_response({"kind": f"{res.kind.kind}List", "apiVersion": res.kind.api_version,
                                  "metadata": metadata, "items": page})

    async def watch(self, request, res):
        rv = int(request.query.get("resourceVersion") or 0)
        res.watch_requests.append(dict(request.query))
        if res.fail_next_watch:
            status, res.fail_next_watch = res.fail_next_watch, None
            body = gone(rv) if status == 410 else {"kind": "Status", "code": status, "message": "boom"}
            return web.json_response(body, status=status)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if rv < res.oldest:
            await response.write(json.dumps({"type": "ERROR", "object": gone(rv)}).encode() + b"\n")
            return response
        queue: asyncio.Queue = asyncio.Queue()
        for event_rv, event in res.history:
            if event_rv > rv:
                queue.put_nowait(event)
        res.watchers.append(queue)
        try:
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), 0.05)
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the client went away
                    continue
                if event is None:
                    break
                await response.write(json.dumps(event).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            res.watchers.remove(queue)
        return response


async def eventually(predicate, timeout=5.0):
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


@pytest.fixture
async def cluster(aiohttp_server):
    api = FakeApiServer()
    server = await aiohttp_server(api.app)
    config = Configuration(host=str(server.make_url("")).rstrip("/"))
    client = ApiClient(config)
    states = []

    def make_state(kinds, **kw):
        state = KubeState(client, kinds, backoff=Backoff(0.01, 0.05), **kw)
        states.append(state)
        state.start()
        return state

    yield api, make_state
    for state in states:
        await asyncio.to_thread(state.stop, 2.0)
    client.close()


def names(state, kind):
    return [o["metadata"]["name"] for o in state.list(kind.api_version, kind.kind)]


async def test_paged_list_then_watch_events(cluster):
    api, make_state = cluster
    ns = api.serve(NAMESPACES, typed_list=True)
    for name in ("a", "b", "c"):
        api.add(ns, {"metadata": {"name": name, "labels": {"team": name}}})
    state = make_state((NAMESPACES,), page_size=2)
    assert await state.wait_ready(5)
    assert names(state, NAMESPACES) == ["a", "b", "c"]
    assert state.get("v1", "Namespace", "a")["kind"] == "Namespace"  # filled in for typed lists
    assert ns.lists == 2  # two pages
    await eventually(lambda: ns.watchers)
    assert ns.watch_requests[0]["allowWatchBookmarks"] == "true"
    assert ns.watch_requests[0]["resourceVersion"] == str(api.rv)

    api.add(ns, {"metadata": {"name": "d"}})
    api.modify(ns, {"metadata": {"name": "a", "labels": {"team": "x"}}})
    api.delete(ns, {"metadata": {"name": "b"}})
    await eventually(lambda: names(state, NAMESPACES) == ["a", "c", "d"])
    assert state.list("v1", "Namespace", label_selector="team=x")[0]["metadata"]["name"] == "a"


async def test_bookmark_moves_the_resume_point(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    state = make_state((CLASSES,))
    assert await state.wait_ready(5)
    await eventually(lambda: classes.watchers)
    api.bookmark(classes)
    bookmark_rv = str(api.rv)
    await asyncio.sleep(0.1)
    api.end_streams(classes)  # the server's timeoutSeconds elapsed
    await eventually(lambda: len(classes.watch_requests) == 2)
    assert classes.watch_requests[1]["resourceVersion"] == bookmark_rv
    assert classes.lists == 1  # resumed, not relisted


async def test_410_error_event_relists(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    api.add(classes, {"metadata": {"name": "old"}, "spec": {"v": 1}})
    state = make_state((CLASSES,))
    assert await state.wait_ready(5)
    await eventually(lambda: classes.watchers)
    api.compact(classes, silently_change={"apiVersion": CLASSES.api_version, "kind": CLASSES.kind,
                                          "metadata": {"name": "old"}, "spec": {"v": 2}})
    await eventually(lambda: state.get(CLASSES.api_version, CLASSES.kind, "old")["spec"] == {"v": 2})
    assert classes.lists == 2 and state.relists_on_gone == 1


async def test_http_410_and_500_on_watch(cluster):
    api, make_state = cluster
    classes = api.serve(CLASSES)
    classes.fail_next_watch = 410
    state = make_state((CLASSES,))
    assert await state.wait_ready(5)
    await eventually(lambda: classes.lists == 2)  # 410 on the watch request: relist
    await eventually(lambda: classes.watchers)
    classes.fail_next_watch = 500
    api.end_streams(classes)
    await eventually(lambda: len(classes.watch_requests) >= 4)  # the 500 is retried after backoff
    api.add(classes, {"metadata": {"name": "late"}})
    await eventually(lambda: names(state, CLASSES) == ["late"])
    assert classes.lists == 2


async def test_kind_not_served_is_empty_and_ready(cluster):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    state = make_state((NAMESPACES, MISSING))
    assert await state.wait_ready(5)
    assert state.list(MISSING.api_version, MISSING.kind) == []


async def test_not_ready_until_every_kind_listed(cluster):
    api, make_state = cluster
    api.serve(NAMESPACES, typed_list=True)
    classes = api.serve(CLASSES)
    classes.fail_next_watch = None
    # make the class list fail until we say so
    original = api.list
    blocked = {"on": True}

    def list_or_fail(request, res):
        if res is classes and blocked["on"]:
            return web.json_response({"kind": "Status", "code": 503}, status=503)
        return original(request, res)

    api.list = list_or_fail
    state = make_state((NAMESPACES, CLASSES))
    assert not await state.wait_ready(0.3)
    assert not state.ready
    blocked["on"] = False
    assert await state.wait_ready(5)


async def test_secrets_are_cached_without_data(cluster):
    api, make_state = cluster
    secrets = api.serve(SECRETS, typed_list=True)
    api.add(secrets, {"metadata": {"name": "hf", "namespace": "team-a"}, "type": "Opaque",
                      "data": {"token": "c2VjcmV0"}})
    state = make_state((SECRETS,))
    assert await state.wait_ready(5)
    await eventually(lambda: secrets.watchers)
    api.modify(secrets, {"metadata": {"name": "hf", "namespace": "team-a"}, "data": {"token": "bmV3", "x": "eQ=="}})
    await eventually(lambda: state.get("v1", "Secret", "hf", "team-a").get("dataKeys") == ["token", "x"])
    assert "data" not in state.get("v1", "Secret", "hf", "team-a")
