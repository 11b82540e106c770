"""How long the README's second offline start takes: `./scripts/serve.sh` to a green `/readyz`,
and where the time goes.

Two measurements in one run:

* **the start as the README runs it**: `./scripts/serve.sh` (its own venv check included) with
  the certificates a first start left (here in a temporary `--cert-dir`, on a free `--port`),
  polled over TLS (verifying the CA) every 10 ms from the spawn to a green `/readyz`, then
  stopped with SIGTERM; the server's CPU seconds by then (`/proc`: the script execs it). Its log splits the time: spawn to "listening" (the script, the
  interpreter, the imports, TLS), "listening" to "admission chain loaded" (CRDs, policies,
  state), the rest (the first green `/readyz`). A first, uncounted start warms the page cache
  and `__pycache__` (and generates the certificates).
* **phase by phase**, the same steps replayed one after the other in a fresh process each run,
  CPU seconds and wall seconds of each: the interpreter (`python -c pass`), the script's venv
  check (`ensure_venv`), the imports the command needs, the CEL engine, the bundled CRDs,
  the shipped policies, of both Python's `compile()` (of the code generated for schemas, CEL
  programs and lookups), the example state, TLS (the certificate keeper's start on the
  directory). Python writes and reads `__pycache__` as in a user's shell
  (``PYTHONDONTWRITEBYTECODE`` is dropped from the environment).

Medians of ``--runs`` each, and the machine's load average (the wall figures are only
comparable at a like load; the CPU figures much less depend on it).

With ``--before DIR`` another checkout (its ``.venv`` set up by a first ``serve.sh``) is timed
the same way, run for run interleaved with this one, its code put first on ``PYTHONPATH``.

    python bench/serve_startup.py [--runs 7] [--before DIR] [--json out.json]
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
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = REPO / ".venv" / "bin" / "python"

PHASES = ("interpreter", "venv check", "imports", "CEL engine", "CRDs", "policies", "  compile() in both",
          "state", "TLS")
# as a user's shell runs it: Python writes and reads __pycache__ (a sandbox may turn that off)
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}

# The steps of `infergate serve` up to a loaded chain, each timed (CPU, wall): run in a fresh
# interpreter, prints one JSON object.
REPLAY = r"""
import builtins, json, sys, time
cpu, wall = time.process_time, time.perf_counter
out = {}
c, w = cpu(), wall()
import aiohttp.web, uvloop
import webhook.cli, webhook.server.command
from webhook.server import wiring
from webhook.server.settings import Settings
from webhook.server.metrics import Metrics
from webhook.cel import Evaluator
out["imports"] = (cpu() - c, wall() - w)
settings = Settings(cert_dir=sys.argv[1])
evaluator = Evaluator()
c, w = cpu(), wall()
evaluator.engine
out["CEL engine"] = (cpu() - c, wall() - w)
compiling = [0.0, 0.0]
python_compile = builtins.compile
def timed_compile(*args, **kwargs):
    c, w = cpu(), wall()
    try:
        return python_compile(*args, **kwargs)
    finally:
        compiling[0] += cpu() - c
        compiling[1] += wall() - w
builtins.compile = timed_compile
from webhook.schema import CRDRegistry
from webhook.policy import PolicyDirectory
from webhook.policy.typecheck import KindSchemas
from webhook import shipped_data
c, w = cpu(), wall()
registry = CRDRegistry.shipped(evaluator=evaluator)
out["CRDs"] = (cpu() - c, wall() - w)
compiled_for_crds = list(compiling)
c, w = cpu(), wall()
PolicyDirectory(shipped_data.policies_dir(), evaluator, schemas=KindSchemas(registry.crds))
out["policies"] = (cpu() - c, wall() - w)
builtins.compile = python_compile
out["  compile() in both"] = (compiling[0], compiling[1])
from webhook.state import FileState
c, w = cpu(), wall()
FileState(shipped_data.examples_dir())
out["state"] = (cpu() - c, wall() - w)
c, w = cpu(), wall()
keeper, _ = wiring.build_cert_keeper(settings, Metrics())
keeper.start()
out["TLS"] = (cpu() - c, wall() - w)
print(json.dumps(out))
"""


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


def _log_time(line: dict) -> float:
    return datetime.fromisoformat(line["ts"]).timestamp()


def _env(tree: Path) -> dict[str, str]:
    return {**ENV, "PYTHONPATH": str(tree)}


def start_once(tree: Path, cert_dir: Path) -> dict[str, float]:
    """`./scripts/serve.sh` from the spawn to a green /readyz, split by its log."""
    port = free_port()
    spawned_at, spawned = time.time(), time.perf_counter()
    proc = subprocess.Popen(["./scripts/serve.sh", "--host", "127.0.0.1", "--port", str(port),
                             "--cert-dir", str(cert_dir)],
                            cwd=tree, env=_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt")) if (cert_dir / "ca.crt").exists() else None
    try:
        while context is None or not ready(port, context):
            if proc.poll() is not None:
                raise SystemExit("serve.sh exited:\n" + proc.stderr.read().decode()[-3000:])
            if time.perf_counter() - spawned > 120:
                raise SystemExit("/readyz not green within 120 s")
            time.sleep(0.01)
            if context is None and (cert_dir / "ca.crt").exists():
                context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        total = time.perf_counter() - spawned
        cpu = _process_cpu(proc.pid)  # serve.sh execs the server: one process
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    listening = next((_log_time(x) for x in lines if x.get("msg") == "listening"), None)
    loaded = next((_log_time(x) for x in lines if x.get("msg") == "admission chain loaded"), None)
    if listening is None or loaded is None:
        raise SystemExit("serve.sh did not log 'listening' and 'admission chain loaded':\n" + err.decode()[-3000:])
    return {"ready": total, "cpu at ready": cpu, "to listening": listening - spawned_at,
            "chain": loaded - listening, "to first green readyz": total - (loaded - spawned_at)}


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phases_once(tree: Path, cert_dir: Path) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    began, cpu = time.perf_counter(), _children_cpu()
    subprocess.run([str(PYTHON), "-c", "pass"], env=_env(tree), check=True)
    out["interpreter"] = (_children_cpu() - cpu, time.perf_counter() - began)
    began, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(["bash", "-c", ". scripts/lib/venv.sh && ensure_venv"], cwd=tree, env=_env(tree), check=True)
    out["venv check"] = (_children_cpu() - cpu, time.perf_counter() - began)
    done = subprocess.run([str(PYTHON), "-c", REPLAY, str(cert_dir)], cwd=tree, env=_env(tree), check=True,
                          capture_output=True, text=True)
    out.update({name: tuple(value) for name, value in json.loads(done.stdout).items()})
    return out


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def summary(starts: list[dict[str, float]], phases: list[dict[str, tuple[float, float]]]) -> dict:
    return {
        "serve_sh": {part: round(statistics.median(s[part] for s in starts), 3) for part in starts[0]},
        "serve_sh_ready_min_max": [round(min(s["ready"] for s in starts), 3), round(max(s["ready"] for s in starts), 3)],
        "phases": {name: {"cpu": round(statistics.median(p[name][0] for p in phases), 3),
                          "wall": round(statistics.median(p[name][1] for p in phases), 3)} for name in PHASES},
    }


def show(label: str, figures: dict) -> None:
    ready = figures["serve_sh"]
    low, high = figures["serve_sh_ready_min_max"]
    print(f"{label}: ./scripts/serve.sh to a green /readyz (second start): median {ready['ready']:.2f} s "
          f"(min {low:.2f}, max {high:.2f}); the server's CPU by then {ready['cpu at ready']:.2f} s")
    print(f"  spawn to 'listening' {ready['to listening']:.2f} s, chain loaded {ready['chain']:.2f} s later, "
          f"first green /readyz {ready['to first green readyz']:.2f} s after that")
    print(f"  {'phase (replayed)':<22}{'cpu s':>8}{'wall s':>8}")
    for name, phase in figures["phases"].items():
        print(f"  {name:<22}{phase['cpu']:>8.3f}{phase['wall']:>8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another checkout to time the same way, interleaved")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if not PYTHON.exists():
        raise SystemExit("run ./scripts/serve.sh once first: it creates .venv/")
    trees = {"after": REPO} | ({"before": args.before.resolve()} if args.before else {})

    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp) / "certs"
        starts: dict[str, list] = {label: [] for label in trees}
        phases: dict[str, list] = {label: [] for label in trees}
        for tree in trees.values():
            start_once(tree, cert_dir)  # the first start: certificates generated, caches warm
        for _ in range(args.runs):
            for label, tree in trees.items():
                starts[label].append(start_once(tree, cert_dir))
                phases[label].append(phases_once(tree, cert_dir))

    result = {"runs": args.runs, "load_average": round(os.getloadavg()[0], 2)}
    result |= {label: summary(starts[label], phases[label]) for label in trees}
    if args.before:
        result["ready after/before"] = round(result["after"]["serve_sh"]["ready"] / result["before"]["serve_sh"]["ready"], 3)
    print(f"runs: {args.runs}, load average {result['load_average']:.1f}")
    for label in trees:
        show(label, result[label])
    if args.before:
        print(f"ready after/before: {result['ready after/before']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
