"""``serve()`` end to end in-process: certificates, background loading of the chain,
readiness, and what reviews get while the chain is missing."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from webhook import certs
from webhook.server import serve
from webhook.server.settings import Settings

from .conftest import RecordingAdmitter, review

OBJ = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}


async def started(tmp_path, load) -> tuple[asyncio.Task, asyncio.Event, str, aiohttp.ClientSession]:
    settings = Settings(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs", default_timeout=5.0)
    ports: list[int] = []
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, load=load, on_listening=ports.append, stop_event=stop,
                                     handle_signals=False))
    for _ in range(500):
        if ports or task.done():
            break
        await asyncio.sleep(0.01)
    assert ports, task
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=certs.client_context(ca)))
    return task, stop, f"https://localhost:{ports[0]}", session


async def readyz(session, url) -> tuple[int, str]:
    async with session.get(url + "/readyz") as resp:
        return resp.status, await resp.text()


async def test_serve_loads_the_chain_in_the_background_and_turns_ready(tmp_path):
    admitter = RecordingAdmitter()
    task, stop, url, session = await started(tmp_path, lambda settings: (admitter, {"cluster-state": lambda: None}))
    try:
        deadline = time.monotonic() + 5
        while (status := await readyz(session, url))[0] != 200:
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.05)
        assert "[+]cluster-state ok" in status[1] and "[+]policies ok" in status[1]
        async with session.post(url + "/validate", json=review(OBJ, uid="u1")) as resp:
            assert resp.status == 200 and (await resp.json())["response"] == {"uid": "u1", "allowed": True}
        assert [r.uid for r in admitter.seen] == ["u1"]
    finally:
        await session.close()
        stop.set()
    assert await task == 0


async def test_a_chain_that_cannot_load_is_reported_and_reviews_are_answered_at_once(tmp_path):
    def broken(settings):
        raise ValueError("policies/x.yaml: not a policy")

    task, stop, url, session = await started(tmp_path, broken)
    try:
        await asyncio.sleep(0.2)
        status, text = await readyz(session, url)
        assert status == 503 and "[-]policies failed: ValueError: policies/x.yaml: not a policy" in text
        began = time.monotonic()
        async with session.post(url + "/validate", json=review(OBJ, uid="u2")) as resp:
            answer = (await resp.json())["response"]
        assert time.monotonic() - began < 1.0  # not held until the apiserver's deadline
        assert answer["uid"] == "u2" and answer["allowed"] is False  # failure mode deny
        assert "not a policy" not in answer["status"]["message"]  # internals stay in the logs
    finally:
        await session.close()
        stop.set()
    assert await task == 0
