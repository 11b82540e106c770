"""Where a review's CPU goes in the running server: the chain, the thread hop, the GC, the rest.

``bench/server_bench.py`` gives one figure per review (the server process's CPU time per
request). This splits it. Each variant is ``infergate serve`` on the embedded default in
its own process, with its admitter wrapped by a probe that adds up the thread CPU time
spent inside ``admit`` and the time the cyclic GC runs (``gc.callbacks``); the event loop's
and the other threads' CPU come from ``/proc/PID/task``. One load generator (as
server_bench's: 16 keep-alive TLS connections, closed loop) drives the variants in turn,
alternating their order per round, so a neighbour's load hits them alike:

* ``allow``       — an allow-all admitter (the server's own path), judged where
                    ``Placement`` puts it (on the loop: it is cheap);
* ``allow-pool``  — the same, always in the worker pool: the cost of the thread hop;
* ``validate``    — the real chain, placed as the server places it;
* ``validate-pool`` / ``validate-loop`` — the real chain, always in the pool / on the loop;
* ``twice``       — the real chain run twice per review on the loop, timed separately: the
                    second run finds its code and data in the cache, the first as a review
                    does (the difference is what the rest of the server's work evicts);
* ``echo``        — server_bench's baseline (a bare aiohttp TLS server echoing the body),
                    driven with the same body: what any review costs at least (once per
                    run, not per tree).

``--before DIR`` adds the same variants for another checkout (a before/after in one run).

    python bench/server_gap.py [--manifest kubeai-model-vllm.yaml] [--seconds 3] [--rounds 3]
                               [--variants allow,validate,...] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import server_bench as sb  # (bench/ is on sys.path as the script's folder)
from server_bench import REPO

from webhook import certs

# `infergate serve` with a probing admitter; argv: port cert_dir tree admitter placement stats_file.
# On SIGUSR1 it writes its counters to stats_file.
PROBED_SERVER = r'''
import gc, json, signal, sys, time
port, cert_dir, tree, admitter, placement, stats_file = sys.argv[1:7]
sys.path.insert(0, tree)
import uvloop
import webhook.server as server
from webhook.admission.review import AdmissionResult
try:
    from webhook.cel import Evaluator
    from webhook.server.settings import Settings
except ImportError:  # a checkout from before the engine became a value passed down
    Evaluator = None
    from webhook.settings import Settings

stats = {"reviews": 0, "admit_cpu": 0.0, "first_cpu": 0.0, "gc": 0.0}
began = [0.0]

def on_gc(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        stats["gc"] += time.perf_counter() - began[0]
gc.callbacks.append(on_gc)

class AllowAll:
    def admit(self, request, *, mutating):
        return AdmissionResult(allowed=True)

class Probe:
    def __init__(self, inner):
        self.inner = inner
    def admit(self, request, *, mutating):
        if admitter == "twice":
            t = time.thread_time()
            self.inner.admit(request, mutating=mutating)
            stats["first_cpu"] += time.thread_time() - t
        t = time.thread_time()
        try:
            return self.inner.admit(request, mutating=mutating)
        finally:
            stats["admit_cpu"] += time.thread_time() - t
            stats["reviews"] += 1

def load(settings):
    if admitter == "allow":
        return Probe(AllowAll()), {}
    chain, prerequisites = (server.load_admitter(settings) if Evaluator is None
                            else server.load_admitter(settings, Evaluator()))
    return Probe(chain), prerequisites

if placement != "as-configured":  # every review in the pool ("pool") or on the loop ("loop")
    cpu_bound = 0.0 if placement == "pool" else 1e9
    base_init = server.Placement.__init__
    def init(self, max_bytes, max_cpu_seconds, max_seconds):
        base_init(self, 1 << 62 if placement == "loop" else max_bytes, cpu_bound, 1e9 if placement == "loop" else max_seconds)
    server.Placement.__init__ = init
    base_on_loop = server.Placement.on_loop
    server.Placement.on_loop = lambda self, key, size: placement == "loop" or base_on_loop(self, key, size)

def dump(*_):
    with open(stats_file + ".tmp", "w") as f:
        json.dump(stats, f)
    __import__("os").replace(stats_file + ".tmp", stats_file)
signal.signal(signal.SIGUSR1, dump)
settings = Settings(host="127.0.0.1", port=int(port), cert_dir=cert_dir, log_level="warning")
uvloop.run(server.serve(settings, load=load))
'''

VARIANTS = {  # name: (admitter, placement)
    "allow": ("allow", "as-configured"),
    "allow-pool": ("allow", "pool"),
    "validate": ("chain", "as-configured"),
    "validate-pool": ("chain", "pool"),
    "validate-loop": ("chain", "loop"),
    "twice": ("twice", "loop"),
    "echo": ("echo", ""),
}


def threads_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of the main thread (the event loop) and of all the others."""
    main = others = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        if int(tid) == pid:
            main += seconds
        else:
            others += seconds
    return main, others


def probe(proc: subprocess.Popen, stats_file: Path) -> dict:
    stats_file.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if stats_file.exists():
            return json.loads(stats_file.read_text())
        time.sleep(0.01)
    raise SystemExit("the probed server did not report its counters")


def counters(name: str, proc: subprocess.Popen, stats_file: Path) -> dict:
    """The probe's counters; zeros for the echo, which has none."""
    return {"reviews": 0, "admit_cpu": 0.0, "first_cpu": 0.0, "gc": 0.0} if name == "echo" else probe(proc, stats_file)


def fmt(key: str, value: float) -> str:
    return f"{key}={value:.1f}" if key.endswith("_ms") else f"{key}={value:.0f}"


def main() -> int:
    import uvloop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="kubeai-model-vllm.yaml", help="of examples/manifests/valid")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--variants", default="echo,allow,allow-pool,validate,validate-pool,validate-loop,twice")
    parser.add_argument("--before", type=Path, help="another checkout, its variants run alongside")
    args = parser.parse_args()

    trees = {"": REPO} | ({" (before)": args.before.resolve()} if args.before else {})
    _, body = sb.as_the_apiserver_sends(sb.review_for(REPO / "examples/manifests/valid" / args.manifest))
    request = sb.http_request("/validate?timeout=10s", body)
    allowed = lambda resp: b'"allowed":true' in resp  # noqa: E731
    echoed = sb.http_request("/echo", body), lambda resp: resp == body
    servers: dict[str, tuple[subprocess.Popen, int, Path]] = {}
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp, "certs")
        bundle = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
        certs.DirectoryStore(cert_dir).save(bundle)
        ctx = certs.client_context(bundle.ca_pem())
        try:
            for suffix, tree in trees.items():
                for variant in args.variants.split(","):
                    admitter, placement = VARIANTS[variant]
                    port, stats_file = sb.free_port(), Path(tmp, f"{variant}{suffix.strip()}.json")
                    if variant == "echo":
                        if not suffix:
                            proc = sb.spawn([sys.executable, "-c", sb.BASELINE_SERVER, str(port), str(cert_dir),
                                             str(REPO)], REPO, procs)
                            servers[variant] = (proc, port, stats_file)
                        continue
                    proc = sb.spawn([sys.executable, "-c", PROBED_SERVER, str(port), str(cert_dir), str(tree), admitter,
                                     placement, str(stats_file)], tree, procs, cwd=tmp)
                    servers[variant + suffix] = (proc, port, stats_file)
            for name, (proc, port, _) in servers.items():
                ready = (sb.wait_listening(port, ctx, time.monotonic() + 60) if name == "echo"
                         else sb.wait_ready(port, ctx, "/readyz", time.monotonic() + 60))
                if ready is None:
                    print(f"{name} never became ready:\n" + sb.log_tail(proc), file=sys.stderr)
                    return 1
            rows: dict[str, list[dict]] = {name: [] for name in servers}
            for round_ in range(args.rounds):
                for name in list(servers)[:: 1 if round_ % 2 == 0 else -1]:
                    proc, port, stats_file = servers[name]
                    sent, check = echoed if name == "echo" else (request, allowed)
                    uvloop.run(sb.load(port, ctx, sent, connections=args.connections, seconds=0.5, warmup=0,
                                       check=check))  # warm-up
                    cpu0, threads0, stats0 = sb.cpu_seconds(proc.pid), threads_cpu(proc.pid), counters(name, proc, stats_file)
                    r = uvloop.run(sb.load(port, ctx, sent, connections=args.connections, seconds=args.seconds,
                                           warmup=0, check=check))
                    cpu1, threads1, stats1 = sb.cpu_seconds(proc.pid), threads_cpu(proc.pid), counters(name, proc, stats_file)
                    n, reviews = r["requests"], max(stats1["reviews"] - stats0["reviews"], 1)
                    row = {"rps": r["rps"], "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "errors": r["errors"],
                           "cpu_us": (cpu1 - cpu0) / n * 1e6,
                           "loop_us": (threads1[0] - threads0[0]) / n * 1e6,
                           "other_threads_us": (threads1[1] - threads0[1]) / n * 1e6,
                           "admit_us": (stats1["admit_cpu"] - stats0["admit_cpu"]) / reviews * 1e6,
                           "gc_us": (stats1["gc"] - stats0["gc"]) / n * 1e6}
                    if stats1["first_cpu"]:
                        row["first_admit_us"] = (stats1["first_cpu"] - stats0["first_cpu"]) / reviews * 1e6
                    rows[name].append(row)
                    print(f"{name:24} " + " ".join(fmt(k, v) for k, v in row.items()), flush=True)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)
    print(f"\nmedians over {args.rounds} rounds ({args.manifest}, load average {os.getloadavg()[0]:.1f}):")
    for name, runs in rows.items():
        print(f"{name:24} " + " ".join(fmt(k, statistics.median(r[k] for r in runs)) for k in runs[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
