"""What a test run owns in the cluster, how it gets there, and how it all goes away.

Every object a run creates carries the label ``e2e.infergate.io/run: <run id>``; the final
sweep deletes exactly what that label selects, kind by kind (webhook configurations first,
so nothing judges the clean-up; CRDs last). A run never takes over what it did not create:
an object of the same name already in the cluster stops the setup with a clear message,
except for Namespaces, which are shared (``default``, ``kube-system``) and never deleted
unless the run created them.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.schema import bundled

from .api import Kube, NotServed, wait_for
from tests.support.paths import MANIFESTS, REPO

# the scenarios are the seed era's: KubeAI v0.12.0's Model beside the other bundled CRDs
KUBEAI_CRD = "v0.12.0"


def bundled_crds() -> list[dict[str, Any]]:
    """The bundled CRDs of the kinds the webhook serves as their released files, one per name; not
    the schema-only Gateway API kinds, which no scenario writes. Fresh copies on every call.

    Where several releases share a name (GIE's seed-era InferencePool and InferenceModel:
    v1alpha1 in v0.1.0, v1alpha2 later), the oldest: the scenarios write v1alpha1 objects and the
    controller owns their ``status.conditions``. ``bundled.crds`` combines the releases into one
    CRD for offline validation, but no GIE release served both versions, and a cluster storing
    v1alpha2 would prune v1alpha1's ``status.conditions`` on every read."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for source, path in bundled.crd_files(KUBEAI_CRD):
        if source == bundled.SCHEMA_ONLY:
            continue
        for crd in yaml.safe_load_all(path.read_text()):
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition":
                by_name.setdefault(crd["metadata"]["name"], []).append(crd)

    def storage_priority(crd: dict[str, Any]) -> tuple[int, int, int]:
        return bundled.version_priority(next(v["name"] for v in crd["spec"]["versions"] if v.get("storage")))

    return [min(parts, key=storage_priority) for parts in by_name.values()]
STATE_DIR = REPO / "examples" / "state"
MANIFESTS_DIR = MANIFESTS
SUPPORT_CRDS = Path(__file__).resolve().parent / "support-crds.yaml"

RUN_LABEL = "e2e.infergate.io/run"
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
VWC = ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
MWC = ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
NAMESPACE = ("v1", "Namespace")

# Deletion order of the sweep: what judges writes first, then what lives in namespaces,
# then cluster-scoped objects, then namespaces, then the CRDs everything else was made of.
SWEEP_KINDS: tuple[tuple[str, str], ...] = (
    VWC, MWC,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("ai.deckhouse.io/v1alpha1", "InferenceService"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("llm-d.ai/v1alpha2", "InferenceModelRewrite"), ("llm-d.ai/v1alpha2", "InferenceObjective"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("inference.networking.x-k8s.io/v1alpha1", "InferencePoolImport"),
    ("inference.networking.x-k8s.io/v1alpha1", "InferenceModel"),
    ("inference.networking.x-k8s.io/v1alpha1", "InferencePool"),
    ("kubeai.org/v1", "Model"),
    ("ai.deckhouse.io/v1alpha1", "Model"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("v1", "Pod"), ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"),
    ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "ServiceAccount"),
    ("coordination.k8s.io/v1", "Lease"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "Role"),
    ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("cert-manager.io/v1", "Certificate"), ("cert-manager.io/v1", "Issuer"),
    ("ai.deckhouse.io/v1alpha1", "InferenceServiceClass"),
    ("ai.deckhouse.io/v1alpha1", "ClusterModel"),
    ("resource.k8s.io/v1", "ResourceSlice"), ("resource.k8s.io/v1", "DeviceClass"),
    ("scheduling.k8s.io/v1", "PriorityClass"), ("storage.k8s.io/v1", "StorageClass"),
    ("cert-manager.io/v1", "ClusterIssuer"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    NAMESPACE, CRD,
)


# What a run leaves exactly as it found it, name for name, whatever created it (the run, Helm,
# the controller, a kube-controller-manager reacting to them): the cluster-wide objects a leftover
# or a loss would change for every other user (what judges writes, the kinds served, who may do
# what, defaults of scheduling and devices). Checked after the sweep (:func:`changed_since`).
ADMISSION = "admissionregistration.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"
CLUSTER_WIDE_KINDS: tuple[tuple[str, str], ...] = (
    NAMESPACE, VWC, MWC, CRD,
    (ADMISSION, "ValidatingAdmissionPolicy"), (ADMISSION, "ValidatingAdmissionPolicyBinding"),
    (ADMISSION, "MutatingAdmissionPolicy"), (ADMISSION, "MutatingAdmissionPolicyBinding"),
    (RBAC, "ClusterRole"), (RBAC, "ClusterRoleBinding"),
    ("scheduling.k8s.io/v1", "PriorityClass"), ("storage.k8s.io/v1", "StorageClass"),
    ("resource.k8s.io/v1", "DeviceClass"),
)


def cluster_wide_names(kube: Kube) -> set[str]:
    """``Kind/name`` of every object of :data:`CLUSTER_WIDE_KINDS` the cluster serves."""
    names: set[str] = set()
    for api_version, kind in CLUSTER_WIDE_KINDS:
        try:
            found = kube.list(api_version, kind)
        except NotServed:
            continue
        names |= {f"{kind}/{obj['metadata']['name']}" for obj in found}
    return names


def changed_since(before: set[str], after: set[str]) -> list[str]:
    """What differs between two :func:`cluster_wide_names`: empty when the cluster is as found."""
    return [f"left behind: {name}" for name in sorted(after - before)] + \
           [f"gone, though the run found it: {name}" for name in sorted(before - after)]


class ClusterNotScratch(RuntimeError):
    """The cluster already holds an object the run would have to create: refuse to touch it."""


def new_run_id() -> str:
    return f"r{time.strftime('%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"


def selector(run_id: str) -> str:
    """The label selector of everything one run created."""
    return f"{RUN_LABEL}={run_id}"


def labelled(obj: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """A copy of ``obj`` carrying the run label (and no server-set fields)."""
    out = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    for server_set in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        meta.pop(server_set, None)
    meta["labels"] = {**(meta.get("labels") or {}), RUN_LABEL: run_id}
    return out


def load_documents(*paths: Path) -> list[dict[str, Any]]:
    docs = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            docs += [d for d in yaml.safe_load_all(file.read_text()) if d]
    return docs


def example_state() -> list[dict[str, Any]]:
    """``examples/state`` as it goes into a real cluster: Namespaces first, and nothing that
    changes cluster-wide defaults for everyone else (no globalDefault PriorityClass, no
    default StorageClass), and Pods that never run: the cluster must keep behaving as it did
    for its other users."""
    docs = load_documents(STATE_DIR)
    for doc in docs:
        if doc["kind"] == "PriorityClass":
            doc.pop("globalDefault", None)
        if doc["kind"] == "Pod":  # API objects only: a scheduling gate keeps them off every node
            doc["spec"]["schedulingGates"] = [{"name": "e2e.infergate.io/never"}]
            doc["spec"]["automountServiceAccountToken"] = False
        annotations = (doc.get("metadata") or {}).get("annotations") or {}
        annotations.pop("storageclass.kubernetes.io/is-default-class", None)
    return sorted(docs, key=lambda d: d["kind"] != "Namespace")


@dataclass
class Owned:
    """What this run created (for the report) and borrowed (existing Namespaces it used)."""

    run_id: str
    created: list[tuple[str, str, str | None, str]] = field(default_factory=list)
    borrowed_namespaces: set[str] = field(default_factory=set)


def create_owned(kube: Kube, obj: Mapping[str, Any], owned: Owned) -> dict[str, Any]:
    """Create ``obj`` labelled for the run; its ``status`` is written through ``/status`` when
    the kind has that subresource (a create ignores it there). Returns the stored object."""
    body = labelled(obj, owned.run_id)
    meta = body["metadata"]
    reply = kube.create(body)
    if reply.status == 409:
        existing = kube.get(body["apiVersion"], body["kind"], meta["name"], meta.get("namespace")) or {}
        labels = (existing.get("metadata") or {}).get("labels") or {}
        if body["kind"] == "Namespace":
            owned.borrowed_namespaces.add(meta["name"])
            return existing
        if RUN_LABEL in labels:
            raise ClusterNotScratch(
                f"{body['kind']} {meta['name']} is left over from e2e run {labels[RUN_LABEL]}: "
                f"delete it (kubectl delete {body['kind'].lower()} -l {RUN_LABEL}) and run again")
        raise ClusterNotScratch(
            f"{body['kind']} {_where(meta)} already exists in this cluster and was not created by the e2e "
            "tests: run them on a scratch cluster (kind, k3d, a bare apiserver)")
    stored = reply.expect_ok()
    owned.created.append((body["apiVersion"], body["kind"], meta.get("namespace"), meta["name"]))
    if obj.get("status") and not stored.get("status"):
        stored = kube.replace({**stored, "status": obj["status"]}, subresource="status").expect_ok()
    return stored


def _where(meta: Mapping) -> str:
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def apply_crds(kube: Kube, crds: Iterable[Mapping], owned: Owned, *, timeout: float = 60) -> list[str]:
    """Create the CRDs and wait until the apiserver serves each (condition Established)."""
    names = [create_owned(kube, crd, owned)["metadata"]["name"] for crd in crds]
    for name in names:
        wait_for(f"CRD {name} Established", lambda n=name: _established(kube, n), timeout=timeout)
    for crd in crds:  # discovery learns the new kinds
        for version in crd["spec"]["versions"]:
            kube.rediscover(f"{crd['spec']['group']}/{version['name']}")
    return names


def _established(kube: Kube, name: str) -> bool:
    crd = kube.get(*CRD, name) or {}
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or ())


def support_crds(kube: Kube) -> list[dict[str, Any]]:
    """Minimal CRDs for the APIs the example state reads but infergate does not own (the
    ai-models catalog, cert-manager), for a cluster that does not serve them yet."""
    needed = []
    for crd in load_documents(SUPPORT_CRDS):
        spec = crd["spec"]
        if not kube.serves(f"{spec['group']}/{spec['versions'][0]['name']}", spec["names"]["kind"]):
            needed.append(crd)
    return needed


def sweep(kube: Kube, run_id: str, *, timeout: float = 60) -> list[str]:
    """Delete everything labelled for ``run_id``; returns what could not be deleted (empty
    when the cluster is as it was). Runs to the end whatever fails on the way."""
    problems: list[str] = []
    label = selector(run_id)
    for api_version, kind in SWEEP_KINDS:
        try:
            found = kube.list(api_version, kind, label_selector=label)
        except NotServed:
            continue
        except AssertionError as exc:
            problems.append(f"cannot list {kind}: {exc}")
            continue
        for obj in found:
            meta = obj["metadata"]
            reply = kube.delete(api_version, kind, meta["name"], meta.get("namespace"))
            if not reply.ok and reply.status != 404:
                problems.append(f"cannot delete {kind} {_where(meta)}: {reply.message}")
        if kind == "Namespace" and found:
            finish_namespaces(kube, [obj["metadata"]["name"] for obj in found])
        try:
            wait_for(f"{kind} of run {run_id} gone",
                     lambda: not kube.list(api_version, kind, label_selector=label), timeout=timeout)
        except AssertionError as exc:
            problems.append(str(exc))
    return problems


def finish_namespaces(kube: Kube, names: list[str], wait: float = 10) -> None:
    """Namespaces whose contents the sweep already deleted: when no namespace controller has
    taken them up after ``wait`` seconds (it writes status conditions; a bare apiserver has
    none), do its last step as it would, so they do not stay Terminating forever."""
    deadline = time.monotonic() + wait
    while True:
        remaining = [ns for ns in (kube.get(*NAMESPACE, name) for name in names) if ns is not None]
        if not remaining or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for ns in remaining:
        if not (ns.get("status") or {}).get("conditions"):
            ns["spec"]["finalizers"] = []
            kube.request("PUT", f"/api/v1/namespaces/{ns['metadata']['name']}/finalize", ns)


def ensure_service_account(kube: Kube, namespace: str, owned: Owned) -> None:
    """The ``default`` ServiceAccount Pods are admitted with: a cluster without a
    controller-manager (a bare apiserver) never creates it."""
    if kube.get("v1", "ServiceAccount", "default", namespace) is None:
        body = labelled({"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": "default", "namespace": namespace}}, owned.run_id)
        reply = kube.create(body)
        if reply.status != 409:  # a controller-manager may have been quicker
            reply.expect_ok()


def delete_events(kube: Kube, owned: Owned, component: str = "infergate-controller") -> None:
    """The controller's Events about this run's objects (Events carry no labels of ours)."""
    namespaces = {ns for _, _, ns, _ in owned.created if ns}
    names = {name for _, _, _, name in owned.created}
    for namespace in namespaces:
        reply = kube.request("GET", f"/api/v1/namespaces/{namespace}/events",
                             params=[("fieldSelector", f"source={component}")])
        for event in reply.body.get("items", []) if reply.ok else []:
            if (event.get("involvedObject") or {}).get("name") in names:
                kube.request("DELETE", f"/api/v1/namespaces/{namespace}/events/{event['metadata']['name']}")
