"""`infergate serve` as a whole: the embedded default, readiness, graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives import serialization

from webhook import certs
from webhook.server import serve
from webhook.server.settings import Settings

from .conftest import ScriptedAdmitter, client_identity, review
from tests.support.paths import REPO

MODEL = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "a"}, "spec": {}}


async def start(tmp_path: Path, loader, **settings):
    ports: list[int] = []
    stop = asyncio.Event()
    config = Settings(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs", **settings)
    task = asyncio.create_task(serve(config, load=loader, on_listening=ports.append, stop_event=stop,
                                     handle_signals=False))
    while not ports:
        await asyncio.sleep(0.01)
        if task.done():
            raise AssertionError(f"serve exited with {task.result()}")
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=certs.client_context(ca)))
    return f"https://localhost:{ports[0]}", session, stop, task


async def until_ready(session: aiohttp.ClientSession, url: str, seconds: float = 5.0) -> int:
    """/readyz's status once it is 200, or when ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        async with session.get(url + "/readyz") as r:
            if r.status == 200 or time.monotonic() > deadline:
                return r.status
        await asyncio.sleep(0.01)


async def test_readyz_turns_green_when_the_chain_and_state_are_loaded(tmp_path):
    loaded = asyncio.Event()
    state_synced = [False]

    def slow_loader(settings):
        time.sleep(0.5)  # compiling policies
        return ScriptedAdmitter(), {"cluster-state": lambda: None if state_synced[0] else "not synced"}

    url, session, stop, task = await start(tmp_path, slow_loader)
    try:
        async with session.get(url + "/readyz") as r:
            assert r.status == 503 and "[-]policies failed: loading" in await r.text()
        async with session.get(url + "/healthz") as r:
            assert r.status == 200
        # a review arriving meanwhile waits for the chain, which then cannot judge before the
        # cluster state is synced: the failure mode answers (deny), saying why
        async with session.post(url + "/validate", json=review(MODEL, uid="early")) as r:
            early = (await r.json())["response"]
        assert early["uid"] == "early" and early["allowed"] is False and early["status"]["code"] == 500
        assert "cluster-state: not synced" in early["status"]["message"]
        assert early["auditAnnotations"] == {"failure": "not-ready"}
        async with session.get(url + "/readyz") as r:
            assert r.status == 503 and "[-]cluster-state failed: not synced" in await r.text()
        state_synced[0] = True
        async with session.get(url + "/readyz") as r:
            assert r.status == 200 and "[+]certificates ok" in await r.text()
        async with session.post(url + "/validate", json=review(MODEL)) as r:
            assert (await r.json())["response"]["allowed"] is True
    finally:
        loaded.set()
        stop.set()
        await session.close()
        assert await task == 0


async def test_the_cel_fallback_is_built_once_the_chain_is_loaded_without_delaying_readiness(tmp_path, monkeypatch):
    """The pure-Python CEL backend (cel-go's answers where cel-cpp words its own) takes ~0.4 s
    to build on first use: built after loading, in a thread, not by the first review that
    needs it on the event loop."""
    from webhook.cel.engine import cel_expr

    built, release = [], asyncio.Event()
    loop = asyncio.get_running_loop()

    def warm_up() -> None:  # held until the test has seen /readyz green
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
        built.append(True)

    monkeypatch.setattr(cel_expr, "warm_up_fallback", warm_up)
    url, session, stop, task = await start(tmp_path, lambda s: (ScriptedAdmitter(), {}))
    try:
        assert await until_ready(session, url) == 200
        assert built == []  # ready while the fallback is still being built
        release.set()
        for _ in range(500):
            if built:
                break
            await asyncio.sleep(0.01)
        assert built == [True]
    finally:
        release.set()
        stop.set()
        await session.close()
        assert await task == 0


def test_warming_up_builds_the_fallback_backend():
    code = ("from webhook.cel.engine import cel_expr; cel_expr.warm_up_fallback(); "
            "from webhook.cel.engine import cel_python; print(cel_python.parser.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


async def test_a_chain_that_cannot_load_is_reported_by_readyz(tmp_path):
    def broken(settings):
        raise FileNotFoundError("policies/ missing")

    url, session, stop, task = await start(tmp_path, broken)
    try:
        for _ in range(50):
            async with session.get(url + "/readyz") as r:
                text = await r.text()
            if "FileNotFoundError" in text:
                break
            await asyncio.sleep(0.02)
        assert r.status == 503 and "[-]policies failed: FileNotFoundError: policies/ missing" in text
    finally:
        stop.set()
        await session.close()
        await task


async def test_shutdown_finishes_in_flight_reviews_and_refuses_new_connections(tmp_path):
    admitter = ScriptedAdmitter()
    url, session, stop, task = await start(tmp_path, lambda s: (admitter, {}))
    slow = dict(MODEL, metadata={"name": "m", "namespace": "a", "annotations": {"test/sleep": "1.5"}})
    in_flight = asyncio.create_task(session.post(url + "/validate", json=review(slow, uid="in-flight")))
    deadline = time.monotonic() + 5
    while not admitter.seen:  # the review is being judged
        assert time.monotonic() < deadline and not in_flight.done(), "the review never reached the admitter"
        await asyncio.sleep(0.01)
    stop.set()
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    fresh = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=certs.client_context(ca), force_close=True))
    refused = False
    while not refused:  # the listener closes while the review is still judged
        assert not in_flight.done(), "the listener was still open when the in-flight review finished"
        try:
            async with fresh.get(url + "/healthz"):
                pass
        except aiohttp.ClientConnectorError:
            refused = True
        else:
            await asyncio.sleep(0.01)
    await fresh.close()
    resp = await in_flight
    assert resp.status == 200 and (await resp.json())["response"]["uid"] == "in-flight"
    await session.close()
    assert await task == 0


async def test_client_ca_file_guards_reviews_and_leaves_probes_open(tmp_path):
    """``--client-ca-file`` through ``serve``: the kubelet's probes (no certificate) get
    /healthz and /readyz, a review without the apiserver's certificate gets 401."""
    import datetime as dt

    client_ca, client_ca_key = certs.issue_ca(now=certs.utcnow(), validity=dt.timedelta(days=1))
    (tmp_path / "client-ca.crt").write_bytes(client_ca.public_bytes(serialization.Encoding.PEM))
    identity = client_identity(tmp_path, "kube-apiserver", client_ca, client_ca_key)
    url, kubelet, stop, task = await start(tmp_path, lambda s: (ScriptedAdmitter(), {}),
                                           client_ca_file=tmp_path / "client-ca.crt")
    ctx = certs.client_context((tmp_path / "certs" / "ca.crt").read_bytes())
    ctx.load_cert_chain(*identity)
    apiserver = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))
    try:
        assert await until_ready(kubelet, url) == 200
        async with kubelet.get(url + "/healthz") as r:
            assert r.status == 200
        async with kubelet.post(url + "/validate", json=review(MODEL)) as r:
            assert r.status == 401 and (await r.json())["reason"] == "Unauthorized"
        async with apiserver.post(url + "/validate", json=review(MODEL, uid="signed")) as r:
            assert r.status == 200 and (await r.json())["response"]["uid"] == "signed"
    finally:
        stop.set()
        await kubelet.close()
        await apiserver.close()
        assert await task == 0


def test_serve_with_no_flags_creates_certs_prints_how_to_try_and_stops_on_sigterm(tmp_path):
    """The embedded default from a fresh directory, as the README runs it."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--port", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = proc.stdout.readline() + proc.stdout.readline()
        assert banner.startswith("infergate serving https://0.0.0.0:"), banner + proc.stderr.read()
        port = int(banner.split(":", 2)[2].split(" ")[0])
        assert "localhost, 127.0.0.1" in banner and "try it:" in banner
        curl = [proc.stdout.readline().strip(), proc.stdout.readline().strip()]
        assert curl[0] == f"curl --cacert certs/ca.crt https://localhost:{port}/readyz"
        assert curl[1].startswith("curl --cacert certs/ca.crt -H 'Content-Type: application/json'")
        bundle = certs.DirectoryStore(tmp_path / "certs").load()
        assert set(certs.serving_sans()) <= set(certs.subject_alt_names(bundle.cert))
        ctx = certs.client_context(bundle.ca_pem())
        import urllib.error
        import urllib.request

        with urllib.request.urlopen(f"https://localhost:{port}/healthz", context=ctx, timeout=5) as r:
            assert r.status == 200
        # the printed review, once the shipped policies are loaded: denied by the webhook itself
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"https://localhost:{port}/readyz", context=ctx, timeout=5) as r:
                    break
            except urllib.error.HTTPError:
                time.sleep(0.05)
        printed = curl[1].split(" -d '", 1)[1].rstrip("'")
        request = urllib.request.Request(f"https://localhost:{port}/validate", data=printed.encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
            answer = json.loads(r.read())["response"]
        assert answer["uid"] == "try-1" and answer["allowed"] is False
        assert answer["status"]["message"].startswith("spec.engine: Unsupported value: \"VLLM\"")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    entries = [json.loads(line) for line in err.splitlines()]  # structured logs only
    assert entries[-1]["msg"] == "stopped"


async def test_tls_that_cannot_be_set_up_is_a_clear_error(tmp_path, capsys):
    no_cluster = Settings(host="127.0.0.1", port=0, cert_mode="secret", kubeconfig=tmp_path / "missing")
    assert await serve(no_cluster, load=lambda s: (ScriptedAdmitter(), {}), handle_signals=False) == 2
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "tls.crt").write_text("not a certificate")
    files = Settings(host="127.0.0.1", port=0, cert_mode="files", cert_dir=tmp_path / "certs")
    assert await serve(files, load=lambda s: (ScriptedAdmitter(), {}), handle_signals=False) == 2
    err = capsys.readouterr().err
    assert err.count("infergate: error: serve: cannot set up TLS:") == 2 and "missing tls.key" in err
    assert "Traceback" not in err


async def test_sigterm_drains_first_answering_reviews_while_readyz_fails(tmp_path):
    """--shutdown-delay: after the signal the pod keeps answering (the apiserver still holds
    kept-alive connections to it) while /readyz fails, so endpoints drop it before it closes."""
    url, session, stop, task = await start(tmp_path, lambda settings: (ScriptedAdmitter(), {}), shutdown_delay=1.0)
    try:
        assert await until_ready(session, url) == 200
        stop.set()
        deadline = time.monotonic() + 5
        while True:  # the signal handled: /readyz fails while the server still answers
            async with session.get(url + "/readyz") as r:
                text = await r.text()
                if r.status == 503:
                    break
            assert time.monotonic() < deadline, "readiness never failed after the signal"
            await asyncio.sleep(0.01)
        assert not task.done() and "[-]shutdown failed: shutting down" in text
        async with session.post(url + "/validate", json=review(MODEL, uid="during-drain")) as r:
            body = await r.json()
            assert r.status == 200 and body["response"]["uid"] == "during-drain"
    finally:
        stop.set()
        await session.close()
    assert await task == 0



def _post_review(connection, uid: str) -> tuple[int, str, dict]:
    """A review on ``connection`` (http.client: one socket, reused while the server keeps it):
    the status, the Connection header and the body."""
    connection.request("POST", "/validate", json.dumps(review(MODEL, uid=uid)),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, (response.getheader("Connection") or "").lower(), json.loads(response.read())


async def test_while_draining_every_answer_closes_its_connection(tmp_path):
    """The apiserver keeps sending reviews on its kept-alive connections to a draining pod; one
    closed idle at the end of the drain can cross a review on its way (an EOF). So during the
    drain each answer says ``Connection: close`` and its connection closes: the next review
    opens a new one, which the Service sends to a Ready pod."""
    import http.client
    import ssl

    url, session, stop, task = await start(tmp_path, lambda settings: (ScriptedAdmitter(), {}), shutdown_delay=5.0)
    context = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
    connection = http.client.HTTPSConnection("localhost", int(url.rpartition(":")[2]), context=context, timeout=5)
    try:
        assert await until_ready(session, url) == 200
        status, header, _ = await asyncio.to_thread(_post_review, connection, "before")
        kept = connection.sock
        assert status == 200 and header != "close" and kept is not None
        await asyncio.to_thread(_post_review, connection, "kept-alive")
        assert connection.sock is kept  # one connection, reused before the drain
        stop.set()
        deadline = time.monotonic() + 5
        while True:  # the signal handled: /readyz fails
            async with session.get(url + "/readyz") as r:
                if r.status == 503:
                    assert r.headers["Connection"].lower() == "close"
                    break
            assert time.monotonic() < deadline, "/readyz still passing 5 s after the signal"
            await asyncio.sleep(0.01)
        for uid in ("during-drain-1", "during-drain-2"):
            status, header, body = await asyncio.to_thread(_post_review, connection, uid)
            assert status == 200 and body["response"]["uid"] == uid and header == "close"
            assert connection.sock is None  # closed after the answer; the next request opens another
        assert not task.done()  # still draining: answering, on new connections only
    finally:
        connection.close()
        stop.set()
        await session.close()
    assert await task == 0
