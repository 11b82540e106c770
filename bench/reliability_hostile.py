"""Small requests stay fast while hostile ones are judged: p99 of small reviews with and
without a stream of hostile reviews (one always in flight), and how long each hostile
kind takes, with its verdict.

One `infergate serve` (the embedded default). Small traffic: the valid example of each
family, as the apiserver sends it to /validate, paced to --rate from 4 keep-alive TLS
connections. Hostile traffic: one more connection sending one hostile kind back to back
(a 3 MiB object, a 10,000-element set, 10,000 targets, 100,000-character near misses for
the shipped regexes, a value nested 1,000 levels deep).

    python bench/reliability_hostile.py [--seconds 15] [--rate 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import ssl
import statistics
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from reliability_soak import running_serve  # noqa: E402
from server_bench import FAMILIES, as_the_apiserver_sends, http_request, read_response, review_for  # noqa: E402

MiB = 1024 * 1024


def stored(manifest: str) -> dict:
    """A valid example as /validate gets it (defaulted, mutated)."""
    return orjson.loads(as_the_apiserver_sends(review_for(REPO / "examples/manifests/valid" / manifest))[1])


def hostile_reviews() -> dict[str, bytes]:
    model, klass, imodel = (stored(m) for m in ("kubeai-model-vllm.yaml", "inferenceserviceclass.yaml", "inferencemodel.yaml"))

    def variant(base: dict, change) -> bytes:
        review = copy.deepcopy(base)
        change(review["request"]["object"])
        return orjson.dumps(review)

    deep = b'{"a":' * 500 + b'["x"]' + b"}" * 500
    evil = "a" * 100_000 + "!"
    return {
        "3 MiB annotation": variant(model, lambda o: o["metadata"].update(annotations={"pad": "x" * (3 * MiB - 8192)})),
        "3 MiB string quoted by a policy message": variant(
            model, lambda o: (o["spec"].update(url="ollama://" + "a" * (3 * MiB - 8192)), o["spec"].pop("cacheProfile", None))),
        "10,000-element set, regex rule per item": variant(
            klass, lambda o: o["spec"].update(admissionPolicy={"allowedNamespaces": [f"ns-{i}" for i in range(10_000)]})),
        "10,000 targets with rules": variant(
            imodel, lambda o: o["spec"].update(targetModels=[{"name": f"a-{i}", "weight": 1} for i in range(10_000)])),
        "100,000-char regex near misses": variant(
            imodel, lambda o: o["spec"]["poolRef"].update(group=evil, kind=evil)),
        "1,000 levels deep": variant(model, lambda o: o["spec"].update(args=["@deep"])).replace(b'"@deep"', deep),
    }


async def run_phase(port: int, ctx: ssl.SSLContext, small: list[bytes], hostile: bytes | None, *,
                    seconds: float, rate: float, connections: int = 4) -> dict:
    latencies: list[float] = []
    hostile_latencies: list[float] = []
    verdicts: set[str] = set()
    errors: list[str] = []
    stop_at = time.perf_counter() + seconds
    interval = connections / rate

    async def small_worker(k: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        next_at, i = time.perf_counter() + k * interval / connections, k
        while time.perf_counter() < stop_at:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += interval
            t0 = time.perf_counter()
            writer.write(small[i % len(small)])
            i += 1
            status, body = await read_response(reader)
            latencies.append(time.perf_counter() - t0)
            if status != 200 or b'"allowed":true' not in body:
                errors.append(f"small: {status} {body[:200]!r}")
        writer.close()

    async def hostile_worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(hostile)
            status, body = await read_response(reader)
            hostile_latencies.append(time.perf_counter() - t0)
            response = orjson.loads(body)["response"] if status == 200 else {}
            if status != 200 or "failure" in response.get("auditAnnotations", {}):
                errors.append(f"hostile: {status} {body[:300]!r}")
            verdicts.add("allowed" if response.get("allowed") else
                         f"denied: {(response.get('status') or {}).get('message', '')[:90]}")
        writer.close()

    workers = [small_worker(k) for k in range(connections)] + ([hostile_worker()] if hostile else [])
    await asyncio.gather(*workers)

    def ms(values: list[float], q: int) -> float:
        if len(values) < 2:
            return round(values[0] * 1000, 1) if values else 0.0
        return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000, 1)

    result = {"small_requests": len(latencies), "small_p50_ms": ms(latencies, 50), "small_p99_ms": ms(latencies, 99),
              "errors": len(errors), "first_errors": errors[:3]}
    if hostile:
        result |= {"hostile_requests": len(hostile_latencies), "hostile_p50_ms": ms(hostile_latencies, 50),
                   "hostile_max_ms": round(max(hostile_latencies) * 1000, 1), "hostile_bytes": len(hostile),
                   "verdicts": sorted(verdicts)}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="per phase")
    parser.add_argument("--rate", type=float, default=50.0, help="small requests per second")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import uvloop

    small = [http_request("/validate?timeout=5s", orjson.dumps(stored(m))) for m in FAMILIES.values()]
    hostile = {name: http_request("/validate?timeout=5s", body) for name, body in hostile_reviews().items()}
    results: dict = {"seconds_per_phase": args.seconds, "small_rate": args.rate, "cpus": os.cpu_count(), "phases": {}}
    with running_serve("error") as (_, port, ctx):
        for name, body in {"no hostile traffic": None, **hostile}.items():
            result = uvloop.run(run_phase(port, ctx, small, body, seconds=args.seconds, rate=args.rate))
            results["phases"][name] = result
            print(f"{name}: {orjson.dumps(result).decode()}", flush=True)
    if args.json:
        args.json.write_text(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
    ok = all(p["errors"] == 0 for p in results["phases"].values())
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
