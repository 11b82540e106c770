"""An in-memory stand-in for the kube-apiserver's REST surface (discovery, create with
dryRun, get, list by label, replace incl. /status, delete, namespace finalize; CRDs become
served kinds, Established at once). It judges nothing: it lets the e2e set-up and sweep run
their real HTTP requests without a cluster (tests/e2e_harness/test_e2e_static.py)."""

from __future__ import annotations

import copy
import http.server
import itertools
import json
import threading
from urllib.parse import parse_qs, urlsplit

CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "PriorityClass", "StorageClass", "DeviceClass", "ResourceSlice",
                  "ClusterRole", "ClusterRoleBinding"}
BUILT_IN = {
    "v1": ["Namespace", "Pod", "Secret", "ConfigMap", "Service", "ServiceAccount", "Event"],
    "apps/v1": ["Deployment", "StatefulSet"],
    "coordination.k8s.io/v1": ["Lease"],
    "rbac.authorization.k8s.io/v1": ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    "policy/v1": ["PodDisruptionBudget"],
    "networking.k8s.io/v1": ["NetworkPolicy"],
    "scheduling.k8s.io/v1": ["PriorityClass"],
    "storage.k8s.io/v1": ["StorageClass"],
    "resource.k8s.io/v1": ["DeviceClass", "ResourceSlice", "ResourceClaim"],
    "admissionregistration.k8s.io/v1": ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"],
    "apiextensions.k8s.io/v1": ["CustomResourceDefinition"],
}


def plural(kind: str) -> str:
    lower = kind.lower()
    return lower + "es" if lower.endswith("s") else lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


class MemoryApiserver:
    def __init__(self, objects=()):
        self.resources: dict[str, dict[str, tuple[str, bool, bool]]] = {}  # apiVersion -> plural -> (kind, namespaced, status)
        for api_version, kinds in BUILT_IN.items():
            for kind in kinds:
                self.serve(api_version, kind, plural(kind), kind not in CLUSTER_SCOPED, status=kind != "Namespace")
        self.store: dict[tuple, dict] = {}
        self.versions = itertools.count(1)
        self.lock = threading.Lock()
        for obj in objects:
            self._put(copy.deepcopy(obj))
        handler = type("Handler", (_Handler,), {"api": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)

    def serve(self, api_version, kind, plural_, namespaced, *, status=False):
        self.resources.setdefault(api_version, {})[plural_] = (kind, namespaced, status)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()

    def _put(self, obj):
        meta = obj["metadata"]
        meta["resourceVersion"] = str(next(self.versions))
        meta.setdefault("uid", f"uid-{meta['resourceVersion']}")
        self.store[(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])] = obj
        if obj["kind"] == "CustomResourceDefinition":  # served and Established at once
            spec = obj["spec"]
            for version in spec["versions"]:
                self.serve(f"{spec['group']}/{version['name']}", spec["names"]["kind"], spec["names"]["plural"],
                           spec["scope"] == "Namespaced", status="status" in (version.get("subresources") or {}))
            obj["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
        return obj

    def objects(self) -> list[dict]:
        return [copy.deepcopy(o) for o in self.store.values()]


def _status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
                  "message": message}


class _Handler(http.server.BaseHTTPRequestHandler):
    api: MemoryApiserver

    def log_message(self, *args):
        pass

    def _answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self):
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with self.api.lock:
            self._answer(*self.handle_request(parts, query, body))

    do_GET = do_POST = do_PUT = do_DELETE = _route

    def handle_request(self, parts, query, body):
        api = self.api
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "36"}
        prefix = 2 if parts[0] == "api" else 3
        api_version = "/".join(parts[1:prefix])
        rest = parts[prefix:]
        if api_version not in api.resources:
            return _status(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return 200, {"kind": "APIResourceList", "groupVersion": api_version, "resources": [
                {"name": p, "kind": k, "namespaced": n} for p, (k, n, _) in api.resources[api_version].items()]}
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in api.resources[api_version]:
            namespace, rest = rest[1], rest[2:]
        if rest[0] not in api.resources[api_version]:
            return _status(404, "NotFound", f"no resource {rest[0]}")
        kind, namespaced, _ = api.resources[api_version][rest[0]]
        name, sub = (rest[1:] + [None, None])[:2]
        key = (api_version, kind, namespace if namespaced else None, name)
        method = self.command
        if name is None and method == "GET":
            selector = (query.get("labelSelector") or [""])[0]
            k, _, v = selector.partition("=")
            items = [o for (av, kd, ns, _), o in api.store.items() if (av, kd) == (api_version, kind)
                     and (namespace is None or ns == namespace) and (not k or o["metadata"].get("labels", {}).get(k) == v)]
            return 200, {"kind": f"{kind}List", "items": items}
        if name is None and method == "POST":
            meta = body["metadata"]
            key = (api_version, kind, meta.get("namespace") if namespaced else None, meta["name"])
            if key in api.store:
                return _status(409, "AlreadyExists", f'{kind} "{meta["name"]}" already exists')
            obj = copy.deepcopy(body)
            if api.resources[api_version][rest[0]][2]:
                obj.pop("status", None)  # a create ignores status where /status is a subresource
            return (201, obj) if query.get("dryRun") else (201, api._put(obj))
        if key not in api.store:
            return _status(404, "NotFound", f'{kind} "{name}" not found')
        if method == "GET":
            return 200, api.store[key]
        if method == "PUT":
            if body["metadata"].get("resourceVersion") != api.store[key]["metadata"]["resourceVersion"]:
                return _status(409, "Conflict", "the object has been modified")
            obj = copy.deepcopy(api.store[key]) if sub in ("status", "finalize") else copy.deepcopy(body)
            if sub == "status":
                obj["status"] = body.get("status")
            if sub == "finalize":
                obj["spec"] = body.get("spec")
            return 200, api._put(obj)
        if method == "DELETE":
            return 200, api.store.pop(key)
        return _status(405, "MethodNotAllowed", method)
