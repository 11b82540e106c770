"""Shared fixtures of the reliability tests: a real infergate HTTPS server on loopback,
run in its own thread and event loop, so that synchronous drivers (hypothesis, plain
``ssl`` sockets, ``http.client``) and async tests can hit it alike."""

from __future__ import annotations

import asyncio
import http.client
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from webhook import certs
from webhook.admission.review import AdmissionRequest, AdmissionResult
from webhook.server.metrics import Metrics
from webhook.server import AdmitterSlot, ServerConfig, create_app

MiB = 1024 * 1024


class RecordingAdmitter:
    """Allows everything and keeps what it saw: the server mechanics without a chain."""

    def __init__(self) -> None:
        self.seen: list[AdmissionRequest] = []

    def admit(self, request: AdmissionRequest, *, mutating: bool) -> AdmissionResult:
        self.seen.append(request)
        return AdmissionResult(allowed=True)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class ServerThread:
    """``create_app`` + ``CertKeeper`` + ``TCPSite`` on 127.0.0.1, in a thread of its own."""

    def __init__(
        self, cert_dir: Path, admitter: Any, *, failure_mode: str = "deny", max_body_bytes: int = 7 * MiB,
        default_timeout: float = 10.0, client_ca: bytes | None = None, workers: int = 2,
        readiness: dict[str, Callable[[], str | None]] | None = None, manage: bool = True,
        watch_interval: float | None = None, prerequisites: dict[str, Callable[[], str | None]] | None = None,
    ):
        self.cert_dir = cert_dir
        self.keeper = certs.CertKeeper(
            certs.DirectoryStore(cert_dir), sans=certs.serving_sans(), policy=certs.RotationPolicy(), manage=manage,
            client_ca=client_ca, watch=certs.FileWatcher(cert_dir / f for f in certs.FILES),
        )
        self.slot = AdmitterSlot(admitter, prerequisites)
        self.config = ServerConfig(max_body_bytes=max_body_bytes, default_timeout=default_timeout,
                                   timeout_margin=0.25, failure_mode=failure_mode, workers=workers,
                                   client_certificates=client_ca is not None)
        self.readiness = readiness or {}
        self.watch_interval = watch_interval
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="infergate-test-server", daemon=True)

    # lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> ServerThread:
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by __enter__
            self._error = exc
            self._started.set()

    async def _serve(self) -> None:
        import logging

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ctx = self.keeper.start()
        self.metrics = Metrics()
        app = create_app(self.slot, self.config, metrics_=self.metrics,
                         readiness={"certificates": self.keeper.problem, **self.readiness})
        runner = web.AppRunner(app, shutdown_timeout=5, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx).start()
        self.port = runner.addresses[0][1]
        keeper_task = None
        if self.watch_interval is not None:
            keeper_task = asyncio.create_task(self.keeper.run(
                check_interval=3600, watch_interval=self.watch_interval, logger=logging.getLogger("infergate.certs")))
        self._started.set()
        await self._stop.wait()
        if keeper_task is not None:
            keeper_task.cancel()
        await runner.cleanup()

    # clients ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        assert self.keeper.bundle is not None
        return self.keeper.bundle.ca_pem()

    def client(self, **kw: Any) -> Client:
        return Client(self.port, certs.client_context(self.ca_pem), **kw)


class Client:
    """A keep-alive HTTPS client that verifies the server's CA (``http.client``: no loop)."""

    def __init__(self, port: int, context: ssl.SSLContext, timeout: float = 30.0):
        self.port, self.context, self.timeout = port, context, timeout
        self._conn: http.client.HTTPSConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None, *,
                content_type: str = "application/json") -> Answer:
        for attempt in (1, 2):  # a kept-alive connection the server closed: one redial
            if self._conn is None:
                self._conn = http.client.HTTPSConnection("localhost", self.port, context=self.context, timeout=self.timeout)
            try:
                headers = {"Content-Type": content_type} if body is not None else {}
                self._conn.request(method, path, body=body, headers=headers)
                resp = self._conn.getresponse()
                data = resp.read()
                return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def post(self, path: str, body: bytes | dict, **kw: Any) -> Answer:
        return self.request("POST", path, body if isinstance(body, bytes) else orjson.dumps(body), **kw)

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def review(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
           uid: str | None = None, subresource: str = "", api_version: str = "admission.k8s.io/v1",
           resource: str | None = None) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it for ``obj``."""
    subject = obj or old or {}
    group, _, version = str(subject.get("apiVersion", "v1")).rpartition("/")
    kind = str(subject.get("kind", ""))
    meta = subject.get("metadata") if isinstance(subject.get("metadata"), dict) else {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource or kind.lower() + "s"}
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()), "kind": gvk, "resource": gvr, "subResource": subresource,
            "requestKind": gvk, "requestResource": gvr,
            "name": str(meta.get("name", "")), "namespace": str(meta.get("namespace", "")),
            "operation": operation, "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj, "oldObject": old, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
        },
    }


def assert_well_formed(answer: Answer, *, uid: str | None = None) -> dict[str, Any]:
    """The server's promise for any input: a JSON body that is either a metav1.Status
    (4xx, with a message and no traceback) or an AdmissionReview answering ``uid``."""
    assert answer.headers.get("content-type", "").startswith("application/json"), answer.headers
    body = answer.json()
    assert b"Traceback" not in answer.body and b'File "' not in answer.body
    if answer.status == 200:
        assert body["kind"] == "AdmissionReview" and isinstance(body["response"]["allowed"], bool), body
        if uid is not None:
            assert body["response"]["uid"] == uid
        if not body["response"]["allowed"]:
            status = body["response"].get("status") or {}
            assert status.get("message"), body  # a denial says why
    else:
        assert answer.status in (400, 413, 415), (answer.status, body)
        assert body["kind"] == "Status" and body["code"] == answer.status and body["message"], body
    return body


@pytest.fixture
def recording_server(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "certs", RecordingAdmitter()) as server:
        yield server


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)
