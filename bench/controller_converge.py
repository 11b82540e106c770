"""Controller at scale: 10,000 InferenceServices over 100 classes and 1,000 DeviceClasses.

    python bench/controller_converge.py [--orders 10000] [--classes 100] [--device-classes 1000]
        [--pods 20000 --pools 200]

``--pods``/``--pools``: model-server Pods (in 20 namespaces, 20 workloads each) and InferencePools
(v1alpha1, whose Ready condition the controller writes) selecting one workload's Pods each: the
resync then reads the Pods as the watch cache keeps them (compact records, dicts when read).

Measured in one run, as ratios against a baseline:

* baseline: the pure reconcilers over every object once (what ``infergate reconcile`` does);
* converge: the runner from a cold start (inventory, change feed, work queue, worker
  threads, status writes) until the queue is idle — every object written once;
* steady state: a full resync of everything — must write nothing;
* peak memory (RSS) against the memory of the cluster view alone.

Status writes go to an in-process API (the runner's real write path minus HTTP), so the
figure is the controller's own cost, not the network's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webhook.cel import Evaluator  # noqa: E402
from webhook.controller.context import ReconcileContext, build_inventory  # noqa: E402
from webhook.offline.reconcile import owned_objects, reconcile_all  # noqa: E402
from webhook.controller.runner import Controller, RunnerConfig  # noqa: E402
from webhook.state.memory import MemoryState  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
PRODUCTS = 50
NODES_PER_PRODUCT = 5
DEVICES_PER_NODE = 4


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def generate(orders: int, classes: int, device_classes: int) -> list[dict]:
    objects: list[dict] = []
    variants = max(1, device_classes // PRODUCTS)
    # devices: PRODUCTS products, each on NODES_PER_PRODUCT nodes with DEVICES_PER_NODE GPUs
    for p in range(PRODUCTS):
        memory = 16 + (p % 8) * 8  # 16..72 GiB
        for n in range(NODES_PER_PRODUCT):
            node = f"node-{p}-{n}"
            objects.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
                "spec": {"driver": "gpu.deckhouse.io", "nodeName": node, "pool": {"name": node},
                         "devices": [{"name": f"gpu-{d}", "attributes": {
                             "device": {"string": f"product-{p}"}, "deviceType": {"string": "Physical"}},
                             "capacity": {"memory": {"value": f"{memory}Gi"}}} for d in range(DEVICES_PER_NODE)]},
            })
    names = []
    for p in range(PRODUCTS):
        for v in range(variants):
            name = f"dc-{p}-{v}"
            names.append(name)
            spec = {"selectors": [{"cel": {"expression":
                    f"device.driver == 'gpu.deckhouse.io' && device.attributes['gpu.deckhouse.io'].device == 'product-{p}'"
                    f" && device.attributes['gpu.deckhouse.io'].deviceType == 'Physical'"}}]}
            if v % 2:
                spec["config"] = [{"opaque": {"driver": "gpu.deckhouse.io", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}]
            objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})
    objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "inference"}, "value": 100})
    for m in range(100):
        objects.append({"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "ClusterModel", "metadata": {"name": f"model-{m}"},
                        "status": {"phase": "Ready", "resolved": {
                            "format": "Safetensors", "parameterCount": (1 + m % 30) * 1_000_000_000,
                            "quantization": ["bf16", "int8", "awq"][m % 3],
                            "supportedEndpointTypes": ["Chat", "Embeddings"], "supportedFeatures": ["ToolCalling"]}}})
    for c in range(classes):
        allowed = [names[(c * 10 + i) % len(names)] for i in range(10)]
        objects.append({"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceServiceClass",
                        "metadata": {"name": f"class-{c}", "generation": 1, "resourceVersion": "1"},
                        "spec": {"acceleratorPolicy": {"allowedDeviceClasses": allowed,
                                                       "allowedPlacementTypes": ["WholeDevice"],
                                                       "allowedSharingModes": ["Shared", "Dedicated"],
                                                       "maxAcceleratorCount": 1 + c % 4,
                                                       "minSharePercent": 10, "maxSharePercent": 100},
                                 "exposurePolicy": {"type": "ClusterLocal", "authentication": "None"},
                                 "modelPolicy": {"allowedEndpointTypes": ["Chat"], "maxParameterCount": "70B"},
                                 "scalingPolicy": {"minReplicas": 1, "maxReplicas": 3, "allowedPriorityClassNames": ["inference"]}}})
    for i in range(orders):
        objects.append({"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "InferenceService",
                        "metadata": {"name": f"order-{i}", "namespace": f"team-{i % 50}", "generation": 1,
                                     "resourceVersion": "1"},
                        "spec": {"inferenceServiceClassName": f"class-{i % classes}",
                                 "launchStrategy": ["Latency", "Balance", "Throughput"][i % 3],
                                 "model": {"src": "ai-models", "ref": {"kind": "ClusterModel", "name": f"model-{i % 100}"}}}})
    return objects


def pods_and_pools(pods: int, pools: int) -> list[dict]:
    objects: list[dict] = []
    for i in range(pods):
        workload = f"vllm-{(i // 20) % 20}"
        objects.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{workload}-{i:05d}", "namespace": f"team-{i % 20}", "uid": f"u-{i}",
                         "resourceVersion": str(10 + i), "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"app": workload, "pod-template-hash": "5d8f7c9b4"}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm", "ports": [{"containerPort": 8000}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ["True", "False"][i % 5 == 0]}]},
        })
    for p in range(pools):
        objects.append({"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferencePool",
                        "metadata": {"name": f"pool-{p}", "namespace": f"team-{p % 20}", "generation": 1,
                                     "resourceVersion": "1"},
                        "spec": {"selector": {"app": f"vllm-{(p // 20) % 20}"}, "targetPortNumber": 8000,
                                 "extensionRef": {"name": "epp"}}})
    return objects


class InProcessApi:
    """The KubeApi surface the runner uses, against the in-memory view (no HTTP)."""

    def __init__(self, view: MemoryState):
        self.view, self.writes, self.version = view, 0, 1000

    def apply_status(self, kind, obj, status):
        """The runner's server-side apply of its status fields; no other writer here, so the
        status becomes what it applies."""
        self.version += 1
        # through JSON, as a write over the wire would be
        updated = {**obj, "status": orjson.loads(orjson.dumps(status)),
                   "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.view.put(updated)
        self.writes += 1
        return updated

    def get(self, kind, name, namespace=None):
        return self.view.get(kind.api_version, kind.kind, name, namespace)


async def measure(controller: Controller, api: InProcessApi) -> dict:
    """Cold start until idle, then one full resync until idle; times and writes of each."""
    stop = asyncio.Event()
    started, cpu = time.perf_counter(), time.process_time()
    task = asyncio.create_task(controller.run(stop))
    await asyncio.wait_for(controller.idle.wait(), 3600)
    figures = {"converge_s": time.perf_counter() - started, "converge_cpu": time.process_time() - cpu,
               "converge_writes": api.writes}
    reconciles = controller.reconciles
    started, cpu = time.perf_counter(), time.process_time()
    controller.enqueue_all()
    await asyncio.wait_for(controller.idle.wait(), 3600)
    figures["steady_s"] = time.perf_counter() - started
    figures["steady_cpu"] = time.process_time() - cpu
    figures["steady_writes"] = api.writes - figures["converge_writes"]
    figures["steady_reconciles"] = controller.reconciles - reconciles
    stop.set()
    await task
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--device-classes", type=int, default=1_000)
    parser.add_argument("--pods", type=int, default=0)
    parser.add_argument("--pools", type=int, default=0)
    args = parser.parse_args()

    rss_start = rss_mib()
    view = MemoryState(generate(args.orders, args.classes, args.device_classes)
                       + pods_and_pools(args.pods, args.pools))
    gc.collect()
    rss_view = rss_mib()

    started, cpu_started = time.perf_counter(), time.process_time()
    evaluator = Evaluator()
    inventory = build_inventory(view, evaluator)
    inventory_s = time.perf_counter() - started
    ctx = ReconcileContext(state=view, now=NOW, inventory_source=lambda: inventory, evaluator=evaluator)
    results = reconcile_all(owned_objects(view), ctx)
    baseline_s = time.perf_counter() - started  # inventory + every reconcile, no I/O
    planned = sum(1 for r in results if r["kind"] == "InferenceService" and "resolved" in r["status"]
                  and r["status"]["resolved"].get("deviceClass"))
    baseline_cpu = time.process_time() - cpu_started
    del results, ctx, inventory
    gc.collect()

    api = InProcessApi(view)
    figures = asyncio.run(measure(Controller(view, api, evaluator=evaluator, config=RunnerConfig(workers=4)), api))
    converge_s, steady_s = figures["converge_s"], figures["steady_s"]
    converge_writes, steady_writes = figures["converge_writes"], figures["steady_writes"]
    rss_peak = rss_mib()

    owned = sum(1 for _ in owned_objects(view))
    status_mib = sum(len(orjson.dumps(o.get("status"))) for o in owned_objects(view)) / 2**20
    print(f"objects: {args.orders} InferenceServices, {args.classes} classes, {args.device_classes} DeviceClasses, "
          f"{PRODUCTS * NODES_PER_PRODUCT * DEVICES_PER_NODE} devices, {args.pods} Pods, {args.pools} pools; "
          f"{planned} orders planned")
    print(f"inventory (CEL selectors x device profiles): {inventory_s:.2f} s")
    print("                       wall s   CPU s   CPU ratio")
    print(f"baseline (inventory + pure reconcile of {owned} objects)")
    print(f"                      {baseline_s:7.2f} {baseline_cpu:7.2f}   1.00x")
    print(f"converge (runner, cold start; {converge_writes} status writes)")
    print(f"                      {converge_s:7.2f} {figures['converge_cpu']:7.2f}   {figures['converge_cpu'] / baseline_cpu:.2f}x")
    print(f"steady   (full resync, {figures['steady_reconciles']} reconciles; {steady_writes} status writes)")
    print(f"                      {steady_s:7.2f} {figures['steady_cpu']:7.2f}   {figures['steady_cpu'] / baseline_cpu:.2f}x")
    print(f"memory   peak RSS {rss_peak:.0f} MiB: the process before loading {rss_start:.0f} MiB, the view "
          f"(no status) {rss_view - rss_start:.0f} MiB; the statuses written are {status_mib:.1f} MiB as JSON")
    if steady_writes:
        print("FAIL: status writes at steady state", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
