"""How long `infergate serve` takes to turn `/readyz` green, against `import aiohttp`.

Each run spawns `python -m webhook serve` (the embedded default: shipped CRDs and policies,
the example cluster state; certificates already in the directory, as at a pod's restart),
polls `/readyz` over TLS (verifying the CA) every 10 ms from the moment of the spawn, and
stops it with SIGTERM. In the same run, interleaved, the baseline spawns
`python -c "import aiohttp"`: the interpreter plus the one import no aiohttp server can
skip. The ratio of the medians is what to compare across machines; the server's own log
says how much of it was loading the admission chain.

    python bench/serve_startup.py [--runs 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port: int, context: ssl.SSLContext) -> bool:
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=1)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:  # not listening yet, or the handshake raced the start
        return False
    finally:
        conn.close()


def serve_once(cert_dir: Path) -> tuple[float, float | None]:
    """Seconds from spawn to a green /readyz, and the chain's load time from its log."""
    port = free_port()
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    spawned = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--cert-dir", str(cert_dir)],
        env=ENV, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not ready(port, context):
            if proc.poll() is not None:
                raise SystemExit("infergate serve exited:\n" + proc.stderr.read().decode()[-3000:])
            if time.perf_counter() - spawned > 60:
                raise SystemExit("/readyz not green within 60 s")
            time.sleep(0.01)
        elapsed = time.perf_counter() - spawned
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    chain = None
    for line in err.decode().splitlines():
        if '"admission chain loaded"' in line:
            chain = json.loads(line).get("seconds")
    return elapsed, chain


def baseline_once() -> float:
    spawned = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import aiohttp.web"], env=ENV, check=True)
    return time.perf_counter() - spawned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp) / "certs"
        subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--dir", str(cert_dir)],
                       env=ENV, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        serve_once(cert_dir)  # warm the page cache and __pycache__ alike for both
        baseline_once()
        serves, chains, baselines = [], [], []
        for _ in range(args.runs):
            baselines.append(baseline_once())
            elapsed, chain = serve_once(cert_dir)
            serves.append(elapsed)
            if chain is not None:
                chains.append(chain)

    result = {
        "runs": args.runs,
        "load_average": os.getloadavg()[0],
        "readyz_seconds": {"median": statistics.median(serves), "min": min(serves), "max": max(serves)},
        "chain_load_seconds_median": statistics.median(chains) if chains else None,
        "import_aiohttp_seconds": {"median": statistics.median(baselines), "min": min(baselines), "max": max(baselines)},
    }
    result["ratio"] = result["readyz_seconds"]["median"] / result["import_aiohttp_seconds"]["median"]
    print(f"runs: {args.runs}, load average {result['load_average']:.1f}")
    print(f"/readyz green after spawn: median {result['readyz_seconds']['median']:.2f} s "
          f"(min {min(serves):.2f}, max {max(serves):.2f}); chain loaded in "
          f"{result['chain_load_seconds_median'] or float('nan'):.2f} s of it")
    print(f"baseline `import aiohttp.web`: median {result['import_aiohttp_seconds']['median']:.2f} s "
          f"(min {min(baselines):.2f}, max {max(baselines):.2f})")
    print(f"ratio: {result['ratio']:.1f}x the baseline")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
