"""Throughput and latency of `infergate serve` over TLS on loopback, against a baseline.

Runs, in one go and with the same load generator:
  * baseline: a bare aiohttp HTTPS server (uvloop, the same TLS settings) that
    reads each body and echoes it back: the physical limit of this stack;
  * server only: `serve()` with an allow-all admitter (the server's own cost);
  * infergate /validate and /mutate with a realistic object of each family
    (``examples/manifests/valid``), through the real admission chain;
  * the time from spawning `infergate serve` to a green /readyz.

Each server runs in its own process. The load generator is a closed loop of N
keep-alive TLS connections on uvloop with pre-encoded requests (far cheaper per request
than any server), measuring each request's latency, and (on Linux) the CPU time each
server process spent per request: on a shared machine the steadier figure of the two.

With ``--before DIR`` (another checkout, e.g. ``git worktree add --detach /tmp/before
main``), its server-only and /validate runs are interleaved with this tree's, against
the same baseline: a before/after comparison in one run. Each tree serves its own
policies, CRDs and example state; with ``--workload before`` this tree serves the before
tree's instead (its policies, by name, in this tree's wording; the seed-era KubeAI CRD;
its example state), so that the two differ only in their code. ``--rounds N`` measures
every server N times, interleaved: with ``--before``, each round's after/before ratio is
a paired comparison (the two runs back to back), and their median is reported.

    python bench/server_bench.py [--seconds 4] [--connections 16] [--rounds 1] [--before DIR [--workload before]] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook import certs  # noqa: E402

FAMILIES = {
    "Model (kubeai.org)": "kubeai-model-vllm.yaml",
    "InferenceModel": "inferencemodel.yaml",
    "InferencePool": "inferencepool.yaml",
    "InferenceServiceClass": "inferenceserviceclass.yaml",
    "InferenceService": "inferenceservice-catalog.yaml",
}

# the resource of every kind in examples/manifests (the shipped CRDs' plurals)
PLURALS = {"Model": "models", "InferenceModel": "inferencemodels", "InferencePool": "inferencepools",
           "InferenceServiceClass": "inferenceserviceclasses", "InferenceService": "inferenceservices",
           "HTTPRoute": "httproutes", "InferenceModelRewrite": "inferencemodelrewrites",
           "InferenceObjective": "inferenceobjectives", "InferencePoolImport": "inferencepoolimports"}

BASELINE_SERVER = r'''
import sys, ssl, uvloop
from aiohttp import web
sys.path.insert(0, sys.argv[3])
from webhook import certs
async def echo(request):
    return web.Response(body=await request.read(), content_type="application/json")
app = web.Application(client_max_size=7 * 1024 * 1024)
app.router.add_post("/echo", echo)
bundle = certs.DirectoryStore(__import__("pathlib").Path(sys.argv[2])).load()
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), ssl_context=certs.server_context(bundle),
            access_log=None, print=None, loop=uvloop.new_event_loop())
'''


# `infergate serve` itself with an admitter that allows everything: what the server path
# (TLS, limits, decoding, the worker thread, encoding, metrics) costs without the chain.
SERVER_ONLY = r'''
import sys, uvloop
sys.path.insert(0, sys.argv[3])
from webhook.admission.review import AdmissionResult
from webhook.server import serve
try:
    from webhook.server.settings import Settings
except ImportError:  # a checkout from before the settings moved into webhook/server/
    from webhook.settings import Settings
class AllowAll:
    def admit(self, request, *, mutating):
        return AdmissionResult(allowed=True)
settings = Settings(host="127.0.0.1", port=int(sys.argv[1]), cert_dir=sys.argv[2], log_level="warning")
uvloop.run(serve(settings, load=lambda s: (AllowAll(), {})))
'''


def review_for(path: Path) -> dict:
    obj = yaml.safe_load(path.read_text())
    group, _, version = obj["apiVersion"].rpartition("/")
    meta = obj.get("metadata", {})
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "resource": {"group": group, "version": version, "resource": PLURALS[obj["kind"]]},
            "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
            "requestResource": {"group": group, "version": version, "resource": PLURALS[obj["kind"]]},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "kubectl-client-side-apply"},
        },
    }


def as_the_apiserver_sends(review: dict) -> tuple[bytes, bytes]:
    """(/mutate body, /validate body): webhooks get the object decoded and defaulted, the
    validating one after the mutation and the schema checks (what the chain's offline
    ``run`` reproduces)."""
    from webhook.admission.review import AdmissionReview
    from webhook.cel import Evaluator
    from webhook.schema import CRDRegistry
    from webhook.server import load_admitter
    from webhook.server.settings import Settings

    global _CHAIN, _REGISTRY
    if _CHAIN is None:
        evaluator = Evaluator()
        _CHAIN, _ = load_admitter(Settings(**WORKLOAD), evaluator)
        _REGISTRY = CRDRegistry.shipped(WORKLOAD.get("kubeai_crd"), evaluator=evaluator)
    request = review["request"]
    obj, _ = _REGISTRY.prepare("CREATE", request["object"], None, None, namespace=request["namespace"] or None)
    mutate_review = {**review, "request": {**request, "object": obj}}
    outcome = _CHAIN.run(AdmissionReview.model_validate(review).request)
    if not outcome.allowed:
        raise SystemExit(f"{request['kind']['kind']} {request['name']}: not admitted: {outcome.status}")
    validate_review = {**review, "request": {**request, "object": outcome.object}}
    return orjson.dumps(mutate_review), orjson.dumps(validate_review)


_CHAIN = _REGISTRY = None
WORKLOAD: dict = {}  # the Settings of this tree's served workload (``--workload``)


def local_certs(tmp: str) -> tuple[Path, ssl.SSLContext]:
    """A fresh serving certificate in ``tmp``/certs, and a client context trusting its CA."""
    cert_dir = Path(tmp, "certs")
    bundle = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
    certs.DirectoryStore(cert_dir).save(bundle)
    return cert_dir, certs.client_context(bundle.ca_pem())


def before_workload(before: Path, tmp: Path) -> dict:
    """The Settings under which this tree serves the ``before`` tree's workload: this
    tree's policies whose names the before tree ships (in their files), the seed-era
    KubeAI CRD, and the before tree's example state."""
    names = {doc["metadata"]["name"] for path in sorted((before / "policies").glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict) and "metadata" in doc}
    policies = tmp / "before-policies"
    policies.mkdir()
    for path in sorted((REPO / "policies").glob("*.yaml")):
        kept = [doc for doc in yaml.safe_load_all(path.read_text())
                if isinstance(doc, dict) and doc.get("metadata", {}).get("name") in names]
        if kept:
            (policies / path.name).write_text(yaml.safe_dump_all(kept, sort_keys=False))
    return {"policies_dir": policies, "kubeai_crd": "v0.12.0", "state_dir": before / "examples" / "state"}


def serve_flags(workload: dict) -> list[str]:
    flags = {"policies_dir": "--policies-dir", "kubeai_crd": "--kubeai-crd", "state_dir": "--state-dir"}
    return [arg for key, value in workload.items() for arg in (flags[key], str(value))]


def http_request(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, await reader.readexactly(length)


async def load(port: int, ctx: ssl.SSLContext, request: bytes, *, connections: int, seconds: float,
               warmup: float, check) -> dict:
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter()  # uvloop's loop.time() ticks in milliseconds
    measure_from, stop_at = start + warmup, start + warmup + seconds

    async def worker():
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                break
            writer.write(request)
            status, body = await read_response(reader)
            t1 = time.perf_counter()
            if status != 200 or not check(body):
                errors += 1
            if t0 >= measure_from:
                latencies.append(t1 - t0)
        writer.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    latencies.sort()
    q = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else [0.0] * 99
    return {"rps": round(len(latencies) / seconds), "p50_ms": round(q[49] * 1000, 3),
            "p99_ms": round(q[98] * 1000, 3), "requests": len(latencies), "errors": errors}


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` so far (Linux), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, ctx: ssl.SSLContext, path: str, deadline: float) -> float | None:
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"https://localhost:{port}{path}", context=ctx, timeout=1) as r:
                if r.status == 200:
                    return time.monotonic()
        except OSError:
            pass
        time.sleep(0.01)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every server this many times, interleaved; each figure is the round of median "
                             "throughput (every round's req/s kept as rps_rounds), each share of the echo the median "
                             "of the rounds' shares; with --before, the median of the rounds' after/before ratios")
    parser.add_argument("--before", type=Path, help="another checkout whose server-only and /validate runs are "
                                                       "interleaved with this tree's (before/after in one run)")
    parser.add_argument("--workload", choices=("own", "before"), default="own",
                        help="with --before: what this tree serves, its own policies, CRDs and example state, "
                             "or the before tree's (the two runs then differ only in code)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.workload == "before" and not args.before:
        parser.error("--workload before needs --before DIR")

    import uvloop

    trees = {"": REPO}
    if args.before:
        trees[" (before)"] = args.before.resolve()
    results: dict = {"connections": args.connections, "seconds": args.seconds, "cpus": os.cpu_count(),
                     "trees": {"before" if suffix else "after": str(tree) for suffix, tree in trees.items()}}
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir, ctx = local_certs(tmp)
        if args.workload == "before":
            WORKLOAD.update(before_workload(args.before.resolve(), Path(tmp)))
            results["workload"] = "before"
        try:
            # /readyz: from spawning `infergate serve` to green (imports, certificates, chain).
            servers: dict[str, tuple[subprocess.Popen, int]] = {}
            for suffix, tree in trees.items():
                port = free_port()
                spawned = time.monotonic()
                server = spawn([sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
                                "--cert-dir", str(cert_dir), "--log-level", "warning",
                                *(serve_flags(WORKLOAD) if tree == REPO else [])], tree, procs, cwd=tmp)
                ready = wait_ready(port, ctx, "/readyz", spawned + 30)
                if ready is None:
                    print("infergate serve never became ready:\n" + log_tail(server), file=sys.stderr)
                    return 1
                results["readyz_seconds" + suffix.replace(" (before)", "_before")] = round(ready - spawned, 3)
                servers["validate" + suffix] = servers["mutate" + suffix] = (server, port)
                bare_port = free_port()
                servers["server_only" + suffix] = (
                    spawn([sys.executable, "-c", SERVER_ONLY, str(bare_port), str(cert_dir), str(tree)], tree, procs),
                    bare_port)
            base_port = free_port()
            servers["baseline"] = (
                spawn([sys.executable, "-c", BASELINE_SERVER, str(base_port), str(cert_dir), str(REPO)], REPO, procs),
                base_port)
            for proc, p in servers.values():
                if wait_listening(p, ctx, time.monotonic() + 30) is None:
                    print("a comparison server never started:\n" + log_tail(proc), file=sys.stderr)
                    return 1
            # Interleaved per family: a neighbour's load on a shared machine hits the runs
            # of one family alike, so the ratios stay meaningful.
            allowed = lambda resp: b'"allowed":true' in resp  # noqa: E731
            bodies = {family: as_the_apiserver_sends(review_for(REPO / "examples/manifests/valid" / manifest))
                      for family, manifest in FAMILIES.items()}
            rounds: dict[str, dict[str, list[dict]]] = {}
            for i, (family, (mutate_body, body)) in enumerate(
                    (f, bodies[f]) for _ in range(args.rounds) for f in FAMILIES):
                runs = [("baseline", "/echo", body, lambda resp, b=body: resp == b)]
                for suffix in list(trees)[::1 if i % 2 == 0 else -1]:  # before and after take turns going first
                    runs += [("server_only" + suffix, "/validate?timeout=10s", body, allowed),
                             ("validate" + suffix, "/validate?timeout=10s", body, allowed)]
                runs.append(("mutate", "/mutate?timeout=10s", mutate_body, allowed))
                for name, path, payload, check in runs:
                    proc, target = servers[name]
                    cpu_before = cpu_seconds(proc.pid)
                    r = uvloop.run(load(target, ctx, http_request(path, payload), connections=args.connections,
                                        seconds=args.seconds, warmup=args.warmup, check=check))
                    cpu_after = cpu_seconds(proc.pid)
                    if cpu_before is not None and cpu_after is not None and r["requests"]:
                        # the warm-up's requests are not counted: scale them in at the same rate
                        sent = r["requests"] * (args.seconds + args.warmup) / args.seconds
                        r["cpu_us_per_request"] = round((cpu_after - cpu_before) / sent * 1e6, 1)
                    r["body_bytes"] = len(payload)
                    rounds.setdefault(name, {}).setdefault(family, []).append(r)
                    print(f"{name:20s} {family:24s} {r}", flush=True)
            for name, by_family in rounds.items():
                for family, measured in by_family.items():
                    median = sorted(measured, key=lambda r: r["rps"])[(len(measured) - 1) // 2]
                    results.setdefault(name, {})[family] = {**median, "rps_rounds": [r["rps"] for r in measured]}
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)
        results["load_average"] = os.getloadavg()

    for endpoint in [name for name in results if name.startswith(("server_only", "validate", "mutate"))]:
        for family, r in results[endpoint].items():
            # the echo ran in the same round: the median of the rounds' shares, a paired figure
            r["of_baseline"] = round(statistics.median(
                a / b for a, b in zip(r["rps_rounds"], results["baseline"][family]["rps_rounds"])), 3)
    if args.before:  # each round's two runs were back to back: their ratio is the paired comparison
        for endpoint in ("server_only", "validate"):
            results[f"{endpoint} after/before"] = {
                family: round(statistics.median(
                    a / b for a, b in zip(r["rps_rounds"], results[f"{endpoint} (before)"][family]["rps_rounds"])), 3)
                for family, r in results[endpoint].items()}
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def spawn(command: list[str], tree: Path, procs: list[subprocess.Popen], **kw) -> subprocess.Popen:
    """A server process running the code of ``tree`` (kept in ``procs`` to be stopped). Its
    logs go to a file, not a pipe nobody reads (a full pipe would stall its event loop)."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(command, env=dict(os.environ, PYTHONPATH=str(tree)), stdout=subprocess.DEVNULL,
                            stderr=log, **kw)
    proc.log = log  # type: ignore[attr-defined]
    procs.append(proc)
    return proc


def log_tail(proc: subprocess.Popen) -> str:
    proc.log.seek(0)  # type: ignore[attr-defined]
    return proc.log.read().decode(errors="replace")[-3000:]  # type: ignore[attr-defined]


def wait_listening(port: int, ctx: ssl.SSLContext, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost"):
                return time.monotonic()
        except OSError:
            time.sleep(0.02)
    return None


if __name__ == "__main__":
    sys.exit(main())
