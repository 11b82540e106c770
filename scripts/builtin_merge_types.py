#!/usr/bin/env python3
"""Regenerate ``webhook/policy/native/builtin_merge_types.json.gz``: the merge types of the
built-in kinds, read from a real kube-apiserver's OpenAPI v3.

A MutatingAdmissionPolicy's ApplyConfiguration is merged by the kind's schema as the apiserver
converts its OpenAPI v3 document (``/openapi/v3/api/v1``, ``/openapi/v3/apis/<group>/<version>``:
``mutating/patch/typeconverter.go`` -> ``managedfields.NewTypeConverter`` ->
``kube-openapi/pkg/schemaconv``). This script fetches those documents for the group-versions of
the built-in kinds below and keeps, of every component schema the kinds reach, only what that
conversion reads:

- ``type``; ``format`` of a string (``int-or-string``, ``date-time``, ... make it untyped);
- ``properties``, ``items``, ``additionalProperties`` (a schema or a boolean);
- a reference (``$ref``, or an ``allOf`` of one ``$ref``) as ``{"$ref": "<component name>"}``;
- ``default`` when it is a scalar (a list-map key's default names the item: a Service port
  without ``protocol`` is the ``TCP`` one);
- ``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type``,
  ``x-kubernetes-patch-strategy``, ``x-kubernetes-patch-merge-key`` (schemaconv reads the patch
  strategy of a list without a list-type), ``x-kubernetes-preserve-unknown-fields``.

Descriptions, enums, ``oneOf`` (IntOrString's, Quantity's) and the rest are dropped. The kinds
are those ``webhook/kinds.py`` declares in a built-in group (not the served ones: those are
CRDs), and the workload and cluster kinds a repository's manifests hold most (``EXTRA``). A component shared by several group-versions
(ObjectMeta) must be the same in each.

Usage (against the apiserver the recorded cases come from)::

    .venv/bin/python scripts/builtin_merge_types.py --kubeconfig ~/.cache/realk8s/kubeconfig
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from webhook.apiversion import api_version_of  # noqa: E402
from webhook.kinds import DECLARATIONS  # noqa: E402
from webhook.offline.builtin_kinds import is_builtin_group  # noqa: E402

OUT = REPO / "webhook" / "policy" / "native" / "builtin_merge_types.json.gz"

# (group, version, kind) beside the built-in kinds of webhook/kinds.py
EXTRA = (
    ("", "v1", "ServiceAccount"), ("", "v1", "PersistentVolume"), ("", "v1", "Endpoints"),
    ("", "v1", "ResourceQuota"), ("", "v1", "LimitRange"), ("", "v1", "ReplicationController"),
    ("", "v1", "PodTemplate"),
    ("apps", "v1", "DaemonSet"), ("apps", "v1", "ReplicaSet"),
    ("batch", "v1", "Job"), ("batch", "v1", "CronJob"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler"), ("policy", "v1", "PodDisruptionBudget"),
    ("networking.k8s.io", "v1", "Ingress"), ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("networking.k8s.io", "v1", "IngressClass"),
    ("rbac.authorization.k8s.io", "v1", "Role"), ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate"),
)

_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
               "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key", "x-kubernetes-preserve-unknown-fields")
_PREFIX = "#/components/schemas/"


def wanted() -> list[tuple[str, str, str]]:
    kinds = [(d.group, d.versions[0], d.kind) for d in DECLARATIONS
             if d.versions and not d.served and is_builtin_group(api_version_of(d.group, d.versions[0]))]
    return sorted(set(kinds) | set(EXTRA))


def fetch(kubectl: str, kubeconfig: str, path: str) -> dict[str, Any]:
    out = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "--raw", path], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def trim(schema: dict[str, Any]) -> dict[str, Any]:
    """One schema node with only what ``schemaconv`` reads."""
    ref = schema.get("$ref")
    if not ref and isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        ref = schema["allOf"][0].get("$ref")
    out: dict[str, Any] = {}
    if ref:
        out["$ref"] = ref.removeprefix(_PREFIX)
    if "type" in schema:
        out["type"] = schema["type"]
        if schema["type"] == "string" and schema.get("format"):
            out["format"] = schema["format"]
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: trim(sub) for name, sub in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = trim(schema["items"])
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = trim(additional)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    if "default" in schema and not isinstance(schema["default"], (dict, list)):
        out["default"] = schema["default"]
    for name in _EXTENSIONS:
        if name in schema:
            out[name] = schema[name]
    return out


def references(schema: dict[str, Any], out: set[str]) -> None:
    """The component names a trimmed node refers to (its own reference and its children's)."""
    if "$ref" in schema:
        out.add(schema["$ref"])
    for child in (schema.get("properties") or {}).values():
        references(child, out)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            references(schema[key], out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--kubectl", default="kubectl")
    args = parser.parse_args()
    kinds = wanted()
    version = fetch(args.kubectl, args.kubeconfig, "/version")["gitVersion"]
    components: dict[str, dict[str, Any]] = {}
    roots: dict[str, str] = {}
    paths = []
    for group, gv_version in sorted({(g, v) for g, v, _ in kinds}):
        path = f"/openapi/v3/api/{gv_version}" if not group else f"/openapi/v3/apis/{group}/{gv_version}"
        paths.append(path)
        schemas = fetch(args.kubectl, args.kubeconfig, path)["components"]["schemas"]
        names = []
        for name, schema in schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                if (gvk["group"], gvk["version"], gvk["kind"]) in kinds and (gvk["group"], gvk["version"]) == (group, gv_version):
                    api_version = f"{group}/{gv_version}" if group else gv_version
                    roots[f"{api_version} {gvk['kind']}"] = name
                    names.append(name)
        todo, seen = list(names), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            trimmed = trim(schemas[name])
            if name in components and components[name] != trimmed:
                raise SystemExit(f"{name} differs between group-versions ({path})")
            components[name] = trimmed
            found: set[str] = set()
            references(trimmed, found)
            todo += sorted(found - seen)
    missing = [k for k in kinds if f"{k[0] + '/' if k[0] else ''}{k[1]} {k[2]}" not in roots]
    if missing:
        raise SystemExit(f"not served by the apiserver: {missing}")
    document = {
        "source": {"apiserver": f"kube-apiserver {version}", "paths": paths,
                   "date": datetime.date.today().isoformat(), "by": "scripts/builtin_merge_types.py",
                   "trimmed": "type, string format, properties, items, additionalProperties, $ref, scalar defaults, "
                              + ", ".join(_EXTENSIONS)},
        "kinds": dict(sorted(roots.items())),
        "types": dict(sorted(components.items())),
    }
    data = json.dumps(document, separators=(",", ":"), sort_keys=False).encode()
    OUT.write_bytes(gzip.compress(data, mtime=0))
    print(f"{OUT.relative_to(REPO)}: {len(roots)} kinds, {len(components)} types, {len(data)} bytes "
          f"({OUT.stat().st_size} gzipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
