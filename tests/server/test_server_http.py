"""The HTTP contract of /mutate and /validate over real TLS (a client verifying the CA),
with a scripted admitter standing in for the chain (the real chain: test_server_chain.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import threading

import aiohttp
import jsonpatch
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from prometheus_client.parser import text_string_to_metric_families

from webhook import certs
from webhook import logs
from webhook.server import STATE, timeout_seconds

from .conftest import MODEL, ScriptedAdmitter, client_identity, review, start_server, stop_server

def with_notes(**notes: str) -> dict:
    obj = json.loads(json.dumps(MODEL))
    obj["metadata"]["annotations"] = {f"test/{k}": v for k, v in notes.items()}
    return obj


async def test_health_ready_and_metrics_over_verified_tls(server):
    s = server.session()
    async with s.get(server.url + "/healthz") as r:
        assert r.status == 200 and await r.text() == "ok"
    async with s.get(server.url + "/readyz") as r:
        assert r.status == 200
        assert (await r.text()).splitlines() == ["[+]certificates ok", "[+]policies ok", "readyz check passed"]
    await server.post("/validate", review(MODEL))
    await server.post("/validate", review(with_notes(deny="no")))
    async with s.get(server.url + "/metrics") as r:
        text = await r.text()
    review_labels = {"endpoint": "validate", "kind": "Model", "operation": "CREATE"}
    assert sample(text, "infergate_admission_reviews_total", verdict="allowed", **review_labels) == 1
    assert sample(text, "infergate_admission_reviews_total", verdict="denied", **review_labels) == 1
    assert sample(text, "infergate_admission_review_duration_seconds_count", endpoint="validate", kind="Model") == 2
    expiry = server.keeper.bundle.cert.not_valid_after_utc.timestamp()
    assert sample(text, "infergate_certificate_expiry_timestamp_seconds", certificate="serving") == expiry


def sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None


async def test_a_client_not_trusting_the_ca_is_refused(server):
    stranger = certs.plan(None, now=certs.utcnow(), sans=("localhost",), policy=certs.RotationPolicy()).bundle
    s = server.session(ca_pem=stranger.ca_pem())
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await s.get(server.url + "/healthz")


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
async def test_tls_1_2_and_1_3_negotiate_aead_suites(server, version):
    ctx = certs.client_context(server.ca_pem)
    ctx.minimum_version = ctx.maximum_version = version
    port = int(server.url.rsplit(":", 1)[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    ssl_object = writer.get_extra_info("ssl_object")
    assert ssl_object.version() == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]
    assert "GCM" in ssl_object.cipher()[0] or "CHACHA20" in ssl_object.cipher()[0]
    writer.close()


async def test_validate_echoes_uid_and_never_patches(server):
    status, body = await server.post("/validate", review(MODEL, uid="u-123"))
    assert status == 200
    assert body == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u-123", "allowed": True, "auditAnnotations": {"judged-by": "scripted"}},
    }


async def test_mutate_returns_a_base64_json_patch_that_applies(server):
    status, body = await server.post("/mutate", review(MODEL))
    resp = body["response"]
    assert status == 200 and resp["allowed"] and resp["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(resp["patch"]))
    patched = jsonpatch.apply_patch(MODEL, ops)
    assert patched["spec"]["defaulted"] is True and patched["spec"]["url"] == MODEL["spec"]["url"]


async def test_mutate_without_changes_sends_no_patch(server):
    obj = json.loads(json.dumps(MODEL))
    obj["spec"]["defaulted"] = True
    _, body = await server.post("/mutate", review(obj))
    assert "patch" not in body["response"] and "patchType" not in body["response"]


async def test_v1beta1_is_answered_in_v1beta1(server):
    _, body = await server.post("/mutate", review(MODEL, api_version="admission.k8s.io/v1beta1"))
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["patchType"] == "JSONPatch"


async def test_denial_carries_the_status_with_field_errors(server):
    status, body = await server.post("/validate", review(with_notes(deny='spec.url: Invalid value: "x": bad')))
    resp = body["response"]
    assert status == 200 and resp["allowed"] is False
    assert resp["status"]["code"] == 422 and resp["status"]["reason"] == "Invalid"
    assert resp["status"]["message"] == 'spec.url: Invalid value: "x": bad'
    assert resp["status"]["details"]["causes"][0]["field"] == "spec"


async def test_a_denied_mutation_sends_no_patch(server):
    _, body = await server.post("/mutate", review(with_notes(deny="no")))
    resp = body["response"]
    assert resp["allowed"] is False and "patch" not in resp and "patchType" not in resp


async def test_warnings_are_clipped_to_120_characters(server):
    long = "w" * 300
    _, body = await server.post("/validate", review(with_notes(warn=long)))
    (warning,) = body["response"]["warnings"]
    assert len(warning) <= 120 and warning.startswith("www") and warning.endswith("...")


async def test_delete_connect_and_dry_run_are_answered(server):
    admitter = server.slot.admitter
    _, body = await server.post("/validate", review(None, old=MODEL, operation="DELETE", uid="del"))
    assert body["response"] == {"uid": "del", "allowed": True}
    _, body = await server.post("/validate", review(MODEL, operation="CONNECT", uid="con"))
    assert body["response"]["uid"] == "con" and body["response"]["allowed"]
    _, body = await server.post("/mutate", review(MODEL, dry_run=True, uid="dry"))
    assert body["response"]["allowed"] and body["response"]["patchType"] == "JSONPatch"
    request, mutating = admitter.seen[-1]
    assert request.dryRun is True and mutating is True


async def test_status_subresource_is_passed_on_as_such(server):
    obj = dict(MODEL, status={"replicas": {"all": 1}})
    _, body = await server.post("/validate", review(obj, operation="UPDATE", old=MODEL, subresource="status"))
    assert body["response"]["allowed"]
    request, _ = server.slot.admitter.seen[-1]
    assert request.subResource == "status"


@pytest.mark.parametrize("mode", ["deny", "allow"])
async def test_internal_timeout_answers_before_the_apiservers_deadline_by_failure_mode(tmp_path, mode):
    running = await start_server(tmp_path, ScriptedAdmitter(), failure_mode=mode)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        status, body = await running.post("/validate?timeout=1s", review(with_notes(sleep="3"), uid="slow"))
        elapsed = loop.time() - started
        assert status == 200 and elapsed < 1.0
        resp = body["response"]
        assert resp["uid"] == "slow" and resp["auditAnnotations"] == {"failure": "timeout"}
        if mode == "deny":
            assert resp["allowed"] is False and resp["status"]["code"] == 504 and resp["status"]["reason"] == "Timeout"
        else:
            assert resp["allowed"] is True and "allowed by its failure mode" in resp["warnings"][0]
        async with running.sessions[0].get(running.url + "/metrics") as r:
            text = await r.text()
        assert sample(text, "infergate_admission_errors_total", endpoint="validate", kind="Model", reason="timeout") == 1
    finally:
        await stop_server(running)


async def test_admitter_crash_is_a_failure_mode_answer_never_a_traceback(server, caplog):
    with caplog.at_level(logging.ERROR, logger="infergate"):
        logs.get().propagate = True
        status, body = await server.post("/validate", review(with_notes(**{"raise": "1"})))
    assert status == 200
    resp = body["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 500
    assert "Traceback" not in resp["status"]["message"] and "secret-token" not in resp["status"]["message"]
    assert any("policy blew up" in r.exc_text for r in caplog.records if r.exc_text)


# ---------------------------------------------------------------------------------------
# Bad input: a clear 4xx, a metav1.Status body, the server keeps serving.


async def expect_status(server, path: str, data: bytes, code: int, message: str, content_type="application/json"):
    s = server.session()
    async with s.post(server.url + path, data=data, headers={"Content-Type": content_type}) as r:
        body = orjson.loads(await r.read())
    assert r.status == code, body
    assert body["kind"] == "Status" and body["code"] == code
    assert message in body["message"], body["message"]
    assert "Traceback" not in body["message"]


async def test_wrong_content_type_is_415(server):
    await expect_status(server, "/validate", orjson.dumps(review(MODEL)), 415, "content type must be application/json",
                        content_type="text/plain")


async def test_malformed_and_truncated_json_are_400(server):
    await expect_status(server, "/validate", b"{not json", 400, "malformed JSON")
    whole = orjson.dumps(review(MODEL))
    await expect_status(server, "/mutate", whole[: len(whole) // 2], 400, "malformed JSON")
    await expect_status(server, "/validate", b"", 400, "empty body")
    await expect_status(server, "/validate", b"[1, 2]", 400, "got a JSON list")


async def test_review_shape_errors_are_400_with_the_reason(server):
    no_request = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    await expect_status(server, "/validate", orjson.dumps(no_request), 400, "AdmissionReview has no request")
    no_uid = review(MODEL)
    del no_uid["request"]["uid"]
    await expect_status(server, "/validate", orjson.dumps(no_uid), 400, "request has no uid")
    wrong_version = review(MODEL, api_version="admission.k8s.io/v2")
    await expect_status(server, "/validate", orjson.dumps(wrong_version), 400, 'unsupported apiVersion "admission.k8s.io/v2"')
    wrong_kind = dict(review(MODEL), kind="TokenReview")
    await expect_status(server, "/validate", orjson.dumps(wrong_kind), 400, "expected kind AdmissionReview")
    bad_op = review(MODEL, operation="PATCH")
    await expect_status(server, "/validate", orjson.dumps(bad_op), 400, "request.operation")


@pytest.mark.parametrize("field,meta,message", [
    ("object", {"name": 5}, "request.object: Value error, metadata.name must be a string, not a number"),
    ("object", {"name": "m", "labels": {"team": ["a"]}}, "metadata.labels['team'] must be a string, not a list"),
    ("oldObject", {"name": "m", "annotations": "x"}, "request.oldObject: Value error, metadata.annotations must be an object of strings"),
    ("object", {"name": "m", "finalizers": ["a", 1]}, "metadata.finalizers must be a list of strings"),
    ("object", {"name": "m", "managedFields": [{}, "x"]}, "metadata.managedFields must be a list of objects"),
    ("object", ["not", "an", "object"], "metadata must be an object, not a list"),
])
async def test_metadata_that_would_not_decode_as_object_meta_is_400(server, field, meta, message):
    """The apiserver decodes metadata strictly before any webhook sees it: only another
    client sends anything else, and gets a 400 naming the field, not an internal error."""
    sent = review(MODEL, operation="UPDATE", old=MODEL)
    sent["request"][field] = dict(MODEL, metadata=meta)
    await expect_status(server, "/validate", orjson.dumps(sent), 400, message)


async def test_bodies_over_the_limit_are_413_declared_or_streamed(tmp_path):
    running = await start_server(tmp_path, ScriptedAdmitter(), max_body_bytes=64 * 1024)
    try:
        big = review(with_notes(pad="x" * 100_000))
        await expect_status(running, "/validate", orjson.dumps(big), 413, "larger than 65536 bytes")

        async def chunks():  # no Content-Length: the limit must hold while reading
            data = orjson.dumps(big)
            for i in range(0, len(data), 8192):
                yield data[i: i + 8192]

        s = running.session()
        async with s.post(running.url + "/validate", data=chunks(), headers={"Content-Type": "application/json"}) as r:
            assert r.status == 413
        status, body = await running.post("/validate", review(MODEL))  # still serving
        assert status == 200 and body["response"]["allowed"]
    finally:
        await stop_server(running)


async def test_a_client_dropping_mid_body_leaves_the_server_serving(server):
    port = int(server.url.rsplit(":", 1)[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=certs.client_context(server.ca_pem),
                                              server_hostname="localhost")
    writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 5000\r\n\r\n{\"apiVersion\":")
    await writer.drain()
    writer.close()
    status, body = await server.post("/validate", review(MODEL))
    assert status == 200 and body["response"]["allowed"]


async def test_other_methods_and_paths_get_json_errors(server):
    s = server.session()
    async with s.get(server.url + "/validate") as r:
        body = await r.json()
        assert r.status == 405 and r.headers["Allow"] == "POST"
        assert body["kind"] == "Status" and body["code"] == 405 and body["reason"] == "MethodNotAllowed"
    async with s.put(server.url + "/healthz") as r:
        assert r.status == 405 and r.headers["Allow"] == "GET,HEAD" and (await r.json())["code"] == 405
    async with s.head(server.url + "/healthz") as r:
        assert r.status == 200
    for path in ("/nope", "/", "/validate/more", "/%2e%2e/etc"):
        async with s.post(server.url + path, json={}) as r:
            body = await r.json()
            assert r.status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound", path


async def test_an_unexpected_error_is_a_500_status_never_a_traceback(server, monkeypatch, caplog):
    """A bug outside the chain (here: rendering the metrics) answers a metav1.Status 500;
    the traceback goes to the log only."""
    def broken() -> bytes:
        raise RuntimeError("render failed: secret-token-123")

    monkeypatch.setattr(server.app[STATE].metrics, "render", broken)
    with caplog.at_level(logging.ERROR, logger="infergate"):
        logs.get().propagate = True
        async with server.session().get(server.url + "/metrics") as r:
            body = await r.json()
    assert r.status == 500 and body["kind"] == "Status" and body["reason"] == "InternalError"
    assert "secret-token" not in json.dumps(body) and "Traceback" not in json.dumps(body)
    assert any("render failed" in r.exc_text for r in caplog.records if r.exc_text)
    status, answer = await server.post("/validate", review(MODEL))  # still serving
    assert status == 200 and answer["response"]["allowed"]


def test_timeouts_are_go_durations():
    assert timeout_seconds("10s") == 10
    assert timeout_seconds("1m30s") == 90
    assert timeout_seconds("2.5s") == 2.5
    assert timeout_seconds("500ms") == 0.5
    assert timeout_seconds("") is None and timeout_seconds("10") is None and timeout_seconds("10x") is None
    assert timeout_seconds("0s") is None and timeout_seconds("-5s") is None  # the server's default applies


async def test_mtls_requires_a_client_certificate_for_reviews_but_not_for_probes(tmp_path):
    """``--client-ca-file``: reviews need the apiserver's client certificate; the kubelet's
    probes (and a metrics scraper) present none and still get /healthz, /readyz, /metrics;
    a certificate from another CA fails the handshake."""
    import datetime as dt

    now = certs.utcnow()
    client_ca, client_ca_key = certs.issue_ca(now=now, validity=dt.timedelta(days=1))
    stranger_ca, stranger_ca_key = certs.issue_ca(now=now, validity=dt.timedelta(days=1))
    apiserver_identity = client_identity(tmp_path, "kube-apiserver", client_ca, client_ca_key)
    stranger_identity = client_identity(tmp_path, "stranger", stranger_ca, stranger_ca_key)

    running = await start_server(tmp_path, ScriptedAdmitter(),
                                 client_ca=client_ca.public_bytes(serialization.Encoding.PEM))
    try:
        kubelet = running.session()  # verifies the server, presents no certificate
        for path in ("/healthz", "/readyz", "/metrics"):
            async with kubelet.get(running.url + path) as r:
                assert r.status == 200, path
        for path in ("/validate", "/mutate"):
            async with kubelet.post(running.url + path, json=review(MODEL, uid="anonymous")) as r:
                body = await r.json()
            assert r.status == 401 and body["kind"] == "Status" and body["code"] == 401, body
            assert body["reason"] == "Unauthorized" and "client certificate" in body["message"]
        assert not [req for req, _ in running.slot.admitter.seen if req.uid == "anonymous"]  # never judged

        stranger_ctx = certs.client_context(running.ca_pem)
        stranger_ctx.load_cert_chain(*stranger_identity)
        stranger = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=stranger_ctx))
        running.sessions.append(stranger)
        for path in ("/healthz", "/validate"):  # the handshake itself fails, whatever the path
            with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
                async with stranger.post(running.url + path, json=review(MODEL)) as r:
                    await r.read()

        ctx = certs.client_context(running.ca_pem)
        ctx.load_cert_chain(*apiserver_identity)
        apiserver = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))
        running.sessions.append(apiserver)
        async with apiserver.post(running.url + "/validate", json=review(MODEL, uid="mtls")) as r:
            assert r.status == 200 and (await r.json())["response"]["uid"] == "mtls"
        async with apiserver.get(running.url + "/metrics") as r:
            text = await r.text()
        assert sample(text, "infergate_http_rejected_total", reason="Unauthorized") == 2
    finally:
        await stop_server(running)


async def test_small_reviews_of_quick_kinds_are_judged_on_the_event_loop_the_rest_in_the_pool(tmp_path):
    """Placement: the pool (interruptible by the deadline) for a kind not yet seen, a large
    body or a kind whose last review was slow; the event loop (no thread hop) otherwise.
    The CPU bound is 10 ms here (1 ms by default) so that a loaded test machine cannot
    blur it; the wall-clock bound is the default 20 ms, which the sleeping review exceeds."""
    server = await start_server(tmp_path, ScriptedAdmitter(), inline_max_cpu_seconds=0.01)
    try:
        await _placements(server)
    finally:
        await stop_server(server)


async def _placements(server) -> None:
    on_loop = threading.current_thread().name  # the test's loop runs the server
    big = with_notes(padding="x" * (64 * 1024))
    sent = [
        ("/validate", MODEL, "pool"),  # Model on /validate: cost unknown yet
        ("/validate", MODEL, "loop"),  # judged quickly last time
        ("/validate", big, "pool"),  # over 64 KiB
        ("/mutate", MODEL, "pool"),  # each endpoint learns on its own
        ("/mutate", MODEL, "loop"),
        ("/validate", with_notes(sleep="0.05"), "loop"),  # cheap last time: on the loop, where it blocks 50 ms
        ("/validate", MODEL, "pool"),  # so back to the pool
        ("/validate", MODEL, "loop"),
    ]
    for path, obj, _ in sent:
        status, body = await server.post(path, review(obj))
        assert status == 200 and body["response"]["allowed"] is True
    where = ["loop" if name == on_loop else "pool" if name.startswith("admit") else name
             for name in server.slot.admitter.threads]
    assert where == [expected for _, _, expected in sent]


async def test_logs_are_json_lines_without_objects(server):
    """Every review at debug, denials at info; names and verdicts, never the object."""
    import io

    stream = io.StringIO()
    logs.configure("debug", stream=stream)
    try:
        secretish = with_notes(warn="token=s3cr3t-value")
        await server.post("/validate", review(secretish, uid="allowed-1"))
        await server.post("/validate", review(with_notes(deny="spec.engine: Unsupported value"), uid="denied-1"))
        await server.post("/validate", b"{broken", headers={"Content-Type": "application/json"})
    finally:
        logs.configure("info")
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    by_msg = {e["msg"]: e for e in entries}
    assert by_msg["review"]["level"] == "debug" and by_msg["review"]["uid"] == "allowed-1"
    assert by_msg["review"]["kind"] == "Model" and by_msg["review"]["name"] == "qwen" and by_msg["review"]["warnings"] == 1
    assert by_msg["denied"]["level"] == "info" and by_msg["denied"]["reason"] == "Invalid"
    assert by_msg["rejected request"]["code"] == 400
    text = stream.getvalue()
    assert "s3cr3t" not in text and MODEL["spec"]["url"] not in text


async def test_workers_zero_judges_on_the_event_loop(tmp_path):
    running = await start_server(tmp_path, ScriptedAdmitter(), workers=0)
    try:
        status, body = await running.post("/mutate", review(MODEL, uid="inline"))
        assert status == 200 and body["response"]["uid"] == "inline" and body["response"]["patchType"] == "JSONPatch"
        status, body = await running.post("/validate", review(with_notes(**{"raise": "1"})))
        assert status == 200 and body["response"]["status"]["code"] == 500
    finally:
        await stop_server(running)
