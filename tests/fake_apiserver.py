"""A fake kube-apiserver speaking the list/watch wire format (for the watch cache's tests)."""

from __future__ import annotations

import asyncio
import copy
import json

from aiohttp import web

from webhook.state.kube import WatchedKind


def metadata_view(accept: str, as_kind: str) -> bool:
    """Whether an ``Accept`` header asks for the metadata view ``as_kind`` before any other
    media type (the apiserver serves the first one it can)."""
    for media_range in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in media_range.split(";")[1:] if "=" in p)
        if media_range.split(";")[0].strip() not in ("application/json", "*/*"):
            continue
        return params.get("as") == as_kind and params.get("g") == "meta.k8s.io" and params.get("v") == "v1"
    return False


def partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": copy.deepcopy(obj["metadata"])}


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
        self.views: list[tuple[str, str]] = []  # (list or watch, "full" or "metadata") per request
        self.sent = bytearray()  # every byte of every answer, to look for what must not travel


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
        selected = _selected_name(request)
        items = [copy.deepcopy(o) for name, o in sorted(res.objects.items()) if selected in (None, name)]
        metadata_only = metadata_view(request.headers.get("Accept", ""), "PartialObjectMetadataList")
        res.views.append(("list", "metadata" if metadata_only else "full"))
        if metadata_only:
            items = [partial(o) for o in items]
        elif res.typed_list:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        start = int(request.query.get("continue", "0"))
        limit = int(request.query.get("limit", "0")) or len(items)
        page = items[start:start + limit]
        metadata = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        kind, api_version = ("PartialObjectMetadataList", "meta.k8s.io/v1") if metadata_only else (
            f"{res.kind.kind}List", res.kind.api_version)
        body = json.dumps({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}).encode()
        res.sent += body
        return web.Response(body=body, content_type="application/json")

    async def watch(self, request, res):
        rv = int(request.query.get("resourceVersion") or 0)
        res.watch_requests.append(dict(request.query))
        if res.fail_next_watch:
            status, res.fail_next_watch = res.fail_next_watch, None
            body = gone(rv) if status == 410 else {"kind": "Status", "code": status, "message": "boom"}
            return web.json_response(body, status=status)
        metadata_only = metadata_view(request.headers.get("Accept", ""), "PartialObjectMetadata")
        res.views.append(("watch", "metadata" if metadata_only else "full"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if rv < res.oldest:
            await response.write(json.dumps({"type": "ERROR", "object": gone(rv)}).encode() + b"\n")
            return response
        queue: asyncio.Queue = asyncio.Queue()
        selected = _selected_name(request)
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
                if selected is not None and event["type"] != "ERROR" \
                        and event["object"].get("metadata", {}).get("name") not in (None, selected):
                    continue  # not the one name the fieldSelector asks for
                if metadata_only and event["type"] in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    event = {"type": event["type"], "object": partial(event["object"])}
                line = json.dumps(event).encode() + b"\n"
                res.sent += line
                await response.write(line)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            res.watchers.remove(queue)
        return response


def _selected_name(request) -> str | None:
    """The name of a ``fieldSelector=metadata.name=NAME`` (the only field selector served)."""
    selector = request.query.get("fieldSelector", "")
    return selector.removeprefix("metadata.name=") if selector.startswith("metadata.name=") else None


async def eventually(predicate, timeout=15.0):
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


