"""`infergate serve` as a real process with the real chain: SIGTERM under load loses no
review it had received, and the process writes nothing outside its temporary directory
(the chart runs it on a read-only root file system with only /tmp writable)."""

from __future__ import annotations

import asyncio
import copy
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
import yaml

from webhook import certs, shipped_data

from .conftest import MiB, review
from tests.support.paths import REPO


# Runs `infergate serve` with an audit hook recording every path opened for writing, made,
# renamed or removed from Python (OpenSSL and the CEL runtime write nothing themselves);
# the list is printed when the process exits.
AUDITED_SERVE = r"""
import atexit, os, sys
written = set()
def hook(event, args):
    if event == "open" and args[0] is not None and not isinstance(args[0], int):
        mode, flags = args[1], args[2]
        if (mode and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)):
            written.add(os.fsdecode(args[0]))
    elif event in DIR_FD:  # (path, ..., dir_fd): a relative path is relative to dir_fd
        path, dir_fd = args[0], (None if DIR_FD[event] is None else args[DIR_FD[event]])
        if isinstance(path, int):
            path = os.readlink(f"/proc/self/fd/{path}")
        elif dir_fd is not None and dir_fd >= 0:
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path))
        written.add(os.fsdecode(path))
DIR_FD = {"os.mkdir": 2, "os.rename": 2, "os.replace": 2, "os.remove": 1, "os.rmdir": 1, "os.chmod": 2,
          "os.symlink": 2, "os.truncate": None}
sys.addaudithook(hook)
atexit.register(lambda: print("WRITTEN " + repr(sorted(written)), flush=True))
from webhook.cli import main
sys.exit(main(sys.argv[1:]))
"""


def spawn(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int, bytes, Path]:
    """`infergate serve` in files mode (certificates provided read-only, as a mounted
    Secret); cwd and HOME elsewhere; TMPDIR its only scratch space."""
    cert_dir, scratch, home = tmp_path / "certs", tmp_path / "tmp", tmp_path / "home"
    scratch.mkdir()
    home.mkdir()
    bundle = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
    certs.DirectoryStore(cert_dir).save(bundle)
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(scratch), HOME=str(home))
    proc = subprocess.Popen(
        [sys.executable, "-c", AUDITED_SERVE, "serve", "--host", "127.0.0.1", "--port", "0", "--cert-mode", "files",
         "--cert-dir", str(cert_dir), "--shutdown-timeout", "20", *args],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.search(r"https://127\.0\.0\.1:(\d+)", line)
    assert match, line + proc.stderr.read()
    # Drain the JSON logs as they come: an undrained pipe fills at 64 KiB and blocks the
    # server's logging, which stalls its event loop (the apiserver's log collector drains).
    proc.stderr_lines = []
    proc.stderr_drain = threading.Thread(target=lambda: proc.stderr_lines.extend(proc.stderr), daemon=True)
    proc.stderr_drain.start()
    return proc, int(match.group(1)), bundle.ca_pem(), scratch


def request_bytes(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    return int(head[9:12]), await reader.readexactly(length)


async def wait_ready(port: int, ctx: ssl.SSLContext, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, _ = await read_answer(reader)
            writer.close()
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError("never ready")


def manifests() -> list[dict]:
    folder = Path(shipped_data.example_manifests_dir())
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*/*.yaml"))]


def read_answer_blocking(stream) -> tuple[int, bytes]:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline()
        if not line:
            raise ConnectionError("connection closed")
        head += line
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    return int(head[9:12]), stream.read(length)


def test_sigterm_under_load_loses_no_received_review(tmp_path):
    # As the chart runs it: a drain (2 s here, 5 s in the chart) before the listener closes.
    proc, port, ca_pem, scratch = spawn(tmp_path, "--shutdown-delay", "2")
    ctx = certs.client_context(ca_pem)
    small = [orjson.dumps(review(obj, uid=f"small-{i}")) for i, obj in enumerate(manifests())]
    big_obj = copy.deepcopy(manifests()[0])
    big_obj["metadata"]["annotations"] = {"pad": "x" * MiB}  # slow: decoded, pruned, validated
    big = orjson.dumps(review(big_obj, uid="big"))
    records: list[dict] = []  # one per request: when sent, what came back
    signalled: list[float] = []

    # One blocking connection per thread, as the apiserver's HTTP client keeps them.
    def client(k: int, bodies: list[bytes]) -> None:
        sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
        stream = sock.makefile("rb")
        i = 0
        try:
            while True:
                body = bodies[i % len(bodies)]
                i += 1
                path = "/mutate?timeout=10s" if i % 2 else "/validate?timeout=10s"
                record = {"client": k, "uid": orjson.loads(body)["request"]["uid"], "sent": time.monotonic()}
                records.append(record)
                try:
                    sock.sendall(request_bytes(path, body))
                    status, answer = read_answer_blocking(stream)
                except (OSError, ssl.SSLError) as exc:  # TimeoutError and ConnectionError included
                    record["error"] = repr(exc)
                    return  # the server closed this connection: its shutdown has begun
                record["status"], record["answer"] = status, answer
                if signalled and record["sent"] > signalled[0] + 1:
                    return  # done: an open idle connection would hold the shutdown to its grace period
        finally:
            stream.close()
            sock.close()

    asyncio.run(wait_ready(port, ctx))
    threads = [threading.Thread(target=client, args=(k, small)) for k in range(6)]
    threads += [threading.Thread(target=client, args=(k, [big])) for k in range(6, 8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30  # under load: every connection has had answers before the signal
    while not all(sum("status" in r for r in records if r["client"] == k) >= 2 for k in range(len(threads))):
        assert time.monotonic() < deadline, "the load never reached every connection"
        time.sleep(0.05)
    signalled.append(time.monotonic())
    proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(30)
    proc.wait(timeout=30)
    out = proc.stdout.read()
    proc.stderr_drain.join(10)
    err = "".join(proc.stderr_lines)
    assert proc.returncode == 0, err[-2000:]
    assert '"msg": "shutting down' in err.replace('":"', '": "') and '"stopped"' in err

    # Sent before SIGTERM: answered, in full, as usual (a 1 MiB body included); the drain
    # keeps answering on open connections while /readyz fails.
    before = [r for r in records if r["sent"] < signalled[0]]
    assert len(before) > 20 and any(r["uid"] == "big" for r in before)
    for r in before:  # received before SIGTERM: answered, in full, as usual
        assert r.get("status") == 200, (round(signalled[0] - r["sent"], 3), r, err[-2000:])
        response = orjson.loads(r["answer"])["response"]
        assert response["uid"] == r["uid"] and "failure" not in response.get("auditAnnotations", {}), response
    for r in records:  # after it: either a normal answer or a closed connection, never a broken one
        if "status" in r:
            assert r["status"] == 200 and orjson.loads(r["answer"])["response"]["uid"] == r["uid"], r

    written = eval(next(line for line in out.splitlines() if line.startswith("WRITTEN "))[8:])  # noqa: S307
    outside = [p for p in written if not Path(p).resolve().is_relative_to(scratch.resolve())]
    assert not outside, outside  # nothing but TMPDIR: a read-only root file system is enough
