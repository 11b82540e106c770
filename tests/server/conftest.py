"""Fixtures for the server tests: a real HTTPS server on loopback, a client that verifies
its CA, and AdmissionReview builders."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook import certs
from webhook.admission.review import AdmissionRequest, AdmissionResult
from webhook.server.metrics import Metrics
from webhook.server import AdmitterSlot, ServerConfig, create_app, load_admitter
from webhook.server.settings import Settings
from tests.support.cel import EVALUATOR

TEST_POLICY = certs.RotationPolicy()


# A valid KubeAI Model, as a client writes it.
MODEL = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "metadata": {"name": "qwen", "namespace": "team-a"},
    "spec": {"features": ["TextGeneration"], "url": "hf://Qwen/Qwen2.5-0.5B", "engine": "VLLM", "resourceProfile": "cpu:1"},
}


def review(
    obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
    api_version: str = "admission.k8s.io/v1", uid: str | None = None, subresource: str = "",
    dry_run: bool = False, gvr: tuple[str, str, str] | None = None, kind: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it for ``obj`` (or ``old`` on DELETE)."""
    subject = obj or old or {}
    group, _, version = subject.get("apiVersion", "v1").rpartition("/")
    kind = kind or subject.get("kind", "")
    resource = gvr or (group, version, kind.lower() + "s")
    meta = subject.get("metadata", {})
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": resource[0], "version": resource[1], "resource": resource[2]},
            "subResource": subresource,
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": resource[0], "version": resource[1], "resource": resource[2]},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
        },
    }


def client_identity(tmp_path: Path, name: str, ca, ca_key) -> tuple[Path, Path]:
    """A client certificate (clientAuth) for ``name`` signed by ``ca``, as files."""
    now = certs.utcnow()
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(certs.key_pem(key))
    return paths


class ScriptedAdmitter:
    """A stand-in chain for the server mechanics: it acts on ``metadata.annotations``
    (``test/deny``: deny with that message; ``test/warn``: warn; ``test/sleep``: seconds
    to block; ``test/raise``: fail) and, when mutating, adds ``spec.defaulted: true``."""

    def __init__(self) -> None:
        self.seen: list[tuple[AdmissionRequest, bool]] = []
        self.threads: list[str] = []  # where each review was judged

    def admit(self, request: AdmissionRequest, *, mutating: bool) -> AdmissionResult:
        self.seen.append((request, mutating))
        self.threads.append(threading.current_thread().name)
        obj = request.object or request.oldObject or {}
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        if "test/sleep" in notes:
            time.sleep(float(notes["test/sleep"]))
        if "test/raise" in notes:
            raise RuntimeError("policy blew up: secret-token-123")
        warnings = [notes["test/warn"]] if "test/warn" in notes else []
        patch = []
        if request.object is not None and "defaulted" not in request.object.get("spec", {}):
            patch = [{"op": "add", "path": "/spec/defaulted", "value": True}]
        if "test/deny" in notes:
            return AdmissionResult(
                allowed=False, warnings=warnings, patch=patch,
                status={"status": "Failure", "code": 422, "reason": "Invalid", "message": notes["test/deny"],
                        "details": {"causes": [{"reason": "FieldValueInvalid", "field": "spec", "message": notes["test/deny"]}]}},
            )
        return AdmissionResult(allowed=True, patch=patch, warnings=warnings,
                               audit_annotations={"judged-by": "scripted"} if request.object else {})


@dataclass
class Running:
    url: str
    ca_pem: bytes
    app: web.Application
    keeper: certs.CertKeeper
    slot: AdmitterSlot
    runner: web.AppRunner
    cert_dir: Path
    sessions: list[aiohttp.ClientSession] = field(default_factory=list)

    def session(self, *, ca_pem: bytes | None = None, force_close: bool = False, **ssl_kw) -> aiohttp.ClientSession:
        ctx = certs.client_context(ca_pem or self.ca_pem)
        for k, v in ssl_kw.items():
            setattr(ctx, k, v)
        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, force_close=force_close))
        self.sessions.append(s)
        return s

    async def post(self, path: str, body: Any, **kw) -> tuple[int, Any]:
        session = self.sessions[0] if self.sessions else self.session()
        data = body if isinstance(body, bytes) else None
        async with session.post(self.url + path, json=None if data is not None else body, data=data, **kw) as resp:
            text = await resp.read()
            try:
                import orjson
                return resp.status, orjson.loads(text)
            except ValueError:
                return resp.status, text.decode()


async def start_server(
    tmp_path: Path, admitter: Any = None, *, failure_mode: str = "deny", max_body_bytes: int = 7 * 1024 * 1024,
    client_ca: bytes | None = None, policy: certs.RotationPolicy = TEST_POLICY, manage: bool = True,
    readiness: dict | None = None, workers: int = 4, on_bundle: Any = None, **config: Any,
) -> Running:
    cert_dir = tmp_path / "certs"
    store = certs.DirectoryStore(cert_dir, signing=manage)
    metrics = Metrics()
    keeper = certs.CertKeeper(
        store, sans=certs.serving_sans(), policy=policy, manage=manage, client_ca=client_ca,
        watch=certs.FileWatcher(cert_dir / f for f in certs.FILES), on_bundle=on_bundle,
        on_change=metrics.certificate_served,
    )
    ctx = keeper.start()
    slot = AdmitterSlot(admitter)
    config = ServerConfig(max_body_bytes=max_body_bytes, default_timeout=10.0, timeout_margin=0.25,
                          failure_mode=failure_mode, workers=workers, client_certificates=client_ca is not None,
                          **config)
    app = create_app(slot, config, metrics_=metrics, readiness={"certificates": keeper.problem, **(readiness or {})})
    runner = web.AppRunner(app, shutdown_timeout=5, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = runner.addresses[0][1]
    assert keeper.bundle is not None
    return Running(f"https://localhost:{port}", keeper.bundle.ca_pem(), app, keeper, slot, runner, cert_dir)


async def stop_server(running: Running) -> None:
    for session in running.sessions:
        await session.close()
    await running.runner.cleanup()


@pytest.fixture
async def server(tmp_path) -> AsyncIterator[Running]:
    running = await start_server(tmp_path, ScriptedAdmitter())
    yield running
    await stop_server(running)


@pytest.fixture(scope="module")
def shipped_chain():
    """The admitter ``infergate serve`` builds with no flags: the shipped CRDs and policies, the
    example state; loaded once per module (its checks all pass)."""
    admitter, checks = load_admitter(Settings(), EVALUATOR)
    assert all(check() is None for check in checks.values())
    return admitter


@pytest.fixture
async def live(tmp_path, shipped_chain) -> AsyncIterator[Running]:
    """A real HTTPS server answering with the shipped chain."""
    running = await start_server(tmp_path, shipped_chain)
    yield running
    await stop_server(running)


def utc(seconds: float = 0) -> dt.datetime:
    return certs.utcnow() + dt.timedelta(seconds=seconds)


async def wait_for(predicate, timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


async def served_certificate(running: Running, ca_pem: bytes | None = None):
    """The certificate a fresh TLS handshake gets (verified against ``ca_pem``)."""
    from cryptography import x509

    port = int(running.url.rsplit(":", 1)[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=certs.client_context(ca_pem or running.ca_pem),
                                              server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der)
