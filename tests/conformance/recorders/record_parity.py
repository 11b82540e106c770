"""Records ``tests/conformance/cases/parity-decoding.yaml`` from a real kube-apiserver.

Issue #33 (items 5 and 7): what the apiserver answers to bodies whose apiVersion is not the
request path's, to whole-valued floats in integer fields that a CEL rule reads inside a list
item, and to fields of the wrong JSON type. Each body is sent as JSON text exactly as shown in
the case (``8000.0`` stays a float on the wire), with ``?dryRun=All``; the answer's status,
Status, Warning headers and (when allowed) the stored object become the case's ``expect``.

Before sending anything it checks that the cluster's CRDs are the reference files the suite
names (their versions' schemas equal), and refuses to record otherwise.

Usage (a running apiserver, e.g. the one ``~/.cache/realk8s/start.sh`` starts)::

    python tests/conformance/recorders/record_parity.py --kubeconfig ~/.cache/realk8s/kubeconfig

It creates the namespace ``h5-parity`` when missing and writes nothing to the cluster but dry runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import yaml

CASES_DIR = Path(__file__).resolve().parents[1] / "cases"
REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "upstream"
OUT = CASES_DIR / "parity-decoding.yaml"
NAMESPACE = "h5-parity"
CRDS = {
    "inferencepools.inference.networking.k8s.io": "inference.networking.k8s.io_inferencepools_v1-gie-v1.6.0.yaml",
    "models.kubeai.org": "kubeai.org_models_v1-kubeai-main-2b0ab6e-2026-07-17.yaml",
}
MODELS = f"/apis/kubeai.org/v1/namespaces/{NAMESPACE}/models"
POOLS = f"/apis/inference.networking.k8s.io/v1/namespaces/{NAMESPACE}/inferencepools"


def pool(name: str, target_ports: list[Any], picker_port: Any = 9002) -> dict[str, Any]:
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": target_ports,
                     "endpointPickerRef": {"name": "epp", "port": {"number": picker_port}}}}


MODEL_SPEC = {"features": ["TextGeneration"], "url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM",
              "resourceProfile": "nvidia-gpu-l4:1"}

# (name, path, query, body, about)
CASES: list[tuple[str, str, str, dict[str, Any], str]] = [
    # -- 7a: the body's apiVersion is not the path's --------------------------------------------
    ("version-not-served-warns-every-unknown-field", MODELS, "",
     {"apiVersion": "kubeai.org/v1beta1", "kind": "Model",
      "metadata": {"name": "h5-v1", "namespace": NAMESPACE, "bogusMeta": 1},
      "spec": {**MODEL_SPEC, "bogus": True}, "extra": "x"},
     "a version the CRD does not serve has no schema: every field but apiVersion, kind and metadata is "
     "unknown; the 400 carries the warnings found while decoding"),
    ("version-not-served-warn", MODELS, "fieldValidation=Warn",
     {"apiVersion": "kubeai.org/v1beta1", "kind": "Model",
      "metadata": {"name": "h5-v1w", "namespace": NAMESPACE, "bogusMeta": 1},
      "spec": {**MODEL_SPEC, "bogus": True}, "extra": "x"}, "the same under fieldValidation=Warn"),
    ("version-not-served-strict", MODELS, "fieldValidation=Strict",
     {"apiVersion": "kubeai.org/v1beta1", "kind": "Model",
      "metadata": {"name": "h5-v1s", "namespace": NAMESPACE, "bogusMeta": 1},
      "spec": {**MODEL_SPEC, "bogus": True}, "extra": "x"},
     "under Strict (kubectl's default) the strict decoding error comes first, in the body's version"),
    ("version-not-served-ignore", MODELS, "fieldValidation=Ignore",
     {"apiVersion": "kubeai.org/v1beta1", "kind": "Model",
      "metadata": {"name": "h5-v1i", "namespace": NAMESPACE, "bogusMeta": 1},
      "spec": {**MODEL_SPEC, "bogus": True}, "extra": "x"}, "under Ignore: the 400 alone"),
    ("version-not-served-warnings-in-order", MODELS, "",
     {"zzz": 1, "apiVersion": "kubeai.org/v1beta1", "kind": "Model",
      "metadata": {"name": "h5-v2", "namespace": NAMESPACE, "zbogus": 1, "abogus": 2, "labels": {"a": "b"}},
      "spec": {"engine": "VLLM"}, "aaa": "x", "status": {}},
     "metadata's unknown fields first, then the object's, each sorted"),
    ("version-not-served-nothing-unknown", MODELS, "",
     {"apiVersion": "kubeai.org/v1beta1", "kind": "Model", "metadata": {"name": "h5-v3", "namespace": NAMESPACE}},
     "no field but apiVersion, kind and metadata: the 400 alone"),
    ("another-kind-is-not-pruned", MODELS, "",
     {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
      "metadata": {"name": "h5-v4", "namespace": NAMESPACE}, "spec": {"x": 1}},
     "a body of another kind is not pruned: its spec is no unknown field"),
    ("another-kind-metadata-still-decoded", MODELS, "",
     {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
      "metadata": {"name": "h5-v5", "namespace": NAMESPACE, "bogus": 1}, "spec": {"x": 1}},
     "its metadata is still decoded as ObjectMeta: metadata.bogus is unknown"),
    ("another-kind-metadata-strict", MODELS, "fieldValidation=Strict",
     {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
      "metadata": {"name": "h5-v5s", "namespace": NAMESPACE, "bogus": 1}, "spec": {"x": 1}},
     "under Strict: the strict decoding error, in the body's kind and version"),
    # -- 7b: whole-valued floats in integer fields that a rule reads in a list item ----------------
    ("float-port-read-by-a-list-rule", POOLS, "", pool("h5-p1", [{"number": 8000.0}]),
     "8000.0 passes the integer type, but the targetPorts rule reads it: invalid data"),
    ("float-port-in-a-later-item", POOLS, "", pool("h5-p2", [{"number": 8000}, {"number": 8001.0}]),
     "the second item's float fails the same rule"),
    ("float-port-no-rule-reads", POOLS, "", pool("h5-p3", [{"number": 8000}], 9002.0),
     "endpointPickerRef.port.number 9002.0: its rule reads has(self.port) only: admitted, stored as 9002"),
    # -- 5: fields of the wrong JSON type -----------------------------------------------------------
    ("spec-an-array", MODELS, "fieldValidation=Strict",
     {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "h5-s1", "namespace": NAMESPACE},
      "spec": [1, 2]}, "spec: [1,2]: the schema's type error, the scale subresource's accessor error, the marker"),
    ("fields-of-wrong-types", MODELS, "fieldValidation=Strict",
     {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "h5-s2", "namespace": NAMESPACE},
      "spec": {"features": "TextGeneration", "url": 5, "engine": "VLLM", "minReplicas": "zero"}},
     "three fields of the wrong type: one type error each, then the marker"),
]


def client(kubeconfig: str):
    from kubernetes import client as k8s, config

    cfg = k8s.Configuration()
    config.load_kube_config(kubeconfig, client_configuration=cfg)
    api = k8s.ApiClient(cfg)
    return cfg, api


def send(cfg, api, method: str, path: str, body: str | None) -> tuple[int, list[str], Any]:
    headers = {"Accept": "application/json", **cfg.api_key}
    if body is not None:
        headers["Content-Type"] = "application/json"
    response = api.rest_client.pool_manager.request(method, cfg.host + path, body=body, headers=headers)
    warnings = [_warning_text(w) for w in response.headers.getlist("Warning")]
    data = response.data.decode()
    return response.status, warnings, json.loads(data) if data.strip() else None


def _warning_text(header: str) -> str:
    """``299 - "text"`` -> text (RFC 7234 warn-text, a quoted string)."""
    code, _, rest = header.partition(" ")
    _agent, _, quoted = rest.partition(" ")
    return json.loads(quoted)


def check_crds(cfg, api) -> str:
    """Raise unless every CRD of ``CRDS`` is in the cluster as its reference file; the server's version."""
    for name, file in CRDS.items():
        status, _, live = send(cfg, api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", None)
        if status != 200:
            raise SystemExit(f"{name}: not installed ({status}); install {REFERENCE / file}")
        reference = next(d for d in yaml.safe_load_all((REFERENCE / file).read_text())
                         if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition")
        schemas = [(v["name"], v.get("schema")) for v in reference["spec"]["versions"]]
        if schemas != [(v["name"], v.get("schema")) for v in live["spec"]["versions"]]:
            raise SystemExit(f"{name}: the cluster's CRD is not {file}")
    status, _, version = send(cfg, api, "GET", "/version", None)
    return version["gitVersion"]


def reduced(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k in ("name", "namespace", "labels", "annotations")}
    return {**obj, "metadata": meta}


def record(kubeconfig: str) -> None:
    cfg, api = client(kubeconfig)
    server = check_crds(cfg, api)
    send(cfg, api, "POST", "/api/v1/namespaces", json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                              "metadata": {"name": NAMESPACE}}))
    cases = []
    for name, path, query, body, about in CASES:
        full = f"{path}?dryRun=All" + (f"&{query}" if query else "")
        status, warnings, answer = send(cfg, api, "POST", full, json.dumps(body))
        expect: dict[str, Any] = {"allowed": 200 <= status < 300, "code": status}
        if status >= 300:
            causes = ((answer or {}).get("details") or {}).get("causes") or []
            errors = [f"{c.get('field')}: {c.get('message')}" for c in causes if c.get("field") is not None]
            if errors:
                expect["errors"] = errors
            expect["message"] = (answer or {}).get("message")
        if warnings:
            expect["warnings"] = warnings
        if 200 <= status < 300:
            expect["stored"] = reduced(answer)
        request = f"POST {path}" + (f"?{query}" if query else "")
        notes: dict[str, Any] = {"request": request, "note": about}
        if status >= 300 and any(send(cfg, api, "POST", full, json.dumps(body))[2].get("message") != expect["message"]
                                 for _ in range(4)):
            notes["order_varies"] = True  # the apiserver's error order changed between identical requests
        cases.append({"name": name, "operation": "CREATE", "object": body, "expect": expect, "about": notes})
    today = datetime.date.today().isoformat()
    header = (f"# Recorded from a real kube-apiserver {server} on {today} by tests/conformance/recorders/record_parity.py\n"
              "# (no admission webhooks; CRDs as the reference files below, checked before recording). Each body was\n"
              "# sent as the JSON of `object` (floats such as 8000.0 stay floats on the wire) with ?dryRun=All and the\n"
              "# query of about.request (none: the server default, Warn). Issue #33, items 5 and 7.\n"
              "# expect.errors: the Status causes, '<field>: <detail>'; expect.warnings: the Warning headers' texts, in order.\n")
    suite = {"suite": f"decoding parity (kube-apiserver {server})",
             "crds": [f"../reference/upstream/{file}" for file in CRDS.values()], "cases": cases}
    OUT.write_text(header + yaml.dump(suite, Dumper=_NoAliases, sort_keys=False, allow_unicode=True, width=120))
    print(f"wrote {OUT} ({len(cases)} cases)")


class _NoAliases(yaml.SafeDumper):
    """Each case written out whole: no ``&id`` anchors where bodies share a list."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    record(parser.parse_args().kubeconfig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
