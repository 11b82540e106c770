"""The watch cache at cluster scale: memory and time to Ready of ``infergate serve --kube-state``
(and of ``infergate controller``) on a real apiserver holding many Pods, Secrets and Services,
against a plain paginated client listing the same objects, in one run.

    python bench/state_scale.py run --kubeconfig K --pods 20000 --secrets 5000 --services 2000 \
        [--baseline-tree DIR] [--record pods.jsonl]
    python bench/state_scale.py replay --stream pods.jsonl --copies 5 [--baseline-tree DIR]
    python bench/state_scale.py cleanup --kubeconfig K

``run``: measures both commands on the cluster as it is (the "empty" figures), creates the objects
(in namespaces ``h9-scale-*``, by parallel creates of model-server Pods as a Deployment makes them;
without nodes they stay Pending), measures again, and deletes them. ``--baseline-tree`` names a
checkout of an earlier infergate to measure in the same run (its ``webhook`` package, this venv).
``--record`` keeps the Pods' streamed watch as the apiserver sent it, for ``replay``: a local
server answering the watch cache's requests with that stream repeated ``--copies`` times (names
made unique), for a cluster larger than the machine can hold in etcd.

Figures: RSS (VmRSS of the process, after Ready and a settle; VmHWM its peak), seconds from the
process's start to ``/readyz`` answering 200, and the plain client's seconds to list every Pod,
Secret and Service in pages of 500 (each page parsed, nothing kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "h9-scale-"
NAMESPACES = 20
PAGE = 500


# -- the cluster --------------------------------------------------------------------------------

class Api:
    """The apiserver of a kubeconfig, as plain HTTPS (the bench's own client, not infergate's)."""

    def __init__(self, kubeconfig: str):
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        self.host = configuration.host
        self.context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.cert_file:
            self.context.load_cert_chain(configuration.cert_file, configuration.key_file)
        self.headers = {"Authorization": configuration.api_key["authorization"]} \
            if "authorization" in configuration.api_key else {}

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(self.host + path, headers=self.headers)
        with urllib.request.urlopen(request, context=self.context, timeout=120) as resp:
            return resp.read()

    async def create_all(self, posts: list[tuple[str, dict]], concurrency: int = 48) -> None:
        import aiohttp

        queue: asyncio.Queue = asyncio.Queue()
        for post in posts:
            queue.put_nowait(post)
        connector = aiohttp.TCPConnector(ssl=self.context, limit=concurrency)
        async with aiohttp.ClientSession(connector=connector, headers=self.headers) as session:
            async def worker():
                while not queue.empty():
                    path, body = queue.get_nowait()
                    for _ in range(5):
                        async with session.post(self.host + path, data=orjson.dumps(body),
                                                headers={"Content-Type": "application/json"}) as resp:
                            if resp.status in (201, 409):
                                break
                            text = await resp.text()
                            if resp.status != 429 and resp.status < 500:
                                raise RuntimeError(f"POST {path}: {resp.status} {text[:200]}")
                        await asyncio.sleep(0.2)

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    def delete_namespaces(self) -> None:
        import urllib.error

        names = [ns["metadata"]["name"] for ns in orjson.loads(self.get("/api/v1/namespaces"))["items"]
                 if ns["metadata"]["name"].startswith(PREFIX)]
        for name in names:
            request = urllib.request.Request(f"{self.host}/api/v1/namespaces/{name}", method="DELETE",
                                             headers=self.headers)
            try:
                urllib.request.urlopen(request, context=self.context, timeout=60).read()
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            left = [ns for ns in orjson.loads(self.get("/api/v1/namespaces"))["items"]
                    if ns["metadata"]["name"].startswith(PREFIX)]
            if not left:
                return
            time.sleep(2)
        raise RuntimeError(f"namespaces not deleted in 10 minutes: {[n['metadata']['name'] for n in left]}")


def model_server_pod(namespace: str, i: int) -> dict:
    """A Pod as a model-server Deployment's ReplicaSet creates it (what the apiserver adds on
    create, defaults and managedFields, it adds)."""
    workload = f"vllm-{i % 20}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{workload}-5d8f7c9b4-{i:05d}", "namespace": namespace,
                     "labels": {"app": workload, "pod-template-hash": "5d8f7c9b4", "model": f"qwen3-{i % 7}"},
                     "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T09:00:00Z"}},
        "spec": {
            "containers": [{
                "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                "args": ["--model=/model", f"--served-model-name=qwen3-{i % 7}", "--max-model-len=16384",
                         "--gpu-memory-utilization=0.9", "--enable-prefix-caching"],
                "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(12)]
                + [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
                "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "6", "memory": "24Gi"}, "limits": {"memory": "24Gi"}},
                "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5},
                "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 600},
                "volumeMounts": [{"name": "model", "mountPath": "/model"}, {"name": "dshm", "mountPath": "/dev/shm"}],
            }, {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "ports": [{"containerPort": 9901}]}],
            "volumes": [{"name": "model", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory"}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def objects(pods: int, secrets: int, services: int) -> list[tuple[str, dict]]:
    posts: list[tuple[str, dict]] = []
    for kind, count in (("pods", pods), ("secrets", secrets), ("services", services)):
        for i in range(count):
            namespace = f"{PREFIX}{i % NAMESPACES}"
            if kind == "pods":
                body = model_server_pod(namespace, i // NAMESPACES)
            elif kind == "secrets":
                body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"token-{i:05d}"},
                        "type": "Opaque", "data": {"token": "aGYtMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDA="}}
            else:
                body = {"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": f"vllm-{i:05d}", "labels": {"app": f"vllm-{i % 20}"}},
                        "spec": {"selector": {"app": f"vllm-{i % 20}"},
                                 "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}}
            posts.append((f"/api/v1/namespaces/{namespace}/{kind}", body))
    return posts


def populate(api: Api, pods: int, secrets: int, services: int) -> float:
    began = time.perf_counter()
    namespaces = [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{PREFIX}{n}"}})
                  for n in range(NAMESPACES)]
    asyncio.run(api.create_all(namespaces))
    asyncio.run(api.create_all(objects(pods, secrets, services)))
    return time.perf_counter() - began


def plain_list(api: Api, plurals=("pods", "secrets", "services")) -> tuple[float, int]:
    """A plain paginated client: every page read and parsed, nothing kept."""
    began = time.perf_counter()
    count = 0
    for plural in plurals:
        token = ""
        while True:
            query = f"?limit={PAGE}" + (f"&continue={token}" if token else "")
            body = orjson.loads(api.get(f"/api/v1/{plural}{query}"))
            count += len(body["items"])
            token = body["metadata"].get("continue") or ""
            if not token:
                break
    return time.perf_counter() - began, count


def record_stream(api: Api, path: Path) -> int:
    """The Pods' streamed watch (sendInitialEvents) as the apiserver sends it, to its end bookmark."""
    request = urllib.request.Request(
        api.host + "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=60", headers=api.headers)
    events = 0
    with urllib.request.urlopen(request, context=api.context, timeout=120) as resp, path.open("wb") as out:
        for line in resp:
            event = orjson.loads(line)
            if event["type"] == "BOOKMARK":
                if (event["object"]["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end") == "true":
                    break
                continue
            if (event["object"]["metadata"].get("namespace") or "").startswith(PREFIX):
                out.write(line.rstrip(b"\n") + b"\n")
                events += 1
    return events


# -- the processes measured ---------------------------------------------------------------------

def _rss(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def _env(tree: Path | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree or ROOT)
    return env


def measure_serve(kubeconfig: str, tree: Path | None = None, settle: float = 3.0, timeout: float = 600) -> dict:
    """Start ``infergate serve --kube-state``; seconds to /readyz 200, RSS after a settle."""
    with tempfile.TemporaryDirectory(prefix="h9-bench-") as tmp:
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "serve", "--kube-state", "--kubeconfig", kubeconfig, "--host", "127.0.0.1",
             "--port", "0", "--cert-dir", tmp, "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(tree), cwd=tmp, text=True)
        try:
            port = None
            while port is None:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("serve exited before listening")
                if line.startswith("infergate serving https://"):
                    port = int(line.split()[2].rsplit(":", 1)[1])
            context = ssl.create_default_context(cafile=f"{tmp}/ca.crt")
            context.check_hostname = False
            return _ready_then_memory(proc, f"https://127.0.0.1:{port}/readyz", began, timeout, settle, context)
        finally:
            proc.terminate()
            proc.wait(30)


def _ready_then_memory(proc: subprocess.Popen, readyz: str, began: float, timeout: float, settle: float,
                       context: ssl.SSLContext | None = None) -> dict:
    """Seconds from ``began`` to ``readyz`` answering 200 (polled: the figure's resolution is the
    50 ms step), then RSS and peak after ``settle`` seconds."""
    ready = None
    while time.perf_counter() - began < timeout:
        try:
            with urllib.request.urlopen(readyz, context=context, timeout=5) as resp:
                if resp.status == 200:
                    ready = time.perf_counter() - began
                    break
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[3]} exited before it was Ready")
        time.sleep(0.05)
    if ready is None:
        raise RuntimeError(f"{proc.args[3]} not Ready in time")
    time.sleep(settle)
    rss, peak = _rss(proc.pid)
    return {"ready_s": round(ready, 2), "rss_mib": round(rss / 2**20, 1), "peak_mib": round(peak / 2**20, 1)}


def measure_controller(kubeconfig: str, tree: Path | None = None, settle: float = 3.0, timeout: float = 600) -> dict:
    """Start ``infergate controller`` (audit on, every status write on); seconds to /readyz 200
    (its watch cache synced), RSS after a settle."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    writes = ["models.kubeai.org=on"]
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "controller", "--kubeconfig", kubeconfig, "--metrics-port", str(port),
         "--log-level", "warning", *[a for w in writes for a in ("--status-writes", w)]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tree))
    try:
        return _ready_then_memory(proc, f"http://127.0.0.1:{port}/readyz", began, timeout, settle)
    finally:
        proc.terminate()
        proc.wait(30)


def repeated(measure, reps: int, *args) -> dict:
    """``reps`` runs: the fastest Ready (the machine's other load only adds to it), the largest
    RSS and peak (the conservative side)."""
    runs = [measure(*args) for _ in range(reps)]
    return {"ready_s": min(r["ready_s"] for r in runs), "rss_mib": max(r["rss_mib"] for r in runs),
            "peak_mib": max(r["peak_mib"] for r in runs), "runs": reps}


def measure_controller_retried(kubeconfig: str, tree: Path | None = None) -> dict:
    """(A start that exits, e.g. on a metrics port taken meanwhile, is started again once.)"""
    try:
        return measure_controller(kubeconfig, tree)
    except RuntimeError:
        return measure_controller(kubeconfig, tree)


def measure_all(kubeconfig: str, baseline: Path | None, controller: bool, reps: int = 1,
                tree: Path | None = None, serve: bool = True) -> dict:
    out = {}
    if serve:
        out["serve"] = repeated(measure_serve, reps, kubeconfig, tree)
    if baseline and serve:
        out["serve_baseline"] = repeated(measure_serve, reps, kubeconfig, baseline)
    if controller:
        out["controller"] = repeated(measure_controller_retried, reps, kubeconfig, tree)
        if baseline:
            out["controller_baseline"] = repeated(measure_controller_retried, reps, kubeconfig, baseline)
    return out


def run(args) -> dict:
    api = Api(args.kubeconfig)
    api.delete_namespaces()
    result: dict = {"pods": args.pods, "secrets": args.secrets, "services": args.services}
    result["empty"] = measure_all(args.kubeconfig, args.baseline_tree, args.controller, args.reps, args.tree,
                                  not args.no_serve)
    seconds, count = min(plain_list(api) for _ in range(3))
    result["empty"]["plain_list"] = {"seconds": round(seconds, 2), "objects": count}
    result["populate_s"] = round(populate(api, args.pods, args.secrets, args.services), 1)
    try:
        result["full"] = measure_all(args.kubeconfig, args.baseline_tree, args.controller, args.reps, args.tree,
                                     not args.no_serve)
        seconds, count = min(plain_list(api) for _ in range(3))
        result["full"]["plain_list"] = {"seconds": round(seconds, 2), "objects": count}
        # the machine's other load moves both: a plain list, then a start of serve, in pairs
        pairs = []
        for _ in range(0 if args.no_serve else args.reps):
            plain = plain_list(api)[0]
            ready = measure_serve(args.kubeconfig, args.tree)["ready_s"]
            pairs.append({"plain_s": round(plain, 2), "ready_s": ready,
                          "extra_over_plain": round((ready - result["empty"]["serve"]["ready_s"]) / plain, 2)})
        result["full"]["pairs"] = pairs
        if args.record:
            result["recorded_events"] = record_stream(api, Path(args.record))
    finally:
        if not args.keep:
            api.delete_namespaces()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--kubeconfig", required=True)
    r.add_argument("--pods", type=int, default=20000)
    r.add_argument("--secrets", type=int, default=5000)
    r.add_argument("--services", type=int, default=2000)
    r.add_argument("--baseline-tree", type=Path)
    r.add_argument("--tree", type=Path, help="the checkout measured (default: this one)")
    r.add_argument("--controller", action="store_true")
    r.add_argument("--record")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--no-serve", action="store_true", help="measure the controller alone")
    r.add_argument("--keep", action="store_true", help="leave the objects in the cluster")
    c = sub.add_parser("cleanup")
    c.add_argument("--kubeconfig", required=True)
    p = sub.add_parser("replay")
    p.add_argument("--stream", required=True)
    p.add_argument("--copies", type=int, default=5)
    p.add_argument("--baseline-tree", type=Path)
    p.add_argument("--tree", type=Path)
    p.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    if args.command == "cleanup":
        Api(args.kubeconfig).delete_namespaces()
        return
    if args.command == "replay":
        from _replay_apiserver import replay  # (bench/ is the script's directory)

        print(json.dumps(replay(Path(args.stream), args.copies, args.baseline_tree, measure_serve, args.reps, args.tree),
                         indent=2))
        return
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
