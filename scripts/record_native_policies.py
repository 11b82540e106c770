#!/usr/bin/env python3
"""Record what a real kube-apiserver v1.36 answers with ``infergate native-policies``' objects
installed and no webhook: ``tests/conformance/native-policies/recorded.yaml``.

Not run by CI (it needs the apiserver); ``tests/policy/test_native_recorded.py`` reads what it
wrote. Usage::

    KUBECONFIG=~/.cache/realk8s/kubeconfig .venv/bin/python scripts/record_native_policies.py [--kubectl PATH]

What it does, in order:

1. installs the CRDs the scenarios' kinds need (``chart/crds``, ``chart/files/crds/upstream``, and
   GIE's seed-era InferencePool/InferenceModel v1alpha1 (as the e2e suite installs them) from ``chart/files/crds/legacy``) unless a
   CRD of that name is already there (a shared cluster: it is used as it is, and recorded);
2. applies the generated objects (``kubectl apply --server-side``), each binding narrowed by an
   ``objectSelector`` on the label ``infergate.io/recorded-by: native-policies`` so no other
   object of the shared cluster is judged by them (the only change to the generated objects;
   every scenario object carries the label);
3. waits (with a deadline) for every ValidatingAdmissionPolicy's ``status.typeChecking`` and for
   the policies to be enforced, and records the type checking;
4. sends every scenario as a dry-run write (``?dryRun=All&fieldValidation=Strict``): the cases of
   the policy suites (``policies/tests``) and the example manifests (``examples/manifests``), in
   namespaces ``native-<namespace>``; an UPDATE creates its old object first and deletes it after;
5. sends them all a second time and stops if any answer differs (the policies were not all in force);
6. deletes the generated objects and its namespaces.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook.cel import Evaluator  # noqa: E402
from webhook.policy import load_directory  # noqa: E402
from webhook.policy.actions import parse_overrides  # noqa: E402
from webhook.policy.native_export import export, kind_resources  # noqa: E402
from webhook.schema.bundled import known_kinds  # noqa: E402
from webhook.shipped_data import policies_dir  # noqa: E402

OUT = REPO / "tests" / "conformance" / "native-policies" / "recorded.yaml"
LABEL = "infergate.io/recorded-by"
LABEL_VALUE = "native-policies"
MANAGER = "infergate-native-policies-recorder"
NAMESPACE_PREFIX = "native-"
# operators' overrides recorded in a second phase: a namespace-scoped one (two bindings, one per
# region) and one for every namespace, on the KubeAI Models' policies, in two namespaces
OVERRIDES = ["kubeai-model-engine=Warn,Audit@team=research", "kubeai-model-engine-matrix=Warn"]
OVERRIDE_NAMESPACES = {"research": {"team": "research"}, "elsewhere": {}}
LEGACY = ("inference.networking.x-k8s.io_inferencepools_v1alpha1-gie-v0.1.0.yaml",
          "inference.networking.x-k8s.io_inferencemodels_v1alpha1.yaml")


class Cluster:
    def __init__(self, kubeconfig: Path, kubectl: str) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        self.tmp = tempfile.TemporaryDirectory()
        ca, cert, key = (Path(self.tmp.name) / n for n in ("ca.crt", "tls.crt", "tls.key"))
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))
        self.kubeconfig, self.kubectl_path = kubeconfig, kubectl

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, list[str]]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", "Accept": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        warnings = [warning_text(v) for k, v in response.getheaders() if k.lower() == "warning"]
        conn.close()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:  # e.g. "404 page not found" for a group no CRD serves
            body = {"message": raw.decode(errors="replace").strip()}
        return response.status, body, warnings

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run([self.kubectl_path, "--kubeconfig", str(self.kubeconfig), *args],
                             input=stdin, capture_output=True, text=True, timeout=300)
        if check and out.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out


def warning_text(header: str) -> str:
    """The text of a ``Warning: 299 - "text"`` header (RFC 7234 quoted-string)."""
    _, _, rest = header.partition(" - ")
    rest = rest.strip()
    if rest.startswith('"') and rest.endswith('"'):
        rest = rest[1:-1]
        out, i = [], 0
        while i < len(rest):
            if rest[i] == "\\" and i + 1 < len(rest):
                i += 1
            out.append(rest[i])
            i += 1
        return "".join(out)
    return rest


def resources() -> dict[tuple[str, str], Any]:
    return {(k.group, k.kind): k for k in known_kinds()}


def path_of(obj: dict[str, Any], namespaced: bool, plural: str, name: str | None = None) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespaced:
        base += f"/namespaces/{obj['metadata']['namespace']}"
    base += f"/{plural}"
    return base + (f"/{name}" if name else "")


def scenarios() -> list[dict[str, Any]]:
    """``{source, name, operation, namespace, object, old}`` from the suites and the manifests."""
    out = []
    for suite_file in sorted((REPO / "policies" / "tests").glob("*.yaml")):
        suite = yaml.safe_load(suite_file.read_text())
        for case in suite.get("cases") or []:
            operation = case.get("operation") or ("UPDATE" if case.get("old") else "CREATE")
            if operation not in ("CREATE", "UPDATE") or case.get("subresource") or not case.get("object"):
                continue
            out.append({"source": f"policies/tests/{suite_file.name}", "name": case["name"], "operation": operation,
                        "namespace": case.get("namespace") or suite.get("namespace") or "default",
                        "object": case["object"], "old": case.get("old")})
    manifests = REPO / "examples" / "manifests"
    for folder in ("valid", "denied-by-webhook", "warned-by-webhook"):
        for file in sorted((manifests / folder).glob("*.yaml")):
            for i, doc in enumerate(d for d in yaml.safe_load_all(file.read_text()) if d):
                out.append({"source": f"examples/manifests/{folder}/{file.name}", "name": f"{file.stem}[{i}]",
                            "operation": "CREATE", "namespace": (doc.get("metadata") or {}).get("namespace") or "default",
                            "object": doc, "old": None})
    return out


def prepared(obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    obj = json.loads(json.dumps(obj))
    meta = obj.setdefault("metadata", {})
    meta.setdefault("labels", {})[LABEL] = LABEL_VALUE
    if namespace is not None:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return obj


def answer(status: int, body: Any, warnings: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status, "allowed": status < 300}
    if status >= 300 and isinstance(body, dict):
        out["reason"] = body.get("reason", "")
        out["message"] = body.get("message", "")
    if warnings:
        out["warnings"] = warnings
    if status < 300 and isinstance(body, dict):
        spec = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        out["object"] = spec
    return out


def send(cluster: Cluster, scenario: dict[str, Any], kinds: dict[tuple[str, str], Any]) -> dict[str, Any]:
    """The scenario as sent (``object``, ``old``: the old object as stored) and the answer."""
    obj = scenario["object"]
    group = obj["apiVersion"].rpartition("/")[0]
    kind = kinds.get((group, obj["kind"]))
    if kind is None:
        return {"skipped": f"no bundled CRD for {obj['apiVersion']} {obj['kind']}"}
    namespace = NAMESPACE_PREFIX + scenario["namespace"] if kind.namespaced else None
    body = prepared(obj, namespace)
    sent: dict[str, Any] = {"namespace": namespace, "object": body}
    query = "?dryRun=All&fieldValidation=Strict&fieldManager=" + MANAGER
    if scenario["operation"] == "CREATE":
        return {**sent, "answer": answer(*cluster.request("POST", path_of(body, kind.namespaced, kind.plural) + query, body))}
    old = prepared(scenario["old"], namespace)
    old["metadata"]["name"] = body["metadata"]["name"]
    status, stored, _ = cluster.request("POST", path_of(old, kind.namespaced, kind.plural), old)
    if status >= 300:
        return {"skipped": f"the old object was not created: {status} {stored.get('message') if stored else ''}"}
    try:
        body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
        path = path_of(body, kind.namespaced, kind.plural, body["metadata"]["name"]) + query
        result = answer(*cluster.request("PUT", path, body))
        body["metadata"].pop("resourceVersion")
        as_stored = {k: v for k, v in stored.items() if k not in ("metadata", "status")}
        return {**sent, "old": {**as_stored, "metadata": old["metadata"]}, "answer": result}
    finally:
        cluster.request("DELETE", path_of(old, kind.namespaced, kind.plural, old["metadata"]["name"]))


def wait_enforced(cluster: Cluster, kinds: dict[tuple[str, str], Any], deadline_seconds: float = 120) -> None:
    """Until a Model the VAP and the MAP of the KubeAI policies judge is denied and defaulted."""
    url = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "probe"},
           "spec": {"features": ["TextGeneration"], "url": "ollama://qwen2:0.5b", "engine": "OLlama",
                    "resourceProfile": "cpu:1"}}
    denied = {**url, "spec": {**url["spec"], "engine": "VLLM"}}
    deadline = time.monotonic() + deadline_seconds
    while True:
        a = send(cluster, {"operation": "CREATE", "namespace": "default", "object": denied}, kinds)["answer"]
        b = send(cluster, {"operation": "CREATE", "namespace": "default", "object": url}, kinds)["answer"]
        if not a["allowed"] and "ValidatingAdmissionPolicy" in a.get("message", "") and \
                b.get("object", {}).get("spec", {}).get("minReplicas") == 0:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the policies are not enforced after {deadline_seconds}s: {a} {b}")
        time.sleep(1)


def install_crds(cluster: Cluster) -> list[dict[str, Any]]:
    files = sorted((REPO / "chart" / "crds").glob("*.yaml"))
    upstream = REPO / "chart" / "files" / "crds" / "upstream"
    files += sorted(upstream.glob("*.yaml")) + sorted((upstream / "schema-only").glob("*.yaml"))
    files += [REPO / "chart" / "files" / "crds" / "legacy" / name for name in LEGACY]
    installed = []
    for file in files:
        for crd in (d for d in yaml.safe_load_all(file.read_text()) if d):
            name = crd["metadata"]["name"]
            present = cluster.kubectl("get", "crd", name, "-o", "json", check=False)
            if present.returncode == 0:
                there = json.loads(present.stdout)
                versions = [v["name"] for v in there["spec"]["versions"] if v.get("served")]
                mine = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
                installed.append({"name": name, "file": str(file.relative_to(REPO)) if versions == mine else None,
                                  "served": versions, "installed_by": "already present"})
                continue
            cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump(crd))
            installed.append({"name": name, "file": str(file.relative_to(REPO)),
                              "served": [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)],
                              "installed_by": "recorder"})
    for item in installed:
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{item['name']}", "--timeout=60s")
    return installed


def narrowed(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(objects))
    for o in out:
        if o["kind"].endswith("Binding"):
            match = o["spec"].setdefault("matchResources", {})
            match["objectSelector"] = {"matchLabels": {LABEL: LABEL_VALUE}}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubectl", default=os.path.expanduser("~/.cache/realk8s/venv/bin/kubectl"))
    parser.add_argument("--kubeconfig", type=Path,
                        default=Path(os.environ.get("KUBECONFIG", os.path.expanduser("~/.cache/realk8s/kubeconfig"))))
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig, args.kubectl)
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    print(f"kube-apiserver {version}", file=sys.stderr)

    policies = load_directory(policies_dir(), Evaluator())
    generated = export([p.definition for p in policies], kind_resources(known_kinds()))
    # the same without infergate's prediction of the apiserver's type check: its VAPs (unbound,
    # so they judge nothing) show which rules the apiserver warns of
    unchecked = [o for o in export([p.definition for p in policies], kind_resources(known_kinds()),
                                   type_check=False).objects if o["kind"] == "ValidatingAdmissionPolicy"]
    crds = install_crds(cluster)
    kinds = resources()

    applied = narrowed(generated.objects)
    for o in applied:
        present = cluster.kubectl("get", o["kind"].lower(), o["metadata"]["name"], "-o", "json", check=False)
        if present.returncode == 0:
            managers = {m.get("manager") for m in json.loads(present.stdout)["metadata"].get("managedFields", [])}
            if MANAGER not in managers:
                raise SystemExit(f"{o['kind']} {o['metadata']['name']} exists and is not the recorder's: stopping")
    namespaces = sorted({NAMESPACE_PREFIX + s["namespace"] for s in scenarios()} | {NAMESPACE_PREFIX + "default"})
    try:
        for ns in namespaces:
            cluster.kubectl("create", "namespace", ns, check=False)
        type_checking_unchecked: dict[str, Any] = {}
        accepted = []
        for vap in unchecked:
            out = cluster.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
                                  stdin=yaml.safe_dump(vap), check=False)
            if out.returncode != 0:
                type_checking_unchecked[vap["metadata"]["name"]] = {"rejected": out.stderr.strip()}
            else:
                accepted.append(vap)
        for name, checking in wait_type_checking(cluster, accepted).items():
            type_checking_unchecked[name] = {"typeChecking": checking}
        cluster.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
                        stdin=yaml.safe_dump_all(applied))
        type_checking = wait_type_checking(cluster, [o for o in applied if o["kind"] == "ValidatingAdmissionPolicy"])
        wait_enforced(cluster, kinds)
        first = [{"source": s["source"], "name": s["name"], "operation": s["operation"], **send(cluster, s, kinds)}
                 for s in scenarios()]
        second = [send(cluster, s, kinds) for s in scenarios()]
        for a, b in zip(first, second):
            if a.get("answer") != b.get("answer"):
                raise SystemExit(f"{a['source']} {a['name']}: two answers differ:\n{a.get('answer')}\n{b.get('answer')}")
        overridden = record_overrides(cluster, kinds, policies, applied, first, namespaces)
    finally:
        names = {(o["kind"], o["metadata"]["name"]) for o in applied}
        extra = [o for o in unchecked + overridden_objects if (o["kind"], o["metadata"]["name"]) not in names]
        cluster.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=yaml.safe_dump_all(applied + extra), check=False)
        for ns in namespaces:
            cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)

    recorded = {
        "about": {
            "recorded_from": f"kube-apiserver {version} (built from the Kubernetes tree vendored in openshift/microshift)",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "how": "scripts/record_native_policies.py: the generated objects applied with kubectl apply --server-side, "
                   f"bindings narrowed by objectSelector {LABEL}={LABEL_VALUE}; every scenario a dry-run write "
                   "(dryRun=All, fieldValidation=Strict) with that label, in namespace native-<namespace>; no webhook",
            "crds": crds,
        },
        "generated": generated.objects,
        "typeChecking": type_checking,
        # the VAPs exported without infergate's own type check (unbound): what the apiserver
        # refuses ({rejected: kubectl's error}) or warns of ({typeChecking: ...})
        "typeCheckingWithoutTheCheck": type_checking_unchecked,
        "cases": first,
        "overrides": overridden,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("# Recorded by scripts/record_native_policies.py; read by tests/policy/test_native_recorded.py\n"
                   + yaml.safe_dump(recorded, sort_keys=False, allow_unicode=True, width=1000))
    print(f"wrote {OUT.relative_to(REPO)}: {len(first)} scenarios", file=sys.stderr)
    return 0


overridden_objects: list[dict[str, Any]] = []  # what the override phase applied (deleted at the end)


def record_overrides(cluster: Cluster, kinds: dict[tuple[str, str], Any], policies: list[Any],
                     applied: list[dict[str, Any]], first: list[dict[str, Any]], namespaces: list[str]) -> dict[str, Any]:
    """The KubeAI Model scenarios again, with ``OVERRIDES``' bindings in place of the policies' own,
    in a namespace the namespace-scoped override selects and in one it does not."""
    generated = export([p.definition for p in policies], kind_resources(known_kinds()), parse_overrides(OVERRIDES)).objects
    changed = [o for o in narrowed(generated) if o not in applied]
    overridden_objects.extend(changed)
    for name, labels in OVERRIDE_NAMESPACES.items():
        namespace = NAMESPACE_PREFIX + name
        namespaces.append(namespace)
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}
        cluster.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-", stdin=yaml.safe_dump(manifest))
    cluster.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-", stdin=yaml.safe_dump_all(changed))
    models = [s for s in scenarios() if s["object"].get("kind") == "Model" and s["operation"] == "CREATE"]
    # in force when a Model each policy denied is admitted (with the warning) where the override says Warn
    probes = [(next(c for c in first if c.get("answer") and f"'infergate-{policy}'" in c["answer"].get("message", "")), ns)
              for policy, ns in (("kubeai-model-engine", "research"), ("kubeai-model-engine-matrix", "elsewhere"))]
    deadline = time.monotonic() + 120
    while not all(send(cluster, {**case, "namespace": ns}, kinds)["answer"]["allowed"] for case, ns in probes):
        if time.monotonic() > deadline:
            raise SystemExit("the overrides' bindings are not in force after 120s")
        time.sleep(1)
    cases = []
    for _ in range(2):
        cases.append([{"source": s["source"], "name": s["name"], "operation": s["operation"],
                       **send(cluster, {**s, "namespace": ns}, kinds)} for ns in OVERRIDE_NAMESPACES for s in models])
    if cases[0] != cases[1]:
        raise SystemExit("the override phase's two answers differ")
    namespace_objects = [{"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": NAMESPACE_PREFIX + n, "labels": {"kubernetes.io/metadata.name": NAMESPACE_PREFIX + n, **labels}}}
                         for n, labels in OVERRIDE_NAMESPACES.items()]
    return {"given": OVERRIDES, "namespaces": namespace_objects, "generated": generated, "cases": cases[0]}


def wait_type_checking(cluster: Cluster, vaps: list[dict[str, Any]], deadline_seconds: float = 120) -> dict[str, Any]:
    """Every VAP's ``status.typeChecking`` once the apiserver has written it."""
    deadline = time.monotonic() + deadline_seconds
    found: dict[str, Any] = {}
    while True:
        for vap in vaps:
            name = vap["metadata"]["name"]
            if name in found:
                continue
            status, body, _ = cluster.request(
                "GET", f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}")
            checked = (body or {}).get("status", {}) if status == 200 else {}
            if "typeChecking" in checked and (body["status"].get("observedGeneration") == body["metadata"]["generation"]):
                found[name] = checked["typeChecking"]
        if len(found) == len(vaps):
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"no status.typeChecking after {deadline_seconds}s: "
                             f"{sorted(v['metadata']['name'] for v in vaps if v['metadata']['name'] not in found)}")
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
