"""``infergate serve``: the admission webhook over HTTPS (aiohttp).

The request path is: limits and content type → decode (:mod:`webhook.admission.review`)
→ the admission chain, on the event loop for small reviews of quick kinds (a batch per
turn of the loop) or else in a worker thread against the apiserver's deadline → encode
in the AdmissionReview version asked. The chain is pure CPU work behind a one-method
interface (:class:`Admitter`), so everything here is the edge: HTTP, TLS, health,
metrics, logs and shutdown. Every well-formed review gets HTTP 200; anything else gets a
``metav1.Status`` with a clear message (never a traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime
import functools
import gc
import logging
import os
import signal
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import orjson
from aiohttp import hdrs, web
from pydantic import ValidationError

from webhook import logging as logs
from webhook.admission.review import (SUPPORTED_VERSIONS, AdmissionRequest, AdmissionResult, clip_message,
                                      response_review)
from webhook.metrics import Metrics
from webhook.settings import Settings
from webhook.gocompat.time import parse_go_duration

log = logs.get("server")

T = TypeVar("T")


class Admitter(Protocol):
    """What the server needs from the admission chain: a pure decision, no I/O."""

    def admit(self, request: AdmissionRequest, *, mutating: bool) -> AdmissionResult: ...


# A readiness check returns None when fine, else why not.
ReadinessCheck = Callable[[], "str | None"]


def _run_check(check: ReadinessCheck) -> str | None:
    try:
        return check()
    except Exception as exc:  # a broken check is a failed check, never a 500
        return f"check raised {type(exc).__name__}"


class AdmitterSlot:
    """The admitter, once loaded, and what it needs before it can judge.

    The server listens (and answers health checks) while the CRDs and policies compile in
    the background; reviews wait for the admitter within their deadline. ``prerequisites``
    are readiness checks of the admitter's inputs (the cluster state synced): /readyz shows
    them, and while one fails reviews get the failure mode rather than a verdict against
    an incomplete picture. ``set``/``fail`` are called on the event loop."""

    def __init__(self, admitter: Admitter | None = None, prerequisites: dict[str, ReadinessCheck] | None = None):
        self._admitter = admitter
        self.prerequisites: dict[str, ReadinessCheck] = dict(prerequisites or {})
        self._loaded = asyncio.Event()
        self.error: str | None = None
        if admitter is not None:
            self._loaded.set()

    def set(self, admitter: Admitter, prerequisites: dict[str, ReadinessCheck] | None = None) -> None:
        self.prerequisites.update(prerequisites or {})
        self._admitter = admitter
        self._loaded.set()

    def fail(self, error: str) -> None:
        self.error = error
        self._loaded.set()  # nothing to wait for: reviews get the failure mode at once

    @property
    def admitter(self) -> Admitter | None:
        return self._admitter

    async def wait(self, timeout: float) -> Admitter | None:
        if self._admitter is None:
            try:
                await asyncio.wait_for(self._loaded.wait(), max(timeout, 0))
            except TimeoutError:
                pass
        return self._admitter

    def unmet(self) -> str | None:
        """The first prerequisite that fails, as ``name: why``; None when all pass."""
        for name, check in self.prerequisites.items():
            problem = _run_check(check)
            if problem is not None:
                return f"{name}: {problem}"
        return None


@dataclass
class ServerConfig:
    max_body_bytes: int
    default_timeout: float
    timeout_margin: float
    failure_mode: str
    workers: int = 4
    # Reviews judged on the event loop (see Placement): bodies up to this size, of kinds
    # whose last review took at most this much CPU and this long.
    inline_max_bytes: int = 64 * 1024
    inline_max_cpu_seconds: float = 0.001
    inline_max_seconds: float = 0.02
    # Reviews only from clients presenting a certificate (the TLS context verifies it
    # against --client-ca-file); health, readiness and metrics stay open to probes.
    client_certificates: bool = False


@dataclass
class ServerState:
    slot: AdmitterSlot
    config: ServerConfig
    metrics: Metrics
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
    executor: concurrent.futures.ThreadPoolExecutor | None = None
    placement: Placement = field(init=False)
    batch: LoopBatch[Review] = field(init=False)

    def __post_init__(self) -> None:
        self.placement = Placement(self.config.inline_max_bytes, self.config.inline_max_cpu_seconds,
                                   self.config.inline_max_seconds)
        self.batch = LoopBatch(functools.partial(_decode, self), functools.partial(_judge_if_quick, self))


STATE = web.AppKey("infergate", ServerState)
JSON_MEDIA_TYPE = "application/json"


# ---------------------------------------------------------------------------------------
# Decoding: everything that is not a well-formed review becomes a 4xx with a message.


class BadReview(Exception):
    def __init__(self, code: int, reason: str, message: str):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def decode_review(body: bytes) -> tuple[str, AdmissionRequest]:
    """The apiVersion asked and the request; raises :class:`BadReview` with a clear message."""
    if not body:
        raise BadReview(400, "BadRequest", "empty body: expected an AdmissionReview")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(400, "BadRequest", f"malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadReview(400, "BadRequest", f"expected an AdmissionReview object, got a JSON {type(data).__name__}")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if kind != "AdmissionReview":
        raise BadReview(400, "BadRequest", f"expected kind AdmissionReview, got {kind!r}")
    if api_version not in SUPPORTED_VERSIONS:
        raise BadReview(
            400, "BadRequest",
            f"unsupported apiVersion {api_version!r}: expected one of {', '.join(SUPPORTED_VERSIONS)}",
        )
    request = data.get("request")
    if not isinstance(request, dict):
        raise BadReview(400, "BadRequest", "AdmissionReview has no request")
    if not request.get("uid"):
        raise BadReview(400, "BadRequest", "AdmissionReview request has no uid")
    try:  # the envelope is checked above: only the request goes through the model
        admission = AdmissionRequest.model_validate(request)
    except ValidationError as exc:
        raise BadReview(400, "BadRequest", f"invalid AdmissionReview: {_summarize(exc, 'request')}") from None
    return api_version, admission


def _summarize(exc: ValidationError, within: str = "") -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in (within, *error["loc"]) if p != "")
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


@functools.lru_cache(maxsize=64)  # the apiserver sends the same few query strings
def query_timeout(query: str) -> float | None:
    """``timeout_seconds`` of the first ``timeout=`` in a raw query string."""
    return next((timeout_seconds(value) for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True)
                 if name == "timeout"), None)


@functools.lru_cache(maxsize=64)
def timeout_seconds(text: str) -> float | None:
    """The apiserver's ``?timeout=`` (a Go duration: ``10s``, ``1m30s``, ``500ms``) in
    seconds; None when absent, not a duration, or not positive."""
    nanoseconds = parse_go_duration(text)
    return nanoseconds / 1e9 if nanoseconds is not None and nanoseconds > 0 else None


def status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    )


def _error_response(err: BadReview) -> web.Response:
    return web.Response(status=err.code, body=status_body(err.code, err.reason, err.message),
                        content_type=JSON_MEDIA_TYPE)


# ---------------------------------------------------------------------------------------
# The review path.


def failure_result(mode: str, cause: str, message: str) -> AdmissionResult:
    """What the configured failure mode answers when the chain cannot judge in time."""
    if mode == "allow":
        return AdmissionResult(
            allowed=True,
            warnings=[f"infergate did not judge this request ({cause}); allowed by its failure mode"],
            audit_annotations={"failure": cause},
        )
    code, reason = (504, "Timeout") if cause == "timeout" else (500, "InternalError")
    return AdmissionResult(
        allowed=False,
        status={"status": "Failure", "code": code, "reason": reason, "message": message},
        audit_annotations={"failure": cause},
    )


@dataclass(slots=True)
class Review:
    """One review on its way through the server (see :class:`LoopBatch`)."""

    endpoint: str
    mutating: bool
    body: bytes
    api_version: str = ""
    admission: AdmissionRequest = field(init=False)
    key: tuple[str, str] = ("", "")  # endpoint and kind label: Placement's and the metrics' key
    result: AdmissionResult | None = None


async def _review(request: web.Request, *, mutating: bool) -> web.Response:
    state = request.app[STATE]
    endpoint = "mutate" if mutating else "validate"
    started = time.perf_counter()
    try:
        if state.config.client_certificates and _without_client_certificate(request):
            raise BadReview(401, "Unauthorized", "a client certificate signed by the configured client CA is required")
        # The apiserver sends exactly "application/json": compared as is before parsing.
        if request.headers.get(hdrs.CONTENT_TYPE) != JSON_MEDIA_TYPE and request.content_type != JSON_MEDIA_TYPE:
            raise BadReview(415, "UnsupportedMediaType", f"content type must be application/json, got {request.content_type!r}")
        if request.content_length is not None and request.content_length > state.config.max_body_bytes:
            raise BadReview(413, "RequestEntityTooLarge", _too_large(state.config.max_body_bytes))
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise BadReview(413, "RequestEntityTooLarge", _too_large(state.config.max_body_bytes)) from None
        review = await state.batch.submit(Review(endpoint, mutating, body))  # decoded, and judged if quick
    except BadReview as err:
        state.metrics.bad_requests.labels(err.reason).inc()
        log.warning("rejected request", extra={"fields": {"endpoint": endpoint, "code": err.code, "error": err.message}})
        return _error_response(err)

    admission = review.admission
    if review.result is None:  # for the worker pool, or the chain is not ready to judge
        # The apiserver says how long it waits (?timeout=, at most 30s); answer before that.
        timeout = min(query_timeout(request.rel_url.raw_query_string) or state.config.default_timeout, 30.0)
        deadline = started + max(timeout - state.config.timeout_margin, 0.001)
        review.result = await _admit(state, admission, mutating=mutating, deadline=deadline, key=review.key)
    result = review.result
    body = orjson.dumps(response_review(review.api_version, admission.uid, result, with_patch=mutating))

    elapsed = time.perf_counter() - started
    state.metrics.review_answered(endpoint, review.key[1], admission.operation, result.allowed, elapsed)
    _log_review(endpoint, admission, result, elapsed, mutating=mutating)
    return web.Response(body=body, content_type=JSON_MEDIA_TYPE)


def _decode(state: ServerState, review: Review) -> None:
    """The first stage of a batch: the review decoded (or :class:`BadReview`)."""
    review.api_version, review.admission = decode_review(review.body)
    review.key = (review.endpoint, state.metrics.kind_label(review.admission.kind.kind or "-"))


def _judge_if_quick(state: ServerState, review: Review) -> None:
    """The second stage: the verdict, when the chain is ready and ``Placement`` puts the
    review on the event loop (else it stays None: the review's own task takes it on)."""
    admitter = state.slot.admitter
    if (admitter is not None and (state.executor is None or state.placement.on_loop(review.key, len(review.body)))
            and state.slot.unmet() is None):
        review.result = _judged_on_loop(state, admitter, review.admission, mutating=review.mutating, key=review.key)


def _without_client_certificate(request: web.Request) -> bool:
    """Whether this connection presented no client certificate. One that does not verify
    against the client CA never gets here: the handshake fails."""
    tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    return tls is None or not tls.getpeercert(binary_form=True)


def _too_large(limit: int) -> str:
    return f"request body larger than {limit} bytes"


class Placement:
    """Where the chain judges a review: on the event loop or in the worker pool.

    The pool costs a thread hop per review (~0.1 ms of CPU measured here, and the chain
    runs colder there: 6-20% more CPU per review in all for the shipped validations, whose
    chain costs 0.25-0.5 ms), but there the deadline can cut a slow review short and the
    loop keeps answering others meanwhile. So a review runs on the loop only when its body
    is small (the chain's cost grows with the object) and the last review of its endpoint
    and kind was cheap (CPU time: at most about ten hops) and quick (wall time: nothing
    blocked it); otherwise in the pool. A kind starts in the pool (its cost unknown), and
    one costly review sends it back there.
    """

    def __init__(self, max_bytes: int, max_cpu_seconds: float, max_seconds: float):
        self.max_bytes, self.max_cpu_seconds, self.max_seconds = max_bytes, max_cpu_seconds, max_seconds
        self._cheap: dict[tuple[str, str], bool] = {}  # bounded: 2 endpoints x bounded kind labels

    def on_loop(self, key: tuple[str, str], size: int) -> bool:
        return size <= self.max_bytes and self._cheap.get(key, False)

    def judged(self, key: tuple[str, str], cpu_seconds: float, seconds: float) -> None:
        self._cheap[key] = cpu_seconds <= self.max_cpu_seconds and seconds <= self.max_seconds


class LoopBatch(Generic[T]):
    """Work on the event loop, done a stage at a time for all the requests of a turn.

    The requests whose bodies were read in the same turn of the loop are decoded one
    after the other, then the quick ones judged one after the other, each stage for all of
    them before the next: the decoding code, then the chain's code and data, stay in the
    CPU's caches from one review to the next, instead of each review's chain evicting the
    server's path and the other way round (measured: BENCHMARKS.md, "Batches on the event
    loop"). Nothing waits for a batch to fill: it is what the loop already had, processed
    in the next turn; a lone review is a batch of one. A batch blocks the loop exactly as
    long as its reviews did one by one; its first review is answered after its last is
    judged."""

    def __init__(self, *stages: Callable[[T], None]) -> None:
        self.stages = stages
        self._pending: list[tuple[T, asyncio.Future[T]]] = []

    def submit(self, item: T) -> asyncio.Future[T]:
        """``item`` once every stage has run on it, or the exception a stage raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._run)  # after the tasks this turn has already scheduled
        self._pending.append((item, future))
        return future

    def _run(self) -> None:
        pending, self._pending = self._pending, []
        for stage in self.stages:
            for item, future in pending:
                if future.done():  # failed at an earlier stage, or its request went away
                    continue
                try:
                    stage(item)
                except Exception as exc:  # BadReview; the others go on
                    future.set_exception(exc)
        for item, future in pending:
            if not future.done():
                future.set_result(item)


def _timed(admit: Callable[[], AdmissionResult], placement: Placement, key: tuple[str, str]) -> AdmissionResult:
    """``admit()``, telling ``placement`` what it cost (CPU time of the thread running it)."""
    began, began_cpu = time.perf_counter(), time.thread_time()
    try:
        return admit()
    finally:
        placement.judged(key, time.thread_time() - began_cpu, time.perf_counter() - began)


def _judged_on_loop(state: ServerState, admitter: Admitter, admission: AdmissionRequest, *, mutating: bool,
                    key: tuple[str, str]) -> AdmissionResult:
    """The chain's verdict, judged here on the event loop (``Placement`` chose it)."""
    try:
        return _timed(functools.partial(admitter.admit, admission, mutating=mutating), state.placement, key)
    except Exception:
        return _failed(state, admission, key)


async def _admit(state: ServerState, admission: AdmissionRequest, *, mutating: bool, deadline: float,
                 key: tuple[str, str]) -> AdmissionResult:
    """The chain's verdict (or the failure mode's answer) wherever it is judged, waiting
    for the chain to load and judging in the worker pool against the deadline."""
    endpoint, kind = key
    mode = state.config.failure_mode
    admitter = state.slot.admitter or await state.slot.wait(deadline - time.perf_counter())
    if admitter is None:
        state.metrics.policy_errors.labels(endpoint, kind, "not-ready").inc()
        if state.slot.error is not None:
            return failure_result(mode, "not-ready", "infergate could not load its policies (see its logs)")
        return failure_result(mode, "not-ready", "infergate is still loading its policies; try again")
    if (unmet := state.slot.unmet()) is not None:
        state.metrics.policy_errors.labels(endpoint, kind, "not-ready").inc()
        return failure_result(mode, "not-ready", f"infergate cannot judge yet ({unmet}); try again")
    admit = functools.partial(admitter.admit, admission, mutating=mutating)
    try:
        if state.executor is None:  # workers=0: always on the event loop, never interruptible
            return admit()
        job = asyncio.get_running_loop().run_in_executor(state.executor, _timed, admit, state.placement, key)
        return await asyncio.wait_for(job, timeout=max(deadline - time.perf_counter(), 0))
    except TimeoutError:
        state.metrics.policy_errors.labels(endpoint, kind, "timeout").inc()
        log.error("admission timed out", extra={"fields": _who(admission) | {"endpoint": endpoint}})
        return failure_result(mode, "timeout", "infergate could not judge this request before the apiserver's timeout")
    except Exception:
        return _failed(state, admission, key)


def _failed(state: ServerState, admission: AdmissionRequest, key: tuple[str, str]) -> AdmissionResult:
    """The failure mode's answer when the chain raised (a bug: logged with its traceback)."""
    endpoint, kind = key
    state.metrics.policy_errors.labels(endpoint, kind, "error").inc()
    log.exception("admission failed", extra={"fields": _who(admission) | {"endpoint": endpoint}})
    return failure_result(state.config.failure_mode, "error",
                          "infergate failed to judge this request (internal error; see its logs)")


def _who(admission: AdmissionRequest) -> dict[str, Any]:
    return {
        "uid": admission.uid,
        "kind": admission.kind.kind,
        "namespace": admission.namespace or None,
        "name": admission.name or None,
        "operation": admission.operation,
        "subresource": admission.subResource or None,
        "user": admission.userInfo.username or None,
        "dry_run": admission.dryRun,
    }


def _log_review(endpoint: str, admission: AdmissionRequest, result: AdmissionResult, elapsed: float, *, mutating: bool) -> None:
    if result.allowed and not log.isEnabledFor(logging.DEBUG):  # skip building the fields
        return
    fields = _who(admission) | {
        "endpoint": endpoint,
        "allowed": result.allowed,
        "duration_ms": round(elapsed * 1000, 3),
    }
    if mutating and result.patch:
        fields["patched_paths"] = [op.get("path") for op in result.patch]
    if result.warnings:
        fields["warnings"] = len(result.warnings)
    if result.allowed:
        log.debug("review", extra={"fields": fields})
    else:
        status = result.status or {}
        fields |= {"code": status.get("code"), "reason": status.get("reason"), "message": clip_message(str(status.get("message")), 1024)}
        log.info("denied", extra={"fields": fields})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def never_a_traceback(handler: Handler) -> Handler:
    """``handler``, answering its own failures with a ``metav1.Status`` (never a traceback).

    A wrapper per route rather than a middleware: aiohttp runs a middleware as two more
    coroutines and a partial per request (~10 µs of a review's CPU, measured)."""

    @functools.wraps(handler)
    async def answered(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _http_error(exc.status, exc.reason)
        except Exception:
            log.exception("unhandled error", extra={"fields": {"path": request.path}})
            return web.Response(status=500, body=status_body(500, "InternalError", "internal error (see the webhook's logs)"),
                                content_type=JSON_MEDIA_TYPE)

    return answered


def _http_error(code: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=code, body=status_body(code, reason.replace(" ", ""), reason),
                        content_type=JSON_MEDIA_TYPE, headers=headers)


@never_a_traceback
async def mutate(request: web.Request) -> web.Response:
    return await _review(request, mutating=True)


@never_a_traceback
async def validate(request: web.Request) -> web.Response:
    return await _review(request, mutating=False)


@never_a_traceback
async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@never_a_traceback
async def readyz(request: web.Request) -> web.Response:
    """Kubernetes-style: one ``[+]name ok`` / ``[-]name failed: why`` line per check."""
    state = request.app[STATE]
    lines, ready = [], True
    for name, check in (state.readiness | state.slot.prerequisites).items():
        problem = _run_check(check)
        ready &= problem is None
        lines.append(f"[+]{name} ok" if problem is None else f"[-]{name} failed: {problem}")
    lines.append("readyz check passed" if ready else "readyz check failed")
    return web.Response(status=200 if ready else 503, text="\n".join(lines) + "\n")


@never_a_traceback
async def metrics(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return web.Response(body=state.metrics.render(), headers={"Content-Type": state.metrics.content_type})


async def method_not_allowed(request: web.Request) -> web.Response:
    """Any other method on one of the paths above (a route of the same resource)."""
    allowed = sorted({route.method for route in request.match_info.route.resource or () if route.method != hdrs.METH_ANY})
    return _http_error(405, "Method Not Allowed", {"Allow": ",".join(allowed)})


async def not_found(request: web.Request) -> web.Response:
    """Every other path."""
    return _http_error(404, "Not Found")


def create_app(
    slot: AdmitterSlot, config: ServerConfig, *, metrics_: Metrics | None = None,
    readiness: dict[str, ReadinessCheck] | None = None,
) -> web.Application:
    """The aiohttp application (no TLS, no sockets: the caller runs it)."""
    app = web.Application(client_max_size=config.max_body_bytes)  # no middleware: see never_a_traceback
    state = ServerState(slot=slot, config=config, metrics=metrics_ or Metrics(), readiness=dict(readiness or {}))
    state.readiness.setdefault("policies", lambda: None if slot.admitter is not None else (slot.error or "loading"))
    app[STATE] = state

    async def executor_lifecycle(app: web.Application):
        if config.workers:
            state.executor = concurrent.futures.ThreadPoolExecutor(config.workers, thread_name_prefix="admit")
        yield
        if state.executor is not None:
            state.executor.shutdown(wait=False, cancel_futures=True)

    app.cleanup_ctx.append(executor_lifecycle)
    for path, handler in {"/mutate": mutate, "/validate": validate}.items():
        app.router.add_post(path, handler)
        app.router.add_route(hdrs.METH_ANY, path, method_not_allowed)  # the same resource: tried after POST
    for path, handler in {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}.items():
        app.router.add_get(path, handler)  # and HEAD
        app.router.add_route(hdrs.METH_ANY, path, method_not_allowed)
    app.router.add_route(hdrs.METH_ANY, "/{path:.*}", not_found)
    return app


# ---------------------------------------------------------------------------------------
# `infergate serve`


def load_admitter(settings: Settings) -> tuple[Admitter, dict[str, ReadinessCheck]]:
    """The real admission chain over the configured (or shipped) CRDs, policies and state,
    and its prerequisites (see :class:`AdmitterSlot`): the cluster state synced.

    Policies are reloaded when their files change (a mounted ConfigMap); the last good set
    stays in force when a change does not load. The cluster state is a watch cache with
    ``--kube-state`` (ready once every kind is listed), else a directory of manifests."""
    from webhook import resources
    from webhook.admission.chain import AdmissionChain
    from webhook.policy import PolicyDirectory
    from webhook.schema import CRDRegistry
    from webhook.state import FileState

    registry = CRDRegistry.load([settings.crds_dir or resources.crds_dir()])
    policies = PolicyDirectory(settings.policies_dir or resources.policies_dir())
    policies.start()
    if settings.kube_state:
        from webhook.state import KubeState

        state = KubeState(_kube_api_client(settings.kubeconfig))
        state.start()
    else:
        state = FileState(settings.state_dir or resources.examples_dir())
    prerequisites: dict[str, ReadinessCheck] = {"cluster-state": lambda: None if state.ready else "not synced"}
    return AdmissionChain(registry, policies, state), prerequisites


def build_cert_keeper(settings: Settings, metrics_: Metrics):
    """The certificate keeper for the mode, and in secret mode the watch that keeps the
    caBundle in the webhook configurations (else None); neither started."""
    from webhook import certs

    sans = certs.serving_sans(settings.service, settings.extra_sans)
    policy = certs.RotationPolicy(
        ca_validity=settings.ca_validity, serving_validity=settings.serving_validity,
        overlap=datetime.timedelta(seconds=settings.rotation_overlap_seconds),
    )
    client_ca = settings.client_ca_file.read_bytes() if settings.client_ca_file else None
    on_bundle = publisher = None
    if settings.cert_mode == "secret":
        api_client = _kube_api_client(settings.kubeconfig)
        namespace, name = certs.parse_namespaced(settings.cert_secret or f"{_own_namespace()}/infergate-certs")
        store: Any = certs.SecretStore(api_client, namespace, name)
        watch = None

        def inject_ca(bundle: certs.CertBundle) -> None:
            changed = certs.inject_ca_bundle(api_client, settings.webhook_name, bundle.ca_pem())
            if changed:
                log.info("caBundle injected", extra={"fields": {"configurations": changed}})

        on_bundle = inject_ca
    else:
        store = certs.DirectoryStore(settings.cert_dir, signing=settings.cert_mode != "files")
        watch = certs.FileWatcher(settings.cert_dir / f for f in certs.FILES)
    keeper = certs.CertKeeper(
        store, sans=sans, policy=policy, manage=settings.cert_mode != "files", client_ca=client_ca,
        watch=watch, on_bundle=on_bundle, on_change=metrics_.certificate_served,
    )
    if on_bundle is not None:
        publisher = certs.WebhookConfigurationWatch(
            api_client, settings.webhook_name, lambda: keeper.bundle.ca_pem() if keeper.bundle else None,
            logger=logs.get("certs"))
    return keeper, publisher


def _kube_api_client(kubeconfig: Path | None):
    """In a pod: its service account; elsewhere: the kubeconfig (``--kubeconfig``, $KUBECONFIG)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=str(kubeconfig) if kubeconfig else None, client_configuration=configuration)
    return client.ApiClient(configuration)


def _own_namespace() -> str:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip()
    except OSError:
        return "infergate"


def try_it(settings: Settings) -> str:
    """Copy-paste commands for the embedded default: readiness, then a KubeAI Model the
    webhook denies (an ``ollama://`` URL with engine VLLM)."""
    host = "localhost" if settings.host in ("0.0.0.0", "::", "127.0.0.1", "") else settings.host
    base = f"https://{host}:{settings.port}"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "try-1",
            "kind": {"group": "kubeai.org", "version": "v1", "kind": "Model"},
            "resource": {"group": "kubeai.org", "version": "v1", "resource": "models"},
            "namespace": "default", "name": "demo", "operation": "CREATE",
            "object": {
                "apiVersion": "kubeai.org/v1", "kind": "Model",
                "metadata": {"name": "demo", "namespace": "default"},
                # as the apiserver sends it: the CRD's defaults already applied
                "spec": {"features": ["TextGeneration"], "url": "ollama://qwen2:0.5b", "engine": "VLLM",
                         "resourceProfile": "cpu:1", "targetRequests": 100, "scaleDownDelaySeconds": 30},
            },
        },
    }
    ca = settings.cert_dir / "ca.crt"
    return (
        f"  curl --cacert {ca} {base}/readyz\n"
        f"  curl --cacert {ca} -H 'Content-Type: application/json' {base}/validate -d '{orjson.dumps(review).decode()}'"
    )


AdmitterLoader = Callable[[Settings], "tuple[Admitter, dict[str, ReadinessCheck]]"]

GC_YOUNG_THRESHOLD = 10_000  # container objects allocated (net) between young collections (default 700)


def _freeze_loaded_heap() -> None:
    """Keep the loaded chain (CRD schemas, compiled policies, the state: long-lived) out of
    the cyclic GC's full collections, which otherwise walk all of it every few thousand
    reviews (measured with the reviews in the worker pool: ~25 µs of GC a review, 17 of it
    full collections; BENCHMARKS.md, "srvgap"). Objects made later are collected as
    usual; only cycles among today's objects that become garbage later are never freed
    (a policy set dropped by a reload: ~50 small objects, once).

    And collect the youngest generation less often: a review's objects die by reference
    counting, but the reviews in flight keep a few hundred alive, which the default
    threshold (700) walks again and again."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


async def serve(
    settings: Settings, *, load: AdmitterLoader = load_admitter,
    on_listening: Callable[[int], None] | None = None, stop_event: asyncio.Event | None = None,
    handle_signals: bool = True,
) -> int:
    """Run until SIGTERM/SIGINT (or ``stop_event``); returns the exit code."""
    metrics_ = Metrics()
    try:
        keeper, publisher = build_cert_keeper(settings, metrics_)
        ssl_context = await asyncio.to_thread(keeper.start)
    except Exception as exc:  # CertError, OSError, the cluster's config or API errors
        log.error("cannot set up TLS", extra={"fields": {"error": str(exc)}})
        print(f"infergate serve: cannot set up TLS: {exc}", file=sys.stderr)
        return 1

    slot = AdmitterSlot()
    readiness: dict[str, ReadinessCheck] = {"certificates": keeper.problem}
    config = ServerConfig(
        max_body_bytes=settings.max_body_bytes, default_timeout=settings.default_timeout,
        timeout_margin=settings.timeout_margin, failure_mode=settings.failure_mode, workers=settings.workers,
        client_certificates=settings.client_ca_file is not None,
    )
    app = create_app(slot, config, metrics_=metrics_, readiness=readiness)
    runner = web.AppRunner(app, shutdown_timeout=settings.shutdown_timeout, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, ssl_context=ssl_context, reuse_address=True)
    await site.start()

    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
        loop.add_signal_handler(sig, stop.set)

    async def load_chain() -> None:
        began = time.perf_counter()
        try:
            admitter, prerequisites = await asyncio.to_thread(load, settings)
        except Exception as exc:
            slot.fail(f"{type(exc).__name__}: {exc}")
            log.exception("cannot load the admission chain")
            return
        slot.set(admitter, prerequisites)
        from webhook.cel.cel_expr import warm_up_fallback

        await asyncio.to_thread(warm_up_fallback)  # ready meanwhile; frozen with the rest below
        _freeze_loaded_heap()
        log.info("admission chain loaded", extra={"fields": {"seconds": round(time.perf_counter() - began, 3)}})

    tasks = [
        asyncio.create_task(load_chain()),
        asyncio.create_task(keeper.run(check_interval=settings.cert_check_interval,
                                       watch_interval=settings.cert_watch_interval, logger=logs.get("certs"))),
    ]
    if publisher is not None:
        publisher.start()
    port = runner.addresses[0][1]
    settings_shown = settings.model_copy(update={"port": port})
    log.info("listening", extra={"fields": {"url": f"https://{settings.host}:{port}", "sans": list(keeper.sans),
                                            "cert_mode": settings.cert_mode}})
    print(f"infergate serving https://{settings.host}:{port} (certificate for {', '.join(keeper.sans)}; "
          f"CA bundle in {settings.cert_dir / 'ca.crt'})\ntry it:\n{try_it(settings_shown)}", flush=True)
    if on_listening is not None:
        on_listening(port)
    await stop.wait()

    if settings.shutdown_delay > 0:
        app[STATE].readiness["shutdown"] = lambda: "shutting down"
        log.info("draining: still answering, /readyz failing",
                 extra={"fields": {"delay_seconds": settings.shutdown_delay}})
        await asyncio.sleep(settings.shutdown_delay)
    log.info("shutting down: no new connections, finishing in-flight reviews",
             extra={"fields": {"grace_seconds": settings.shutdown_timeout}})
    for task in tasks:
        task.cancel()
    if publisher is not None:
        publisher.stop()
    await runner.cleanup()
    log.info("stopped")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags mirror :class:`Settings` (also settable as INFERGATE_<NAME> variables)."""
    a = parser.add_argument
    a("--host", help="address to listen on (default 0.0.0.0)")
    a("--port", type=int, help="port to listen on (default 8443; 0 picks a free one)")
    a("--cert-mode", choices=["self", "files", "secret"],
      help="self: generate and rotate in --cert-dir (default); files: serve and reload files managed elsewhere; "
           "secret: keep them in a Secret and inject the caBundle")
    a("--cert-dir", help="directory of ca.crt, ca.key, tls.crt, tls.key (default certs)")
    a("--cert-secret", help="NAMESPACE/NAME of the Secret holding the certificates (--cert-mode secret)")
    a("--service", help="NAMESPACE/NAME of the webhook's Service: its DNS names go into the certificate")
    a("--san", dest="extra_sans", metavar="NAME", action="append", help="extra DNS name or IP for the certificate (repeatable)")
    a("--client-ca-file", help="reviews require a client certificate signed by this CA (the apiserver's: mTLS); "
                               "/healthz, /readyz and /metrics answer without one (the kubelet's probes)")
    a("--kubeconfig", help="kubeconfig for --cert-mode secret outside a pod (default: $KUBECONFIG or ~/.kube/config)")
    a("--webhook-name", help="name of the webhook configurations to inject the caBundle into (default infergate)")
    a("--crds-dir", help="CRDs to serve (default: the shipped chart/crds)")
    a("--policies-dir", help="policies to enforce (default: the shipped policies/)")
    a("--state-dir", help="cluster state as YAML files (default: the example state in examples/state)")
    a("--kube-state", action="store_const", const=True, help="watch the cluster for its state instead of files")
    a("--failure-mode", choices=["deny", "allow"], help="answer on internal timeout or error (default deny)")
    a("--default-timeout", type=float, help="seconds allowed when the apiserver sends no ?timeout= (default 10)")
    a("--max-body-bytes", type=int, help="largest accepted request body (default 7 MiB)")
    a("--workers", type=int, help="threads judging large reviews and kinds that were slow to judge (default 4; "
                                  "small reviews of quick kinds are judged on the event loop); 0 judges every review "
                                  "on the event loop: a review that overruns its timeout cannot be cut short")
    a("--shutdown-timeout", type=float, help="seconds to finish in-flight reviews after SIGTERM (default 25)")
    a("--shutdown-delay", type=float, help="seconds to keep answering after SIGTERM with /readyz failing, "
                                           "before the listener closes (default 0; the chart sets 5)")
    a("--log-level", choices=["debug", "info", "warning", "error"], help="debug logs every review (default info)")


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.load(vars(args))
    except ValidationError as exc:
        print(f"infergate serve: {_summarize(exc)}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    try:
        import uvloop
    except ImportError:  # Windows
        return asyncio.run(serve(settings))
    return uvloop.run(serve(settings))
