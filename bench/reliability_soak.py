"""Soak: `infergate serve` under a sustained rate on loopback, for minutes, with zero errors
and flat memory.

One `infergate serve` process (the embedded default: shipped CRDs, policies with their
Kubernetes-CEL-library rules, example state) gets every example manifest (valid, invalid,
denied by the webhook; every kind), on /mutate and /validate, round-robin from keep-alive
TLS connections paced to a fixed total rate. Checked on every answer: HTTP 200, the uid, no
failure-mode answer (``auditAnnotations.failure``), and the same verdict, message and patch
as the first answer for that manifest (nothing drifts under load). Sampled every few seconds:
the server's resident memory (VmRSS), threads and open file descriptors.

    python bench/reliability_soak.py --minutes 10 --rate 100 [--json out.json]

Exit status 0 only with zero errors and memory growth under --max-growth-mib after warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from server_bench import PLURALS, free_port, http_request, read_response, wait_ready  # noqa: E402

from webhook import certs  # noqa: E402


def reviews() -> list[tuple[str, str, bytes]]:
    """(name, path, request bytes) for every example manifest on both endpoints."""
    found = []
    for file in sorted((REPO / "examples/manifests").glob("*/*.yaml")):
        for i, obj in enumerate(d for d in yaml.safe_load_all(file.read_text()) if d):
            group, _, version = obj["apiVersion"].rpartition("/")
            meta = obj.get("metadata", {})
            gvk = {"group": group, "version": version, "kind": obj["kind"]}
            gvr = {"group": group, "version": version, "resource": PLURALS[obj["kind"]]}
            for endpoint in ("mutate", "validate"):
                review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                    "uid": f"{file.stem}-{i}-{endpoint}", "kind": gvk, "resource": gvr, "requestKind": gvk,
                    "requestResource": gvr, "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                    "operation": "CREATE", "userInfo": {"username": "soak", "groups": ["system:authenticated"]},
                    "object": obj, "oldObject": None, "dryRun": False,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
                name = f"{file.parent.name}/{file.stem}#{i} {endpoint}"
                found.append((name, f"/{endpoint}?timeout=10s", http_request(f"/{endpoint}?timeout=10s", orjson.dumps(review))))
    return found


def process_sample(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {"rss_kib": int(fields["VmRSS"].split()[0]), "threads": int(fields["Threads"]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def slope_kib_per_min(samples: list[tuple[float, int]]) -> float:
    if len(samples) < 3:
        return 0.0
    xs, ys = [t / 60 for t, _ in samples], [float(v) for _, v in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


async def soak(port: int, ctx: ssl.SSLContext, pid: int, *, seconds: float, rate: float, connections: int,
               warmup: float, sample_every: float) -> dict:
    work = reviews()
    reference: dict[str, tuple] = {}
    errors: list[str] = []
    latencies: list[float] = []
    per_minute: dict[int, list[float]] = {}
    samples: list[dict] = []
    started = time.perf_counter()
    stop_at = started + seconds
    interval = connections / rate
    counter = {"sent": 0}

    def check(name: str, uid: str, status: int, body: bytes) -> None:
        if status != 200:
            errors.append(f"{name}: HTTP {status}: {body[:200]!r}")
            return
        response = orjson.loads(body)["response"]
        if response["uid"] != uid:
            errors.append(f"{name}: uid {response['uid']!r}")
        if "failure" in response.get("auditAnnotations", {}):
            errors.append(f"{name}: failure mode: {response.get('status') or response.get('warnings')}")
        seen = (response["allowed"], (response.get("status") or {}).get("message"), response.get("patch"),
                tuple(response.get("warnings", ())))
        if reference.setdefault(name, seen) != seen:
            errors.append(f"{name}: answer changed under load: {seen} != {reference[name]}")

    async def worker(k: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        next_at = started + k * interval / connections
        i = k
        while True:
            now = time.perf_counter()
            if now >= stop_at:
                break
            if next_at > now:
                await asyncio.sleep(next_at - now)
            next_at += interval
            name, _, request = work[i % len(work)]
            i += connections
            t0 = time.perf_counter()
            try:
                writer.write(request)
                status, body = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError) as exc:
                errors.append(f"{name}: {exc!r}")
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
                continue
            t1 = time.perf_counter()
            counter["sent"] += 1
            check(name, orjson.loads(request[request.index(b"\r\n\r\n") + 4:])["request"]["uid"], status, body)
            if t0 - started >= warmup:
                latencies.append(t1 - t0)
                per_minute.setdefault(int((t0 - started) // 60), []).append(t1 - t0)
        writer.close()

    async def sampler() -> None:
        while time.perf_counter() < stop_at:
            samples.append({"t": round(time.perf_counter() - started, 1), **process_sample(pid)})
            await asyncio.sleep(sample_every)
        samples.append({"t": round(time.perf_counter() - started, 1), **process_sample(pid)})

    await asyncio.gather(sampler(), *(worker(k) for k in range(connections)))

    def pct(values: list[float], p: int) -> float:
        return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1] * 1000, 2) if len(values) > 1 else 0.0

    after = [(s["t"], s["rss_kib"]) for s in samples if s["t"] >= warmup]
    return {
        "requests": counter["sent"], "distinct_reviews": len(work), "errors": len(errors), "first_errors": errors[:10],
        "achieved_rate": round(counter["sent"] / seconds, 1),
        "p50_ms": pct(latencies, 50), "p99_ms": pct(latencies, 99), "max_ms": round(max(latencies, default=0) * 1000, 2),
        "p99_ms_per_minute": {str(m): pct(v, 99) for m, v in sorted(per_minute.items())},
        "rss_mib_after_warmup": round(after[0][1] / 1024, 1) if after else None,
        "rss_mib_end": round(samples[-1]["rss_kib"] / 1024, 1),
        "rss_mib_max": round(max(s["rss_kib"] for s in samples) / 1024, 1),
        "rss_slope_kib_per_min": round(slope_kib_per_min(after), 1),
        "threads_start_end": (samples[0]["threads"], samples[-1]["threads"]),
        "fds_start_end": (samples[0]["fds"], samples[-1]["fds"]),
        "samples": samples,
    }


@contextlib.contextmanager
def running_serve(log_level: str) -> Iterator[tuple[subprocess.Popen, int, ssl.SSLContext]]:
    """`infergate serve` (the embedded default) on a free loopback port, ready; stopped by
    SIGTERM on exit (its exit status is then in ``returncode``)."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp, "certs")
        bundle = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
        certs.DirectoryStore(cert_dir).save(bundle)
        ctx = certs.client_context(bundle.ca_pem())
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--cert-dir", str(cert_dir), "--log-level", log_level],
            cwd=tmp, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if wait_ready(port, ctx, "/readyz", time.monotonic() + 60) is None:
                raise SystemExit("infergate serve never became ready:\n" + server.stderr.read().decode()[-3000:])
            yield server, port, ctx
        finally:
            server.terminate()
            server.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second, all connections together")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before latency and memory count")
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--max-growth-mib", type=float, default=16.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import uvloop

    with running_serve("warning") as (server, port, ctx):
        result = uvloop.run(soak(port, ctx, server.pid, seconds=args.minutes * 60, rate=args.rate,
                                 connections=args.connections, warmup=min(args.warmup, args.minutes * 30),
                                 sample_every=args.sample_every))
    result |= {"minutes": args.minutes, "target_rate": args.rate, "connections": args.connections,
               "server_exit": server.returncode}
    growth = (result["rss_mib_end"] - (result["rss_mib_after_warmup"] or result["rss_mib_end"]))
    result["rss_growth_mib_after_warmup"] = round(growth, 1)
    if args.json:
        args.json.write_text(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    ok = result["errors"] == 0 and growth <= args.max_growth_mib and result["server_exit"] == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
