"""Instructions the server process executes per review, counted by callgrind: the figure of
``server_bench.py`` that the neighbours on a shared machine cannot move.

Runs, one after the other and under ``valgrind --tool=callgrind`` (instrumentation switched
on only around the counted requests, so start-up runs at valgrind's plain speed):
  * baseline: the bare aiohttp TLS echo of ``server_bench.py``;
  * server only: ``serve()`` with an allow-all admitter;
  * infergate /validate with each family's object, as the apiserver sends it;
and with ``--before DIR`` the same for another checkout's code (``--workload before``:
this tree serving the before tree's workload, as in ``server_bench.py``).

Each server is left to finish what it starts once ready (its CPU time idle for 2 s) before
the first count. Every review is judged on the event loop (``--workers 0``): under valgrind a review takes
far longer than the placement's bound, and the worker pool would count thread hops the
real server does not make. The load is ``--connections`` keep-alive connections, as in
``server_bench.py``; per family, uncounted warm-up reviews come first.

The ratio to the echo (echo instructions / server instructions per request) stands for
the throughput ratio of ``server_bench.py`` on one core; it leaves out what instructions
do not show (cache misses, the kernel's TLS socket work).

    python bench/server_instructions.py [--requests 800] [--before DIR [--workload before]] [--json out.json]

Needs valgrind (``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server_bench as sb  # noqa: E402  (this folder's: the servers, bodies and workloads)


ALLOWED = b'"allowed":true'


async def _all(coroutines):
    return await asyncio.gather(*coroutines)


class Connections:
    """Keep-alive TLS connections opened once, so that no handshake falls in a count."""

    def __init__(self, port: int, ctx, count: int) -> None:
        self.port, self.ctx, self.count = port, ctx, count
        self.loop = uvloop.new_event_loop()
        self.streams = self.loop.run_until_complete(_all(
            asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost") for _ in range(count)))

    def send(self, request: bytes, total: int, expect: bytes | None) -> int:
        """``total`` requests (rounded down to a multiple of the connections), each
        connection sending its share in turn; the number sent."""
        each = total // self.count

        async def one(reader, writer) -> None:
            for _ in range(each):
                writer.write(request)
                status, body = await sb.read_response(reader)
                if status != 200 or (expect is not None and expect not in body):
                    raise SystemExit(f"unexpected answer {status}: {body[:300]!r}")

        self.loop.run_until_complete(_all(one(r, w) for r, w in self.streams))
        return each * self.count

    def close(self) -> None:
        for _, writer in self.streams:
            writer.close()
        self.loop.close()


def settle(pid: int, deadline: float, quiet: float = 2.0) -> None:
    """Wait until process ``pid`` has used no CPU for ``quiet`` seconds: work a server
    starts after it is ready (the cel-python fallback warmed up in a thread) must not fall
    in a count."""
    last, since = sb.cpu_seconds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = sb.cpu_seconds(pid)
        if now is None or now - last > 0.02:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


def instructions(out_prefix: str, pid: int) -> int:
    """The instructions of the newest dump of process ``pid``."""
    newest = max(glob.glob(f"{out_prefix}.{pid}*"), key=os.path.getmtime)
    with open(newest) as dump:
        for line in dump:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise SystemExit(f"no totals in {newest}")


def counted(server: subprocess.Popen, out_prefix: str, connections: Connections, request: bytes, args,
            expect) -> float:
    """Instructions per request of ``server`` answering ``request``."""
    connections.send(request, args.warmup, expect)  # uninstrumented
    control("-i", "on", str(server.pid))
    connections.send(request, connections.count * 4, expect)  # its caches, instrumented
    control("-z", str(server.pid))
    sent = connections.send(request, args.requests, expect)
    control("-d", str(server.pid))
    control("-i", "off", str(server.pid))
    return instructions(out_prefix, server.pid) / sent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=800, help="counted requests per server and family")
    parser.add_argument("--warmup", type=int, default=320, help="uncounted requests first, per family")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--before", type=Path, help="another checkout to count the same way")
    parser.add_argument("--workload", choices=("own", "before"), default="own",
                        help="with --before: this tree serves its own workload or the before tree's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.workload == "before" and not args.before:
        parser.error("--workload before needs --before DIR")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("server_instructions: valgrind (callgrind) is not installed", file=sys.stderr)
        return 2

    # the same string hashes in every server: dict probes, and so instructions, repeat run to run
    os.environ["PYTHONHASHSEED"] = "0"
    trees = {"after": sb.REPO} | ({"before": args.before.resolve()} if args.before else {})
    results: dict = {"requests": args.requests, "connections": args.connections, "workload": args.workload,
                     "trees": {name: str(tree) for name, tree in trees.items()}}
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir, ctx = sb.local_certs(tmp)
        if args.workload == "before":
            sb.WORKLOAD.update(sb.before_workload(args.before.resolve(), Path(tmp)))
        bodies = {family: sb.as_the_apiserver_sends(sb.review_for(sb.REPO / "examples/manifests/valid" / manifest))[1]
                  for family, manifest in sb.FAMILIES.items()}
        out_prefix = f"{tmp}/callgrind.out"
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_prefix}.%p"]

        def run(name: str, command: list[str], port: int, tree: Path, path: str, ready: str | None, expect) -> None:
            procs: list[subprocess.Popen] = []
            try:
                server = sb.spawn(valgrind + command, tree, procs, cwd=tmp)
                deadline = time.monotonic() + 600
                up = sb.wait_ready(port, ctx, ready, deadline) if ready else sb.wait_listening(port, ctx, deadline)
                if up is None:
                    raise SystemExit(f"{name} never started:\n" + sb.log_tail(server))
                settle(server.pid, deadline)
                connections = Connections(port, ctx, args.connections)
                for family, body in bodies.items():
                    per_request = counted(server, out_prefix, connections, sb.http_request(path, body), args,
                                          expect(body))
                    results.setdefault(name, {})[family] = round(per_request)
                    print(f"{name:22s} {family:24s} {per_request:12,.0f} instructions/request", flush=True)
                connections.close()
            finally:
                for proc in procs:
                    proc.terminate()
                    proc.wait(60)

        port = sb.free_port()
        run("baseline", [sys.executable, "-c", sb.BASELINE_SERVER, str(port), str(cert_dir), str(sb.REPO)], port,
            sb.REPO, "/echo", None, lambda body: body)
        for name, tree in trees.items():
            suffix = "" if name == "after" else " (before)"
            port = sb.free_port()
            run("server_only" + suffix, [sys.executable, "-c", sb.SERVER_ONLY, str(port), str(cert_dir), str(tree)],
                port, tree, "/validate?timeout=10s", None, lambda body: ALLOWED)
            port = sb.free_port()
            run("validate" + suffix,
                [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port), "--cert-dir",
                 str(cert_dir), "--log-level", "warning", "--workers", "0",
                 *(sb.serve_flags(sb.WORKLOAD) if name == "after" else [])],
                port, tree, "/validate?timeout=10s", "/readyz", lambda body: ALLOWED)

    for name in [n for n in results if n.startswith(("server_only", "validate"))]:
        for family, count in results[name].items():
            results[name][family] = {"instructions": count, "of_baseline": round(results["baseline"][family] / count, 3)}
    if args.before:
        results["validate after/before"] = {
            family: round(r["instructions"] / results["validate (before)"][family]["instructions"], 3)
            for family, r in results["validate"].items()}
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
