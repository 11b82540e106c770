"""`infergate serve --processes 2` against `--processes 1`: throughput, CPU per review and p99
over TLS on loopback, in one run, with the load generator sharing the machine's cores.

The load comes from ``--generators`` processes (default 2; one generator process, given one
core's share, would cap what it measures). Both servers run the real chain (the shipped policies, CRDs and example state) on their own
port; for every family's /validate and /mutate review (as the apiserver sends it, see
``bench/server_bench.py``) the two are measured back to back, ``--rounds`` times, in turn.
CPU per review is the CPU time of all of a server's processes over the measured requests.
Reported per family: the 1-process throughput (round of median), the median of the rounds'
2-process/1-process throughput ratios, CPU µs per review, p99 ms.

``--control`` adds two one-process servers loaded by the same generators and connections:
"paired" (each generator on its own server) and "crossed" (each generator's connections split
over both, as ``SO_REUSEPORT``'s hash alone would): what the load's topology costs, the bounds
the two-process server sits between.

    python bench/server_processes.py [--seconds 3] [--warmup 0.5] [--rounds 3] [--connections 16] [--control]
        [--baseline TREE] [--families NAME] [--json out.json]

``--baseline TREE``: also ``--processes 2`` as another checkout serves it (a worktree of main),
measured in the same rounds.

``--memory``: instead, memory of 1, 2 and 3 processes once ready (PSS summed over the group, from
``/proc/PID/smaps_rollup``: shared copy-on-write pages counted once), serving the example
state, or the cluster with ``--kubeconfig K`` (``--kube-state``; then also the apiserver's
open watches, ``apiserver_longrunning_requests{verb="WATCH"}``, before and after).

    python bench/server_processes.py --memory [--kubeconfig K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from server_bench import (FAMILIES, as_the_apiserver_sends, free_port, http_request, local_certs,  # noqa: E402
                          log_tail, read_response, review_for, spawn, wait_ready)

COUNTS = (1, 2)


async def latencies(port: int, ctx, request: bytes, *, connections: int, seconds: float, warmup: float,
                    connect_on: int | None = None) -> list[float]:
    """A closed loop of ``connections`` keep-alive TLS connections: each measured request's
    latency (an answer that is not a 200 with a uid is NaN). ``connect_on``: the connections
    are opened from that CPU (their SYNs handled there), the process then free again."""
    measured: list[float] = []
    allowed = os.sched_getaffinity(0)
    if connect_on is not None:
        os.sched_setaffinity(0, {connect_on})
    try:  # pinned until every connection is open: their SYNs leave from this CPU
        opened = await asyncio.gather(*(asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
                                        for _ in range(connections)))
    finally:
        os.sched_setaffinity(0, allowed)
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + seconds

    async def worker(reader, writer):
        while (t0 := time.perf_counter()) < stop_at:
            writer.write(request)
            status, body = await read_response(reader)
            if t0 >= measure_from:
                measured.append(time.perf_counter() - t0 if status == 200 and b'"uid"' in body else float("nan"))
        writer.close()

    await asyncio.gather(*(worker(reader, writer) for reader, writer in opened))
    return measured


def generate(port: int, request: bytes, *, generators: int, connections: int, seconds: float, warmup: float,
             ca: bytes) -> dict:
    """The load from ``generators`` processes (forked, uvloop), ``connections`` in all: one
    generator process would cap the throughput it measures when the cores are shared."""
    shares = [connections // generators + (1 if n < connections % generators else 0) for n in range(generators)]
    return generate_plan([[(port, share)] for share in shares], request, seconds=seconds, warmup=warmup, ca=ca)


def generate_plan(plan: list[list[tuple[int, int]]], request: bytes, *, seconds: float, warmup: float,
                  ca: bytes, spread_syns: bool = False) -> dict:
    """One generator process per item of ``plan``, each keeping ``(port, connections)`` loops.
    ``spread_syns``: generator ``i`` opens its connections from CPU ``i`` (mod the CPUs), as a
    NIC's receive-side scaling spreads clients' SYNs over a node's CPUs; without it they
    leave from wherever the scheduler has the generator then (often all on one CPU, forked
    together)."""
    import multiprocessing

    from webhook import certs

    cpus = sorted(os.sched_getaffinity(0))

    def run(index: int, targets: list[tuple[int, int]], out) -> None:
        import uvloop

        async def all_targets() -> list[float]:
            context = certs.client_context(ca)
            cpu = cpus[index % len(cpus)] if spread_syns else None
            measured = await asyncio.gather(*(latencies(port, context, request, connections=n, seconds=seconds,
                                                        warmup=warmup, connect_on=cpu) for port, n in targets))
            return [value for values in measured for value in values]

        out.send(uvloop.run(all_targets()))

    context = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for index, targets in enumerate(plan):
        receive, send = context.Pipe(duplex=False)
        proc = context.Process(target=run, args=(index, targets, send))
        proc.start()
        pipes.append(receive)
        procs.append(proc)
    measured = [value for pipe in pipes for value in pipe.recv()]
    for proc in procs:
        proc.join()
    errors = sum(1 for value in measured if value != value)
    ok = sorted(value for value in measured if value == value)
    q = statistics.quantiles(ok, n=100, method="inclusive")
    return {"rps": round(len(measured) / seconds), "p50_ms": round(q[49] * 1000, 3), "p99_ms": round(q[98] * 1000, 3),
            "requests": len(measured), "errors": errors}


def group_pids(pid: int) -> list[int]:
    """The supervisor and the server processes it forked (Linux)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return [pid, *children]


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise ValueError(pid)


def apiserver_watches(kubeconfig: Path) -> int:
    """Watches the apiserver holds open (every client's), from its /metrics."""
    from kubernetes import config

    api = config.new_client_from_config(str(kubeconfig))
    response = api.rest_client.request("GET", api.configuration.host + "/metrics")
    response.read()
    text = response.data.decode()
    return round(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                     if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line))


def memory(kubeconfig: Path | None) -> int:
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir, ctx = local_certs(tmp)
        for count in (1, 2, 3):
            procs: list = []
            before = apiserver_watches(kubeconfig) if kubeconfig else None
            port = free_port()
            extra = ["--kube-state", "--kubeconfig", str(kubeconfig)] if kubeconfig else []
            server = spawn([sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
                            "--cert-dir", str(cert_dir), "--log-level", "warning", "--processes", str(count), *extra],
                           REPO, procs, cwd=tmp)
            try:
                if wait_ready(port, ctx, "/readyz", time.monotonic() + 120) is None:
                    print("never ready:\n" + log_tail(server), file=sys.stderr)
                    return 1
                time.sleep(2)  # the loaded heap frozen, the watches settled
                pids = group_pids(server.pid)
                per = {pid: pss_kib(pid) for pid in pids}
                row = {"pss_mib": round(sum(per.values()) / 1024, 1),
                       "per_process_mib": [round(v / 1024, 1) for v in per.values()]}
                if kubeconfig:
                    row["watches_added"] = apiserver_watches(kubeconfig) - before
                report[count] = row
                print(f"--processes {count}: {row}")
            finally:
                server.terminate()
                server.wait(30)
    print(json.dumps(report))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--generators", type=int, default=2, help="load generator processes sharing the connections")
    parser.add_argument("--scale-connections", action="store_true",
                        help="--connections per server process (2 processes get twice as many): the same load per "
                             "process, which the CPU per review depends on")
    parser.add_argument("--control", action="store_true",
                        help="also two `--processes 1` servers, each generator on its own (paired) or every "
                             "generator on both (crossed): what the load's topology costs")
    parser.add_argument("--spread-syns", action="store_true",
                        help="generator i opens its connections from CPU i, then runs anywhere (see generate_plan)")
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="also `--processes 2` of another checkout (a worktree of main), in the same run")
    parser.add_argument("--families", help="only the families whose name contains this")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.memory:
        return memory(args.kubeconfig)

    bodies = {}
    for family, name in FAMILIES.items():
        if args.families and args.families.lower() not in family.lower():
            continue
        mutate, validate = as_the_apiserver_sends(review_for(REPO / "examples" / "manifests" / "valid" / name))
        bodies[(family, "validate")] = http_request("/validate", validate)
        bodies[(family, "mutate")] = http_request("/mutate", mutate)

    procs = []
    runs: dict[str, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir, ctx = local_certs(tmp)
        ca = (cert_dir / "ca.crt").read_bytes()
        servers: dict[str, tuple[int, list[int]]] = {}
        try:
            started = [("x1", 1, REPO), ("x2", 2, REPO)]
            started += [("b", 1, REPO)] if args.control else []
            started += [("base x2", 2, args.baseline.resolve())] if args.baseline else []
            for label, count, tree in started:
                port = free_port()
                server = spawn([sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
                                "--cert-dir", str(cert_dir), "--log-level", "warning", "--processes", str(count)],
                               tree, procs, cwd=tmp)
                if wait_ready(port, ctx, "/readyz", time.monotonic() + 60) is None:
                    print("infergate serve never became ready:\n" + log_tail(server), file=sys.stderr)
                    return 1
                pids = group_pids(server.pid)
                assert len(pids) == (1 if count == 1 else count + 1), pids
                servers[label] = (port, pids)

            def split(total: int) -> list[int]:
                return [total // args.generators + (1 if n < total % args.generators else 0)
                        for n in range(args.generators)]

            one, two = servers["x1"][0], servers["x2"][0]
            per_count = {1: args.connections, 2: args.connections * (2 if args.scale_connections else 1)}
            setups = {"x1": ([[(one, n)] for n in split(per_count[1])], servers["x1"][1]),
                      "x2": ([[(two, n)] for n in split(per_count[2])], servers["x2"][1])}
            if args.baseline:
                setups["base x2"] = ([[(servers["base x2"][0], n)] for n in split(per_count[2])], servers["base x2"][1])
            if args.control:  # the same 2 generators and connections, on two one-process servers
                other = servers["b"][0]
                half = args.connections // 2
                setups["paired"] = ([[(one, half)], [(other, half)]], servers["x1"][1] + servers["b"][1])
                setups["crossed"] = ([[(one, half // 2), (other, half - half // 2)]] * 2,
                                     servers["x1"][1] + servers["b"][1])
            for round_ in range(args.rounds):
                for (family, endpoint), request in bodies.items():
                    order = list(setups) if round_ % 2 == 0 else list(reversed(setups))
                    for label in order:
                        plan, pids = setups[label]
                        cpu0 = cpu_of(pids)
                        result = generate_plan(plan, request, seconds=args.seconds, warmup=args.warmup, ca=ca,
                                               spread_syns=args.spread_syns)
                        # CPU over warm-up and measurement, per request over both
                        total = result["requests"] * (args.seconds + args.warmup) / args.seconds
                        result["cpu_us"] = round((cpu_of(pids) - cpu0) / max(total, 1) * 1e6)
                        runs.setdefault(f"{family} {endpoint}", {}).setdefault(label, []).append(result)
                        print(f"round {round_ + 1} {family} {endpoint} {label}: {result}", file=sys.stderr)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)

    report = {"cpus": os.cpu_count(), "connections": args.connections, "scale_connections": args.scale_connections,
              "spread_syns": args.spread_syns,
              "seconds": args.seconds, "load": os.getloadavg()[0], "families": {}}
    labels = list(setups)
    print(f"{'family':38} {'req/s x1':>9} " + " ".join(f"{'x ' + l:>8}" for l in labels[1:])
          + f" {'cpu µs x1':>9} " + " ".join(f"{l:>7}" for l in labels[1:])
          + f" {'p99 ms x1':>9} " + " ".join(f"{l:>7}" for l in labels[1:]))
    for name, by_label in runs.items():
        median = {label: sorted(rs, key=lambda r: r["rps"])[len(rs) // 2] for label, rs in by_label.items()}
        ratios = {label: statistics.median(r["rps"] / one["rps"] for one, r in zip(by_label["x1"], by_label[label]))
                  for label in labels}  # each round's ratio: both measured back to back
        row = {"rps": {label: median[label]["rps"] for label in labels},
               "ratio": round(ratios["x2"], 2), "ratios": {label: round(ratios[label], 2) for label in labels},
               "cpu_us": {label: round(statistics.median(r["cpu_us"] for r in by_label[label])) for label in labels},
               "p99_ms": {label: round(statistics.median(r["p99_ms"] for r in by_label[label]), 2) for label in labels},
               "errors": sum(r["errors"] for rs in by_label.values() for r in rs), "rounds": by_label}
        report["families"][name] = row
        print(f"{name:38} {row['rps']['x1']:>9} "
              + " ".join(f"{row['ratios'][l]:>8}" for l in labels[1:])
              + f" {row['cpu_us']['x1']:>9} " + " ".join(f"{row['cpu_us'][l]:>7}" for l in labels[1:])
              + f" {row['p99_ms']['x1']:>9} " + " ".join(f"{row['p99_ms'][l]:>7}" for l in labels[1:]))
    ratios = [row["ratio"] for row in report["families"].values()]
    report["median_ratio"] = statistics.median(ratios)
    print(f"median throughput ratio x2/x1 {report['median_ratio']:.2f}; load average {report['load']:.1f} "
          "(ratio columns: each setup's req/s over x1's, median of the rounds)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
