"""Record what a real kube-apiserver answers to the native-policy cases (not run by the tests).

Each file of ``tests/policy/native/cases/`` names ValidatingAdmissionPolicies,
MutatingAdmissionPolicies and their bindings (``policies``), the cluster objects they read (``state``: Namespaces, ConfigMaps as params), the
CRD of the objects written (``crds``, paths from the repository's root) and the writes
(``cases``: a CREATE, or an UPDATE of ``old``). For every file this script, against the cluster
of ``--kubeconfig``:

1. makes sure the CRD is served (created when absent; a different CRD of that name stops it);
2. creates the state (Namespaces created or relabelled, ConfigMaps replaced) and, for each
   UPDATE, the stored ``old`` object, before any policy exists;
3. creates the policies, then the bindings, then a probe policy of its own (and, when the file
   has MutatingAdmissionPolicies, a mutating probe too), and waits (with a deadline) until the
   probe denies (and the mutating probe labels its ConfigMap): the apiserver's policy caches
   then hold every policy and binding created before them;
4. sends every case with ``?dryRun=All`` (a POST, or a PUT carrying the stored
   ``resourceVersion``; ``?fieldValidation=`` the case's ``field_validation``, Strict unless
   it says otherwise) and writes what came back into the case's ``expect``: ``allowed``, the
   HTTP ``code``, the ``status`` (the whole metav1.Status of a refusal), the ``warnings`` (the
   ``Warning`` headers' texts, in order) and, when admitted, ``stored`` (the object as the
   apiserver returned it, metadata reduced to name, namespace, labels and annotations); each
   case is sent twice and must get the same answer twice (else it is sent again);
5. deletes the policies, bindings, probe, stored objects and ConfigMaps (the Namespaces stay).

Run it against a scratch kube-apiserver v1.36 (one with no admission webhooks of infergate)::

    .venv/bin/python tests/policy/native/record.py --kubeconfig ~/.cache/realk8s/kubeconfig [FILE ...]

Every name it creates starts with the prefix of the file's first policy (``h6-``, ``s3-``); the files' headers (``recorded``) say when and against
which version they were recorded. ``tests/policy/native/test_recorded.py`` replays the cases
offline through ``infergate validate``.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CASES = HERE / "cases"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
DEADLINE = 90.0  # seconds to wait for the policy cache


class Cluster:
    """A raw HTTPS client for one kubeconfig's current context (client certificate auth)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context_name = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self._dir = tempfile.TemporaryDirectory(prefix="h6-record-")
        paths = {}
        for key, field in (("ca", ("certificate-authority-data", cluster)), ("cert", ("client-certificate-data", user)),
                           ("key", ("client-key-data", user))):
            name, source = field
            path = Path(self._dir.name) / key
            if name in source:
                path.write_bytes(base64.b64decode(source[name]))
            else:
                path.write_bytes(Path(source[name.removesuffix("-data")]).read_bytes())
            paths[key] = str(path)
        self.http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=paths["ca"], cert_file=paths["cert"],
                                        key_file=paths["key"], timeout=30.0, retries=False)

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json"):
        data = json.dumps(body).encode() if body is not None else None
        response = self.http.request(method, self.server + path, body=data,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        text = response.data.decode()
        payload = json.loads(text) if text else None
        return response.status, payload, [_warning_text(w) for w in response.headers.getlist("Warning")]

    def version(self) -> str:
        return self.call("GET", "/version")[1]["gitVersion"]


def _warning_text(header: str) -> str:
    """The text of one ``Warning: 299 - "<text>"`` header (RFC 7234 quoted-string)."""
    match = re.fullmatch(r'\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?\s*', header)
    if match is None:
        return header
    return re.sub(r"\\(.)", r"\1", match.group(1))


def _resource_path(obj: dict[str, Any], plural: str, *, named: bool) -> str:
    api_version = obj["apiVersion"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    meta = obj.get("metadata") or {}
    if meta.get("namespace"):
        base += f"/namespaces/{quote(meta['namespace'])}"
    base += f"/{plural}"
    return base + (f"/{quote(meta['name'])}" if named else "")


_PLURALS = {"Namespace": "namespaces", "ConfigMap": "configmaps", "Service": "services", "Deployment": "deployments",
            "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
            "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
            "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
            "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings"}


def _reduced(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as stored, metadata reduced to what the cases compare."""
    meta = obj.get("metadata") or {}
    out = {k: v for k, v in obj.items() if k != "metadata"}
    out["metadata"] = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    return {"apiVersion": out.pop("apiVersion"), "kind": out.pop("kind"), "metadata": out.pop("metadata"), **out}


def _converter_lag(answer: dict[str, Any]) -> bool:
    """A MutatingAdmissionPolicy's answer before the plugin has the kind's schema."""
    message = (answer.get("status") or {}).get("message") or ""
    return answer["code"] == 503 and "There can be a delay between when CustomResourceDefinitions are created" in message


class Recorder:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.plurals = dict(_PLURALS)  # kind -> plural: the built-in ones and the CRDs' as they are ensured

    def wait(self, what: str, check) -> None:
        deadline = time.monotonic() + DEADLINE
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit(f"record: gave up waiting for {what}")
            time.sleep(0.25)

    def ensure_crd(self, path: Path) -> str:
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        where = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        code, found, _ = self.cluster.call("GET", where)
        if code == 404:
            code, found, _ = self.cluster.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            if code >= 300:
                raise SystemExit(f"record: cannot create CRD {name}: {found}")
        elif [v["schema"] for v in found["spec"]["versions"]] != [v["schema"] for v in crd["spec"]["versions"]]:
            raise SystemExit(f"record: the cluster serves another CRD {name}; not replacing it")

        def established() -> bool:
            current = self.cluster.call("GET", where)[1]
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in (current.get("status") or {}).get("conditions") or ())
        self.wait(f"CRD {name}", established)
        self.plurals[crd["spec"]["names"]["kind"]] = crd["spec"]["names"]["plural"]
        return crd["spec"]["names"]["plural"]

    def put_state(self, obj: dict[str, Any]) -> None:
        plural = self.plurals[obj["kind"]]
        if obj["kind"] == "Namespace":
            code, _, _ = self.cluster.call("GET", _resource_path(obj, plural, named=True))
            if code == 404:
                self._create(obj, plural)
            else:
                labels = obj["metadata"].get("labels") or {}
                self.cluster.call("PATCH", _resource_path(obj, plural, named=True),
                                  {"metadata": {"labels": labels}}, "application/merge-patch+json")
            return
        self.delete(obj, plural)
        self._create(obj, plural)

    def _create(self, obj: dict[str, Any], plural: str) -> dict[str, Any]:
        code, body, _ = self.cluster.call("POST", _resource_path(obj, plural, named=False), obj)
        if code >= 300:
            raise SystemExit(f"record: cannot create {obj['kind']} {obj['metadata']['name']}: {body}")
        return body

    def delete(self, obj: dict[str, Any], plural: str) -> None:
        path = _resource_path(obj, plural, named=True)
        self.cluster.call("DELETE", path)
        self.wait(f"{obj['kind']} {obj['metadata']['name']} to go",
                  lambda: self.cluster.call("GET", path)[0] == 404)

    def probe(self, suite: str, prefix: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A policy and binding that deny one ConfigMap name; the ConfigMap that shows it."""
        name = f"{prefix}-probe-{suite}"
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                  "metadata": {"name": name},
                  "spec": {"matchConstraints": {"resourceRules": [
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"], "resourceNames": [name]}]},
                      "validations": [{"expression": "false", "message": "probe"}]}}
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        return [policy, binding], config_map

    def probe_denies(self, config_map: dict[str, Any]) -> bool:
        code, _, _ = self.cluster.call("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", config_map)
        return code == 422

    def mutating_probe(self, suite: str, prefix: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """A MutatingAdmissionPolicy and binding that label one ConfigMap name; the ConfigMap
        that shows it (the mutating plugin's policy cache is apart from the validating one's)."""
        name = f"{prefix}-probe-{suite}-mutating"
        policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                  "metadata": {"name": name},
                  "spec": {"matchConstraints": {"resourceRules": [
                      {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"], "resourceNames": [name]}]},
                      "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                          "expression": 'Object{metadata: Object.metadata{labels: {"probe": "mutated"}}}'}}],
                      "reinvocationPolicy": "Never"}}
        binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                   "metadata": {"name": name}, "spec": {"policyName": name}}
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        return [policy, binding], config_map

    def probe_mutates(self, config_map: dict[str, Any]) -> bool:
        code, body, _ = self.cluster.call("POST", "/api/v1/namespaces/default/configmaps?dryRun=All", config_map)
        return code < 300 and ((body.get("metadata") or {}).get("labels") or {}).get("probe") == "mutated"

    def type_checking(self, policies: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
        """Each ValidatingAdmissionPolicy's ``status.typeChecking.expressionWarnings`` once the
        apiserver has checked it (``status.observedGeneration``)."""
        out = {}
        for policy in policies:
            if policy["kind"] != "ValidatingAdmissionPolicy":
                continue
            path = _resource_path(policy, _PLURALS[policy["kind"]], named=True)
            checked: dict[str, Any] = {}

            def observed() -> bool:
                found = self.cluster.call("GET", path)[1]
                checked.update(found)
                status = found.get("status") or {}
                return status.get("observedGeneration") == found["metadata"].get("generation")
            self.wait(f"the type check of {policy['metadata']['name']}", observed)
            warnings = ((checked.get("status") or {}).get("typeChecking") or {}).get("expressionWarnings") or []
            out[policy["metadata"]["name"]] = warnings
        return out

    def send(self, case: dict[str, Any], plural: str, stored: dict[str, Any] | None) -> dict[str, Any]:
        obj = json.loads(json.dumps(case.get("object") or case["old"]))
        plural = self.plurals.get(obj["kind"], plural)
        if case["operation"] == "DELETE":
            old = case["old"]
            code, body, warnings = self.cluster.call("DELETE", _resource_path(old, self.plurals.get(old["kind"], plural),
                                                                             named=True) + "?dryRun=All")
            return {"allowed": code < 300, "code": code, **({"status": body} if code >= 300 else {}),
                    "warnings": warnings}
        if case["operation"] == "UPDATE":
            obj["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
            path = _resource_path(obj, plural, named=True) + (f"/{case['subresource']}" if case.get("subresource") else "")
            method = "PUT"
        else:
            path = _resource_path(obj, plural, named=False)
            method = "POST"
        directive = case.get("field_validation", "Strict")
        code, body, warnings = self.cluster.call(method, path + f"?dryRun=All&fieldValidation={directive}", obj)
        answer: dict[str, Any] = {"allowed": code < 300, "code": code}
        if code < 300:
            answer["stored"] = _reduced(body)
            if not obj["metadata"].get("name"):  # generated anew by each dry run: not compared
                answer["stored"]["metadata"].pop("name", None)
        else:
            answer["status"] = body
        answer["warnings"] = warnings
        return answer

    def record_rejected(self, file: Path, suite: dict[str, Any]) -> None:
        """Each object of ``rejected`` sent with ``?dryRun=All``: the apiserver's refusal."""
        for case in suite["rejected"]:
            obj = case["object"]
            path = _resource_path(obj, _PLURALS[obj["kind"]], named=False) + "?dryRun=All"
            code, body, warnings = self.cluster.call("POST", path, obj)
            case["expect"] = {"code": code, "status": body if code >= 300 else None, "warnings": warnings}
            print(f"{file.name}: {case['name']}: {code}", file=sys.stderr)

    def record(self, file: Path) -> None:
        suite = yaml.safe_load(file.read_text())
        if "rejected" in suite:
            self.record_rejected(file, suite)
            self._write(file, suite)
            return
        plurals = [self.ensure_crd(REPO / p) for p in suite.get("crds") or ()]
        plural = plurals[0] if plurals else ""  # built-in kinds: their own (``_PLURALS``)
        for obj in suite.get("state") or ():
            self.put_state(obj)
        stored: dict[str, dict[str, Any]] = {}
        for case in suite["cases"]:
            if case["operation"] in ("UPDATE", "DELETE"):
                old = case["old"]
                self.delete(old, self.plurals.get(old["kind"], plural))
                created = self._create(old, self.plurals.get(old["kind"], plural))
                stored[case["name"]] = created
                case["old"] = _reduced(created)
        prefix = suite["policies"][0]["metadata"]["name"].split("-")[0]  # the prefix the suite's names share
        probe_objects, probe_config_map = self.probe(file.stem, prefix)
        mutating = any(p["kind"].startswith("Mutating") for p in suite["policies"])
        mutating_objects, mutating_config_map = self.mutating_probe(file.stem, prefix)
        if mutating:
            probe_objects += mutating_objects
        policies = [p for p in suite["policies"] if not p["kind"].endswith("Binding")]
        bindings = [p for p in suite["policies"] if p["kind"].endswith("Binding")]
        created_policies = []
        try:
            for obj in [*policies, *bindings, *probe_objects]:
                self.delete(obj, _PLURALS[obj["kind"]])
                self._create(obj, _PLURALS[obj["kind"]])
                created_policies.append(obj)
            self.wait("the probe policy to deny", lambda: self.probe_denies(probe_config_map))
            if mutating:
                self.wait("the mutating probe policy to mutate", lambda: self.probe_mutates(mutating_config_map))
            suite["type_checking"] = self.type_checking(policies)
            for case in suite["cases"]:
                for _ in range(5):
                    # the mutating plugin learns a new CRD's schema from the OpenAPI paths it polls
                    # every 5 s: until then it answers 503 (``typeconverter.go``)
                    self.wait("the mutating plugin's type converter", lambda: not _converter_lag(
                        self.send(case, plural, stored.get(case["name"]))))
                    first = self.send(case, plural, stored.get(case["name"]))
                    second = self.send(case, plural, stored.get(case["name"]))
                    if first == second:
                        break
                else:
                    raise SystemExit(f"record: {file.name}: {case['name']}: the answer keeps changing")
                case["expect"] = first
                print(f"{file.name}: {case['name']}: {first['code']}", file=sys.stderr)
        finally:
            for obj in reversed(created_policies):
                self.delete(obj, _PLURALS[obj["kind"]])
            self.wait("the probe policy to go", lambda: not self.probe_denies(probe_config_map))
            if mutating:
                self.wait("the mutating probe policy to go", lambda: not self.probe_mutates(mutating_config_map))
            for case in suite["cases"]:
                if case["operation"] in ("UPDATE", "DELETE"):
                    self.delete(case["old"], self.plurals.get(case["old"]["kind"], plural))
            for obj in suite.get("state") or ():
                if obj["kind"] != "Namespace":
                    self.delete(obj, self.plurals[obj["kind"]])
        self._write(file, suite)

    def _write(self, file: Path, suite: dict[str, Any]) -> None:
        suite["recorded"] = {"apiserver": self.cluster.version(), "date": datetime.date.today().isoformat(),
                             "by": "tests/policy/native/record.py"}
        ordered = {"suite": suite.pop("suite"), "recorded": suite.pop("recorded"), **suite}
        file.write_text(yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))


class _Dumper(yaml.SafeDumper):
    """YAML without anchors and aliases (each case stands alone)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("files", nargs="*", type=Path, help="case files (default: every file of cases/)")
    args = parser.parse_args()
    recorder = Recorder(Cluster(args.kubeconfig))
    for file in args.files or sorted(CASES.glob("*.yaml")):
        recorder.record(file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
