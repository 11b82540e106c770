"""No secret value is ever logged or echoed: Secret data the state holds (authSecretRef
targets), the API token of the watch client, the serving key. Every example manifest goes
through both endpoints with debug logs on; responses and logs are searched."""

from __future__ import annotations

import base64
import io
import logging
import shutil
import time
from pathlib import Path

import yaml

from webhook import logs, shipped_data
from webhook.admission.chain import AdmissionChain
from webhook.policy import PolicySet
from webhook.schema import CRDRegistry
from webhook.state import FileState
from webhook.state.kube import Backoff, KubeState, WatchedKind

from .conftest import ServerThread, review
from tests.support.cel import EVALUATOR

SECRET = "s3cr3t-hf-token-0123456789"
TOKEN = "kube-bearer-token-9876543210"
SECRETS = WatchedKind("v1", "Secret", "secrets")


def forms(value: str) -> list[bytes]:
    raw = value.encode()
    return [raw, base64.b64encode(raw), base64.b64encode(raw).rstrip(b"=")]


def with_secret_values(state_dir: Path) -> None:
    """The example state, its Secrets holding SECRET (in data and stringData)."""
    path = state_dir / "secrets.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        doc["data"] = {k: base64.b64encode(SECRET.encode()).decode() for k in doc.get("data") or {"token": ""}}
        doc["stringData"] = {"also": SECRET}
        doc.setdefault("metadata", {}).setdefault("annotations", {})[
            "kubectl.kubernetes.io/last-applied-configuration"] = f'{{"data": {{"token": "{SECRET}"}}}}'
    path.write_text(yaml.safe_dump_all(docs))


def test_secret_values_never_reach_responses_or_logs(tmp_path, caplog):
    state_dir = tmp_path / "state"
    shutil.copytree(shipped_data.examples_dir(), state_dir)
    with_secret_values(state_dir)
    chain = AdmissionChain(CRDRegistry.shipped(evaluator=EVALUATOR), PolicySet.load(shipped_data.policies_dir(), evaluator=EVALUATOR), FileState(state_dir))
    stream = io.StringIO()
    saved = {name: (lg.handlers[:], lg.level, lg.propagate)
             for name in (logs.LOGGER_NAME, "aiohttp.server", "aiohttp.web") for lg in [logging.getLogger(name)]}
    logs.configure("debug", stream=stream)  # what `infergate serve --log-level debug` writes
    bodies: list[bytes] = []
    try:
        with caplog.at_level(logging.DEBUG), ServerThread(tmp_path / "certs", chain) as server:
            client = server.client()
            for path in sorted(Path(shipped_data.example_manifests_dir()).glob("*/*.yaml")):
                obj = yaml.safe_load(path.read_text())
                for endpoint in ("/mutate", "/validate"):
                    answer = client.post(endpoint, review(obj))
                    assert answer.status == 200
                    bodies.append(answer.body)
            key_pem = server.keeper.bundle.to_files()["tls.key"]
            bodies.append(client.get("/metrics").body + client.get("/readyz").body)
    finally:
        for name, (handlers, level, propagate) in saved.items():
            lg = logging.getLogger(name)
            lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate
    assert any(b'"allowed":false' in b for b in bodies) and any(b"warnings" in b for b in bodies)
    logged = (stream.getvalue() + caplog.text).encode()
    assert b'"msg":"denied"' in logged.replace(b" ", b"")  # the logs were captured
    for needle in forms(SECRET):
        assert all(needle not in body for body in bodies), needle
        assert needle not in logged, needle
    assert key_pem not in logged and b"PRIVATE KEY" not in logged


async def test_the_watch_clients_token_is_never_logged(aiohttp_server, caplog):
    from aiohttp import web
    from kubernetes.client import ApiClient, Configuration

    seen: list[str] = []

    async def refuse(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        status = 401 if len(seen) % 2 else 500
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                                  "message": "Unauthorized" if status == 401 else "etcdserver: request timed out"},
                                 status=status)

    app = web.Application()
    app.router.add_get("/{path:.*}", refuse)
    server = await aiohttp_server(app)
    config = Configuration(host=str(server.make_url("")).rstrip("/"), api_key={"authorization": TOKEN},
                           api_key_prefix={"authorization": "Bearer"})
    state = KubeState(ApiClient(config), (SECRETS,), backoff=Backoff(0.01, 0.02))
    with caplog.at_level(logging.DEBUG):
        state.start()
        import asyncio

        deadline = time.monotonic() + 5
        while len(seen) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.to_thread(state.stop, 2.0)
    assert seen and seen[0] == f"Bearer {TOKEN}"  # the token was really sent
    assert "HTTP 401" in caplog.text or "401" in caplog.text  # and the failures were logged
    assert TOKEN not in caplog.text
    assert not state.ready
