"""Memory of the cluster state's Pods: the watch cache keeps each Pod as a compact record of what
policies and reconcilers read (``webhook.state.pods``: ``trim_pod``'s fields, the parts Pods share
interned); the baseline, in the same run, is the same Pods kept whole, as a plain informer would.

    python bench/state_pods.py [--pods 20000]

The Pods are typical of a model-serving namespace (a server with args, env, probes, volumes, a
sidecar, managedFields, container statuses). The figure is tracemalloc's: the Python objects
the store holds after the list, the JSON text parsed as the watch cache parses it.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, as the other benches

from webhook.state.base import ObjectStore  # noqa: E402


def pod(i: int) -> dict:
    name = f"vllm-qwen3-{i}"
    container = {
        "name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "imagePullPolicy": "IfNotPresent",
        "args": ["--model=/model", f"--served-model-name=qwen3-{i % 7}", "--max-model-len=16384",
                 "--gpu-memory-utilization=0.9", "--enable-prefix-caching"],
        "env": [{"name": f"VAR_{k}", "value": f"value-{k}-{i}"} for k in range(12)]
        + [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"},
                      "limits": {"nvidia.com/gpu": "1"}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5},
        "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 600},
        "volumeMounts": [{"name": "model", "mountPath": "/model"}, {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": f"kube-api-access-{i}", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ml-team", "uid": f"6f1c{i:08d}-0000-4000-8000-000000000000",
            "resourceVersion": str(100000 + i), "creationTimestamp": "2026-11-01T09:00:00Z",
            "labels": {"app": "vllm-qwen3", "pod-template-hash": "5d8f7c9b4", "model": f"qwen3-{i % 7}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T09:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-qwen3-5d8f7c9b4",
                                 "uid": "aa", "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-01T09:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in range(6)}},
                                            "f:spec": {f"f:{k}": {} for k in range(20)}}},
                              {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                               "time": "2026-11-01T09:01:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:status": {f"f:{k}": {} for k in range(12)}}}],
        },
        "spec": {
            "containers": [container, {"name": "proxy", "image": "envoyproxy/envoy:v1.31",
                                       "ports": [{"containerPort": 9901}]}],
            "volumes": [{"name": "model", "persistentVolumeClaim": {"claimName": "models"}},
                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": f"kube-api-access-{i}", "projected": {"sources": [
                            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "nodeName": f"gpu-node-{i % 50}", "serviceAccountName": "default", "restartPolicy": "Always",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "phase": "Running", "podIP": f"10.0.{i // 250}.{i % 250}", "hostIP": "10.1.0.1",
            "startTime": "2026-11-01T09:00:00Z", "qosClass": "Burstable",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-11-01T09:01:00Z"}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
            "containerStatuses": [{"name": c, "ready": True, "restartCount": 0, "started": True,
                                   "image": "vllm/vllm-openai:v0.11.0", "imageID": "docker.io/vllm@sha256:" + "0" * 64,
                                   "containerID": "containerd://" + "1" * 64,
                                   "state": {"running": {"startedAt": "2026-11-01T09:00:30Z"}}}
                                  for c in ("vllm", "proxy")],
        },
    }


def held(lines: list[bytes], store) -> int:
    """Bytes ``store(objects)`` holds after storing every Pod parsed from ``lines``."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = store(orjson.loads(line) for line in lines)
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    return size


def state_store(objects) -> ObjectStore:
    store = ObjectStore()  # trims each Pod as it is stored
    store.replace("", "Pod", objects)
    assert "env" not in store.list("", "Pod", None)[0]["spec"]["containers"][0]
    return store


def informer_store(objects) -> dict:
    """The baseline: every Pod kept as it arrived, by namespace and name."""
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20000)
    args = parser.parse_args()
    lines = [orjson.dumps(pod(i)) for i in range(args.pods)]
    whole = held(lines, informer_store)
    trimmed = held(lines, state_store)
    print(json.dumps({
        "pods": args.pods,
        "wire_bytes_per_pod": round(sum(map(len, lines)) / args.pods),
        "whole_bytes_per_pod": round(whole / args.pods),
        "kept_bytes_per_pod": round(trimmed / args.pods),
        "ratio_whole_to_kept": round(whole / trimmed, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
