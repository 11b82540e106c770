"""Slow and vanishing clients over real TLS: a request whose headers or body never finish
is cut within its bound (``--header-timeout``, ``--body-timeout``) while other clients are
answered at once; a client that drops mid-request is one quiet log line."""

from __future__ import annotations

import asyncio
import io
import json
import time

import aiohttp
import pytest

from webhook import certs
from webhook import logs
from webhook.server import serve
from webhook.server.settings import Settings

from .conftest import RecordingAdmitter, review

OBJ = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}
BOUND = 0.5  # seconds: the bounds these tests set, short to keep them quick


async def running(tmp_path, **settings):
    config = Settings(host="127.0.0.1", port=0, cert_dir=tmp_path / "certs", **settings)
    ports: list[int] = []
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config, load=lambda s: (RecordingAdmitter(), {}), on_listening=ports.append,
                                     stop_event=stop, handle_signals=False))
    while not ports:
        assert not task.done(), task
        await asyncio.sleep(0.01)
    return ports[0], (tmp_path / "certs" / "ca.crt").read_bytes(), stop, task


async def tls_connection(port: int, ca: bytes):
    return await asyncio.open_connection("127.0.0.1", port, ssl=certs.client_context(ca), server_hostname="localhost")


async def review_answered(port: int, ca: bytes, uid: str) -> dict:
    connector = aiohttp.TCPConnector(ssl=certs.client_context(ca), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(f"https://localhost:{port}/validate", json=review(OBJ, uid=uid)) as r:
            assert r.status == 200
            return (await r.json())["response"]


async def test_a_body_that_never_finishes_gets_408_within_its_bound_while_others_are_answered(tmp_path):
    stream = io.StringIO()
    logs.configure("info", stream=stream)
    port, ca, stop, task = await running(tmp_path, body_timeout=BOUND, header_timeout=30)
    try:
        reader, writer = await tls_connection(port, ca)
        began = time.monotonic()
        writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000\r\n\r\n{\"apiVersion\":")  # and then nothing
        await writer.drain()
        answer = await review_answered(port, ca, "meanwhile")  # another client, while that one stalls
        assert answer == {"uid": "meanwhile", "allowed": True}
        assert not reader.at_eof()
        with pytest.raises(asyncio.TimeoutError):  # the stalled one: nothing yet (a negative: a short look)
            await asyncio.wait_for(reader.read(1), 0.05)
        raw = await asyncio.wait_for(reader.read(), 10)  # the whole answer, then the close
        took = time.monotonic() - began
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), raw
        assert b"connection: close" in head.lower()
        status = json.loads(body)
        assert status["kind"] == "Status" and status["code"] == 408 and status["reason"] == "RequestTimeout"
        assert status["message"] == f"request body not received within {BOUND:g} seconds"
        assert reader.at_eof()
        assert BOUND <= took < BOUND + 5, took  # cut at the bound, not at aiohttp's lingering or the default
        writer.close()
        assert (await review_answered(port, ca, "after"))["allowed"] is True
    finally:
        stop.set()
        logs.configure("info")
    assert await task == 0
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    cut = [e for e in entries if e["msg"] == "request body not received in time; connection closed"]
    assert len(cut) == 1 and cut[0]["level"] == "info" and cut[0]["endpoint"] == "validate"
    assert not [e for e in entries if "exception" in e or e["level"] in ("error", "warning")], entries


async def test_headers_that_never_finish_close_the_connection_within_the_bound(tmp_path):
    port, ca, stop, task = await running(tmp_path, header_timeout=BOUND)
    try:
        reader, writer = await tls_connection(port, ca)
        began = time.monotonic()
        writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl")  # and then nothing
        await writer.drain()
        assert (await review_answered(port, ca, "meanwhile"))["allowed"] is True
        assert not reader.at_eof()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, no answer to a half request
        took = time.monotonic() - began
        assert BOUND <= took < BOUND + 5, took
        writer.close()
    finally:
        stop.set()
    assert await task == 0


async def test_a_kept_alive_connection_serves_requests_that_come_within_the_bound(tmp_path):
    """The header bound counts from the previous answer: a busy connection stays open."""
    port, ca, stop, task = await running(tmp_path, header_timeout=1.0)
    try:
        reader, writer = await tls_connection(port, ca)
        for n in range(6):  # 1.5 s in all on one connection, longer than the bound
            body = json.dumps(review(OBJ, uid=f"k{n}")).encode()
            writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            assert json.loads(await reader.readexactly(length))["response"]["uid"] == f"k{n}"
            await asyncio.sleep(0.25)
        writer.close()
    finally:
        stop.set()
    assert await task == 0


async def test_a_client_dropping_mid_body_is_one_info_line_without_a_traceback(tmp_path):
    stream = io.StringIO()
    logs.configure("info", stream=stream)  # aiohttp's own error logs go to the same stream
    try:
        port, ca, stop, task = await running(tmp_path)
        try:
            _, writer = await tls_connection(port, ca)
            writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 5000\r\n\r\n{\"apiVersion\":")
            await writer.drain()
            writer.transport.abort()  # gone, mid-body
            for _ in range(500):
                if "went away" in stream.getvalue():
                    break
                await asyncio.sleep(0.01)
            assert (await review_answered(port, ca, "after"))["allowed"] is True
        finally:
            stop.set()
        assert await task == 0
    finally:
        logs.configure("info")
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    gone = [e for e in entries if "went away" in e["msg"]]
    assert len(gone) == 1, entries
    assert gone[0]["level"] == "info" and gone[0]["endpoint"] == "validate" and gone[0]["logger"] == "infergate.server"
    assert not [e for e in entries if "exception" in e or e["level"] in ("error", "warning")], entries
    assert "Traceback" not in stream.getvalue() and "ConnectionResetError" not in stream.getvalue()


# ---------------------------------------------------------------------------------------
# Idle connections against header deadlines, scaled down: the defaults are 120 s idle and
# 10 s for headers; here 4 s and 1 s.

IDLE = 4.0
HEADERS = 1.0
APISERVER_IDLE_SECONDS = 90  # Go's http.DefaultTransport IdleConnTimeout, kept by client-go's SetTransportDefaults


async def answered_on(reader, writer, uid: str) -> dict:
    """A review sent on this connection and its answer read from it."""
    body = json.dumps(review(OBJ, uid=uid)).encode()
    writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 "), head
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    return json.loads(await reader.readexactly(length))["response"]


async def trickle(writer, data: bytes, every: float) -> None:
    """``data`` a byte at a time (a slowloris client), until the server hangs up."""
    try:
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(every)
    except (ConnectionError, RuntimeError):
        return


async def closed_after(reader, began: float) -> float:
    """Seconds from ``began`` until the server closed the connection (EOF), within a deadline."""
    while await asyncio.wait_for(reader.read(65536), IDLE + 10):
        pass
    return time.monotonic() - began


async def test_an_idle_connection_is_reused_then_closed_at_the_idle_timeout(tmp_path):
    port, ca, stop, task = await running(tmp_path, idle_timeout=IDLE, header_timeout=HEADERS)
    try:
        reader, writer = await tls_connection(port, ca)
        local = writer.get_extra_info("sockname")
        assert (await answered_on(reader, writer, "first"))["allowed"] is True
        await asyncio.sleep(2 * HEADERS)  # idle: the behaviour under test, beyond the header deadline
        assert not reader.at_eof()
        assert (await answered_on(reader, writer, "after-idle"))["uid"] == "after-idle"
        assert writer.get_extra_info("sockname") == local  # the same socket: no reconnect
        idle_from = time.monotonic()
        took = await closed_after(reader, idle_from)
        assert IDLE - 0.1 <= took < IDLE + 2, took  # closed by the idle timeout, not the header deadline
        writer.close()
    finally:
        stop.set()
    assert await task == 0


async def test_slowloris_headers_are_cut_at_the_header_deadline(tmp_path):
    port, ca, stop, task = await running(tmp_path, idle_timeout=IDLE, header_timeout=HEADERS)
    headers = b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 200
    try:
        for kept_alive in (False, True):
            reader, writer = await tls_connection(port, ca)
            if kept_alive:
                assert (await answered_on(reader, writer, "before"))["allowed"] is True
                await asyncio.sleep(0.5 * HEADERS)  # idle a while first: the deadline counts from the first byte
            began = time.monotonic()
            trickler = asyncio.create_task(trickle(writer, headers, 0.1))
            assert (await review_answered(port, ca, f"meanwhile-{kept_alive}"))["allowed"] is True
            took = await closed_after(reader, began)
            trickler.cancel()
            assert HEADERS - 0.05 <= took < HEADERS + 0.5, (kept_alive, took)
            writer.close()
    finally:
        stop.set()
    assert await task == 0


async def test_a_tls_handshake_that_never_finishes_is_cut_at_the_header_deadline(tmp_path):
    port, ca, stop, task = await running(tmp_path, idle_timeout=IDLE, header_timeout=HEADERS)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # TCP only: no ClientHello
        took = await closed_after(reader, time.monotonic())
        assert HEADERS - 0.05 <= took < HEADERS + 1, took
        writer.close()
    finally:
        stop.set()
    assert await task == 0


async def test_a_trickled_body_is_cut_at_the_body_deadline(tmp_path):
    body_timeout = 1.5
    port, ca, stop, task = await running(tmp_path, idle_timeout=IDLE, header_timeout=HEADERS, body_timeout=body_timeout)
    try:
        reader, writer = await tls_connection(port, ca)
        writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 500\r\n\r\n")
        began = time.monotonic()
        trickler = asyncio.create_task(trickle(writer, b"{" + b" " * 499, 0.1))  # a byte every 0.1 s: never idle
        raw = b""
        while chunk := await asyncio.wait_for(reader.read(65536), IDLE + 10):
            raw += chunk
        took = time.monotonic() - began
        trickler.cancel()
        assert raw.startswith(b"HTTP/1.1 408 "), raw
        assert body_timeout - 0.05 <= took < body_timeout + 1, took
        writer.close()
    finally:
        stop.set()
    assert await task == 0


def test_the_default_idle_timeout_outlasts_the_apiservers_idle_connections():
    defaults = Settings()
    assert defaults.idle_timeout == 120 and defaults.idle_timeout > APISERVER_IDLE_SECONDS
    assert defaults.header_timeout == 10 and defaults.header_timeout < defaults.idle_timeout


async def test_pipelined_requests_are_answered_in_order_past_the_header_deadline(tmp_path):
    """Requests sent back to back in one write: each answered, the header deadline not tripped
    by a request that waited its turn."""
    port, ca, stop, task = await running(tmp_path, idle_timeout=IDLE, header_timeout=HEADERS)
    try:
        reader, writer = await tls_connection(port, ca)
        bodies = [json.dumps(review(OBJ, uid=f"p{n}")).encode() for n in range(3)]
        writer.write(b"".join(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(body), body) for body in bodies))
        for n in range(3):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            assert json.loads(await reader.readexactly(length))["response"]["uid"] == f"p{n}"
        await asyncio.sleep(2 * HEADERS)  # idle past the header deadline: still open
        assert (await answered_on(reader, writer, "after"))["uid"] == "after"
        writer.close()
    finally:
        stop.set()
    assert await task == 0
