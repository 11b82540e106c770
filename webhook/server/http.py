"""HTTP handling: the routes, reviews decoded and answered, every other request answered
with a ``metav1.Status`` (4xx for what the client sent, 500 for a bug, never a traceback),
and the health, readiness and metrics endpoints.

Every well-formed review gets HTTP 200 with an AdmissionReview in the version asked;
where and when it is judged is :mod:`webhook.server.scheduling`'s business.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
from aiohttp import hdrs, web

from webhook import logs
from webhook.admission.review import AdmissionRequest, AdmissionResult, clip_message, response_review
from webhook.server.metrics import Metrics
from webhook.server.admitter import CHAIN_CHECK, Advisory, AdmitterSlot, ReadinessCheck, run_check
from webhook.server.decode import BadReview, decode_review, query_timeout
from webhook.server.processes import PROCESS_HEADER, SCOPE_PROCESS, Siblings
from webhook.server.scheduling import LoopBatch, Placement, Review, Scheduler, who

log = logs.get("server")

JSON_MEDIA_TYPE = "application/json"


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
    # Seconds to read a body that did not arrive with its headers; a slower one gets 408.
    body_timeout: float = 10.0


@dataclass
class ServerState:
    slot: AdmitterSlot
    config: ServerConfig
    metrics: Metrics
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
    # the other processes of ``serve --processes`` (None: this one serves alone)
    siblings: Siblings | None = None
    scheduler: Scheduler = field(init=False)
    batch: LoopBatch[Review] = field(init=False)

    def __post_init__(self) -> None:
        config = self.config
        placement = Placement(config.inline_max_bytes, config.inline_max_cpu_seconds, config.inline_max_seconds)
        self.scheduler = Scheduler(self.slot, self.metrics, placement, failure_mode=config.failure_mode,
                                   workers=config.workers)
        self.batch = LoopBatch(self._decode, self.scheduler.judge_if_quick)

    def _decode(self, review: Review) -> None:
        """The first stage of a batch: the review decoded (or :class:`BadReview`)."""
        review.api_version, review.admission = decode_review(review.body)
        review.key = (review.endpoint, self.metrics.kind_label(review.admission.kind.kind or "-"))


STATE = web.AppKey("infergate", ServerState)


def status_body(code: int, reason: str, message: str) -> bytes:
    return orjson.dumps(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    )


def _status_response(code: int, reason: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=code, body=status_body(code, reason, message), content_type=JSON_MEDIA_TYPE,
                        headers=headers)


def _too_large(limit: int) -> str:
    return f"request body larger than {limit} bytes"


def _without_client_certificate(request: web.Request) -> bool:
    """Whether this connection presented no client certificate. One that does not verify
    against the client CA never gets here: the handshake fails."""
    tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
    return tls is None or not tls.getpeercert(binary_form=True)


class _ClientGone(Exception):
    """The client closed its connection before its request was read."""


class _BodyTooSlow(Exception):
    """The body did not arrive within the body timeout."""


async def _read_body(request: web.Request, config: ServerConfig) -> bytes:
    """The body, within ``config.body_timeout`` unless it came with the headers (the usual
    case: then nothing waits, and no timer is set)."""
    try:
        if request.content.is_eof():
            return await request.read()
        async with asyncio.timeout(config.body_timeout):
            return await request.read()
    except TimeoutError:
        raise _BodyTooSlow from None
    except web.HTTPRequestEntityTooLarge:
        raise BadReview(413, "RequestEntityTooLarge", _too_large(config.max_body_bytes)) from None
    except ConnectionError as exc:
        raise _ClientGone(str(exc) or type(exc).__name__) from None


# ---------------------------------------------------------------------------------------
# The review path.


async def _review(request: web.Request, *, mutating: bool) -> web.StreamResponse:
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
        body = await _read_body(request, state.config)
        review = await state.batch.submit(Review(endpoint, mutating, body))  # decoded, and judged if quick
    except BadReview as err:
        state.metrics.bad_requests.labels(err.reason).inc()
        log.warning("rejected request", extra={"fields": {"endpoint": endpoint, "code": err.code, "error": err.message}})
        return _status_response(err.code, err.reason, err.message)
    except _BodyTooSlow:
        return await _body_too_slow(request, state, endpoint)
    except _ClientGone as gone:  # routine: the apiserver gave up, a client was killed
        log.info("client went away before its request was read",
                 extra={"fields": {"endpoint": endpoint, "error": str(gone)}})
        return _status_response(400, "BadRequest", "connection closed before the request was read")

    admission = review.admission
    if review.result is None:  # for the worker pool, or the chain is not ready to judge
        # The apiserver says how long it waits (?timeout=, at most 30s); answer before that.
        timeout = min(query_timeout(request.rel_url.raw_query_string) or state.config.default_timeout, 30.0)
        deadline = started + max(timeout - state.config.timeout_margin, 0.001)
        review.result = await state.scheduler.judge(admission, mutating=mutating, deadline=deadline, key=review.key)
    result = review.result
    body = orjson.dumps(response_review(review.api_version, admission.uid, result, with_patch=mutating))

    elapsed = time.perf_counter() - started
    state.metrics.review_answered(endpoint, review.key[1], admission.operation, result.allowed, elapsed)
    _log_review(endpoint, admission, result, elapsed, mutating=mutating)
    return web.Response(body=body, content_type=JSON_MEDIA_TYPE)


async def _body_too_slow(request: web.Request, state: ServerState, endpoint: str) -> web.StreamResponse:
    """408, and the connection closed at once: the rest of a slow body is not waited for
    (aiohttp would linger, reading it, before closing)."""
    limit = state.config.body_timeout
    state.metrics.bad_requests.labels("RequestTimeout").inc()
    log.info("request body not received in time; connection closed",
             extra={"fields": {"endpoint": endpoint, "body_timeout_seconds": limit}})
    response = _status_response(408, "RequestTimeout", f"request body not received within {limit:g} seconds")
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the 408 is flushed before the TLS connection shuts down
    return response


def _log_review(endpoint: str, admission: AdmissionRequest, result: AdmissionResult, elapsed: float, *, mutating: bool) -> None:
    if result.allowed and not log.isEnabledFor(logging.DEBUG):  # skip building the fields
        return
    fields = who(admission) | {
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


# ---------------------------------------------------------------------------------------
# Handlers and routes.

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def never_a_traceback(handler: Handler) -> Handler:
    """``handler``, answering its own failures with a ``metav1.Status`` (never a traceback).

    A wrapper per route rather than a middleware: aiohttp runs a middleware as two more
    coroutines and a partial per request, a visible share of a review's CPU."""

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
            return _status_response(500, "InternalError", "internal error (see the webhook's logs)")

    return answered


def _http_error(code: int, reason: str, headers: dict[str, str] | None = None) -> web.Response:
    return _status_response(code, reason.replace(" ", ""), reason, headers)


@never_a_traceback
async def mutate(request: web.Request) -> web.StreamResponse:
    return await _review(request, mutating=True)


@never_a_traceback
async def validate(request: web.Request) -> web.StreamResponse:
    return await _review(request, mutating=False)


@never_a_traceback
async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@never_a_traceback
async def readyz(request: web.Request) -> web.Response:
    """Kubernetes-style: one ``[+]name ok`` / ``[-]name failed: why`` line per check; with
    sibling processes, one more per sibling (``process-N``): the group is ready when all are."""
    state = request.app[STATE]
    lines, ready = [], True
    for name, check in (state.readiness | state.slot.prerequisites).items():
        problem = run_check(check)
        if problem is None:
            lines.append(f"[+]{name} ok")
        elif isinstance(check, Advisory):  # reported, never failing (see Advisory)
            lines.append(f"[+]{name} ok (degraded: {problem}; serving the last synced picture)")
        else:
            ready = False
            lines.append(f"[-]{name} failed: {problem}")
    siblings, headers = state.siblings, None
    if siblings is not None:
        headers = {PROCESS_HEADER: str(siblings.group.index)}
        if request.query.get("scope") != SCOPE_PROCESS:
            for name, problem in await siblings.readiness():
                ready = ready and problem is None
                lines.append(f"[+]{name} ok" if problem is None else f"[-]{name} failed: {problem}")
    lines.append("readyz check passed" if ready else "readyz check failed")
    return web.Response(status=200 if ready else 503, text="\n".join(lines) + "\n", headers=headers)


@never_a_traceback
async def metrics(request: web.Request) -> web.Response:
    """This process's metrics; with sibling processes, summed over the group."""
    state = request.app[STATE]
    body, headers = state.metrics.render(), {"Content-Type": state.metrics.content_type}
    if state.siblings is not None:
        headers[PROCESS_HEADER] = str(state.siblings.group.index)
        if request.query.get("scope") != SCOPE_PROCESS:
            body = await state.siblings.metrics(body)
    return web.Response(body=body, headers=headers)


async def method_not_allowed(request: web.Request) -> web.Response:
    """Any other method on one of the paths above (a route of the same resource)."""
    allowed = sorted({route.method for route in request.match_info.route.resource or () if route.method != hdrs.METH_ANY})
    return _http_error(405, "Method Not Allowed", {"Allow": ",".join(allowed)})


async def not_found(request: web.Request) -> web.Response:
    """Every other path."""
    return _http_error(404, "Not Found")


def create_app(
    slot: AdmitterSlot, config: ServerConfig, *, metrics_: Metrics | None = None,
    readiness: dict[str, ReadinessCheck] | None = None, siblings: Siblings | None = None,
) -> web.Application:
    """The aiohttp application (no TLS, no sockets: the caller runs it)."""
    app = web.Application(client_max_size=config.max_body_bytes)  # no middleware: see never_a_traceback
    state = ServerState(slot=slot, config=config, metrics=metrics_ or Metrics(), readiness=dict(readiness or {}),
                        siblings=siblings)
    state.readiness.setdefault(CHAIN_CHECK, slot.chain_problem)
    app[STATE] = state

    async def worker_pool(app: web.Application):
        state.scheduler.start()
        yield
        state.scheduler.stop()

    app.cleanup_ctx.append(worker_pool)
    for path, handler in {"/mutate": mutate, "/validate": validate}.items():
        app.router.add_post(path, handler)
        app.router.add_route(hdrs.METH_ANY, path, method_not_allowed)  # the same resource: tried after POST
    for path, handler in {"/healthz": healthz, "/readyz": readyz, "/metrics": metrics}.items():
        app.router.add_get(path, handler)  # and HEAD
        app.router.add_route(hdrs.METH_ANY, path, method_not_allowed)
    app.router.add_route(hdrs.METH_ANY, "/{path:.*}", not_found)
    return app
