"""A local apiserver that replays a recorded stream of Pods, for a cluster larger than the machine
can hold: ``bench/state_scale.py replay``.

The recorded events (the Pods' ``sendInitialEvents`` watch as kube-apiserver sent them) are
served ``copies`` times, each copy's Pod names prefixed (``c<N>-``) so that they are distinct
objects: to a streamed watch as those bytes, then the bookmark that ends the initial events; to
a paged list as pages of 500 of the same objects. Every other collection is empty (a stream of
the end bookmark alone; an empty list). Watches then stay open and quiet until their timeout.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from typing import Callable

import orjson
import yaml
from aiohttp import web

PAGE = 500


def copies_of(lines: list[bytes], copies: int) -> list[bytes]:
    out = []
    for c in range(copies):
        prefix = f'"name":"c{c}-'.encode()
        out += [line.replace(b'"name":"vllm-', prefix + b"vllm-", 1) for line in lines]
    return out


def _end(kind: str) -> bytes:
    return orjson.dumps({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": "v1", "metadata": {
        "resourceVersion": "1", "annotations": {"k8s.io/initial-events-end": "true"}}}}) + b"\n"


def app(events: list[bytes]) -> web.Application:
    # a list's items are the events' objects, cut out of the event lines as they are
    objects = [line[line.index(b'"object":') + 9:line.rindex(b"}")] for line in events]

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/version":
            return web.json_response({"major": "1", "minor": "36", "gitVersion": "v1.36.2"})
        is_pods = request.path.rstrip("/").endswith("/pods")
        if request.query.get("watch") in ("true", "1"):
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            if request.query.get("sendInitialEvents") == "true":
                if is_pods:
                    for start in range(0, len(events), 1000):
                        await response.write(b"\n".join(events[start:start + 1000]) + b"\n")
                await response.write(_end("Pod" if is_pods else "Unknown"))
            try:
                await asyncio.sleep(float(request.query.get("timeoutSeconds") or 300))
            except asyncio.CancelledError:
                pass
            return response
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(objects)
        page = objects[start:start + limit] if is_pods else []
        more = is_pods and start + limit < len(objects)
        metadata = b'{"resourceVersion":"1"' + (f',"continue":"{start + limit}"'.encode() if more else b"") + b"}"
        body = b'{"kind":"List","apiVersion":"v1","metadata":' + metadata + b',"items":[' + b",".join(page) + b"]}"
        return web.Response(body=body, content_type="application/json")

    application = web.Application()
    application.router.add_route("GET", "/{tail:.*}", handle)
    return application


class Running:
    """The replay server on a thread of its own, and a kubeconfig naming it."""

    def __init__(self, events: list[bytes]):
        self.events = events
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(app(self.events), handle_signals=False)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self) -> str:
        self.thread.start()
        self.ready.wait(30)
        self.dir = tempfile.TemporaryDirectory(prefix="h9-replay-")
        kubeconfig = Path(self.dir.name) / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "replay",
            "clusters": [{"name": "replay", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "replay", "user": {"token": "replay"}}],
            "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "replay"}}]}))
        return str(kubeconfig)

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.dir.cleanup()


def replay(stream: Path, copies: int, baseline: Path | None, measure: Callable[..., dict], reps: int = 2,
           tree: Path | None = None) -> dict:
    lines = [line for line in stream.read_bytes().splitlines() if line.strip()]
    result: dict = {"recorded_pods": len(lines), "pods": len(lines) * copies,
                    "wire_bytes_per_pod": round(sum(map(len, lines)) / max(1, len(lines)))}
    for label, n in (("empty", 0), ("full", copies)):
        with Running(copies_of(lines, n)) as kubeconfig:
            runs = {"serve": [measure(kubeconfig, tree) for _ in range(reps)]}
            if baseline:
                runs["serve_baseline"] = [measure(kubeconfig, baseline) for _ in range(reps)]
        result[label] = {name: {"ready_s": min(r["ready_s"] for r in rs), "rss_mib": max(r["rss_mib"] for r in rs),
                                "peak_mib": max(r["peak_mib"] for r in rs), "runs": reps}
                         for name, rs in runs.items()}
    return result
