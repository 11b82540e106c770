"""Every kind infergate serves, reads, audits or writes status for, declared once.

A :class:`Declaration` says what infergate knows of a kind that no CRD tells it: its group,
kind, plural and scope, who writes its status, whether the webhook's configurations send it
(``served``), whether policies may look it up (``lookup``: the webhook's watch cache holds it)
and whether the controller's reconcilers read it. The versions the webhook judges and their
schemas come from the CRDs (``webhook.schema.bundled``, the cluster's); ``versions`` here are
only those infergate *reads* at, preferred first, where no CRD chooses for it (built-in kinds,
the watch caches' lists).

The rest of infergate reads this table: the webhook configurations' rules
(``webhook.webhook_config``), the CRDs the webhook's watch cache watches
(``webhook.inputs.watches.webhook_crd_names``), the watch lists (``webhook.inputs.watches``), the
controller's kinds (:data:`OWNED`, :data:`WATCHED`) and whose status is whose
(``webhook.controller.ownership``); the kinds the controller writes whole (the audit's reports:
``webhook.controller.report_writes``, ``webhook.audit.report``; its Lease; Events), the
admission configuration kinds (the webhook configurations, Kubernetes' own admission policies)
and the CRDs' own kind.

:class:`Kind` is one kind at one version (an ``apiVersion``), the handle the controller and the
audit read and write objects by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from webhook.apiversion import api_version_of, group_of, version_of

__all__ = ["DECLARATIONS", "Declaration", "Kind", "OWNED", "WATCHED", "declared", "key_of", "lookups",
           "native_policies", "served"]


class Kind(NamedTuple):
    """One kind at one version."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    @property
    def version(self) -> str:
        return version_of(self.api_version)


INFERGATE = "infergate"  # the status writer when infergate's controller writes it


@dataclass(frozen=True, slots=True)
class Declaration:
    group: str
    kind: str
    plural: str
    namespaced: bool
    # the versions infergate reads the kind at, preferred first (a cluster on an older release of
    # its CRD serves only an older one); empty: only the CRDs say (the webhook judges every one)
    versions: tuple[str, ...] = ()
    served: bool = False  # in the webhook configurations' rules (a shipped policy may apply to it)
    lookup: bool = False  # policies may look it up: the webhook's watch cache holds it
    lookup_metadata_only: bool = False  # ... as metadata only (a Secret's values never travel)
    lookup_names: tuple[str, ...] = ()  # ... only objects of these names (empty: every one)
    controller_reads: bool = False  # the controller's reconcilers read it
    # the cluster's own ValidatingAdmissionPolicies and bindings: read by the audit of native
    # policies (``--audit-native-policies``, ``infergate audit --native-policies``)
    native_policy: bool = False
    # who writes its status: INFERGATE (the controller), another controller (named for people),
    # or "" (nobody infergate knows of)
    status_writer: str = ""
    # the version the controller writes status at: its reconciler's schema ("" never writes)
    status_version: str = ""
    status_by_default: bool = True  # the controller writes it unless --status-writes says off
    # who writes whole objects of it, for people ("" nobody): the controller its reports, Lease
    # and Events; ``webhook-config`` (and the chart) the webhook configurations; ...
    written_by: str = ""

    @property
    def crd_name(self) -> str:
        """The name of its CRD (``<plural>.<group>``); also how ``--status-writes`` names it."""
        return f"{self.plural}.{self.group}"

    def at(self, version: str) -> Kind:
        return Kind(api_version_of(self.group, version), self.kind, self.plural, self.namespaced)

    @property
    def read_as(self) -> Kind:
        """The kind at the version infergate reads first."""
        return self.at(self.versions[0])

    @property
    def status_kind(self) -> Kind | None:
        """The kind at the version the controller writes status at (None: it never does)."""
        return self.at(self.status_version) if self.status_version else None


_ENDPOINT_PICKER = "the endpoint picker"
_CONTROLLER = "infergate's controller"
_WEBHOOK_CONFIG = "infergate webhook-config, the chart"
_NATIVE_POLICIES = "infergate native-policies (people apply them)"
_ADMISSION = "admissionregistration.k8s.io"
_GATEWAYS = "Gateway implementations (status.parents)"
_X = "inference.networking.x-k8s.io"

DECLARATIONS: tuple[Declaration, ...] = (
    # infergate's own (chart/crds)
    Declaration("ai.deckhouse.io", "InferenceServiceClass", "inferenceserviceclasses", False, ("v1alpha1",),
                served=True, lookup=True, status_writer=INFERGATE, status_version="v1alpha1"),
    Declaration("ai.deckhouse.io", "InferenceService", "inferenceservices", True, ("v1alpha1",),
                served=True, status_writer=INFERGATE, status_version="v1alpha1"),
    # Deckhouse's ai-models catalog
    Declaration("ai.deckhouse.io", "Model", "models", True, ("v1alpha1",), lookup=True, controller_reads=True),
    Declaration("ai.deckhouse.io", "ClusterModel", "clustermodels", False, ("v1alpha1",), lookup=True,
                controller_reads=True),
    # KubeAI: its model controller owns the status; infergate writes it only when asked to
    Declaration("kubeai.org", "Model", "models", True, served=True,
                status_writer="KubeAI's model controller (status.replicas, status.cache)", status_version="v1",
                status_by_default=False),
    # Gateway API Inference Extension: the GA pool, the seed-era group (v1alpha2 from GIE v0.3,
    # v1alpha1 before: infergate writes the v1alpha1 pool's Ready and model's Accepted), and the
    # objectives and rewrites in both groups the EPP reads (llm-d.ai, else the legacy one)
    Declaration("inference.networking.k8s.io", "InferencePool", "inferencepools", True, ("v1",), served=True,
                lookup=True, status_writer=_GATEWAYS),
    Declaration(_X, "InferencePool", "inferencepools", True, ("v1alpha2", "v1alpha1"), served=True, lookup=True,
                status_writer=_GATEWAYS, status_version="v1alpha1"),
    Declaration(_X, "InferenceModel", "inferencemodels", True, ("v1alpha2", "v1alpha1"), served=True, lookup=True,
                status_writer=INFERGATE, status_version="v1alpha1"),
    Declaration(_X, "InferenceObjective", "inferenceobjectives", True, ("v1alpha2",), served=True, lookup=True,
                status_writer=_ENDPOINT_PICKER),
    Declaration("llm-d.ai", "InferenceObjective", "inferenceobjectives", True, ("v1alpha2",), served=True,
                lookup=True, status_writer=_ENDPOINT_PICKER),
    Declaration(_X, "InferenceModelRewrite", "inferencemodelrewrites", True, ("v1alpha2",), served=True,
                lookup=True, status_writer=_ENDPOINT_PICKER),
    Declaration("llm-d.ai", "InferenceModelRewrite", "inferencemodelrewrites", True, ("v1alpha2",), served=True,
                lookup=True, status_writer=_ENDPOINT_PICKER),
    Declaration(_X, "InferencePoolImport", "inferencepoolimports", True, served=True,
                status_writer="GIE's multi-cluster controller"),
    # Gateway API: only routes to an InferencePool are sent (the configurations' matchConditions)
    Declaration("gateway.networking.k8s.io", "HTTPRoute", "httproutes", True, ("v1",), served=True, lookup=True),
    # built-in kinds
    Declaration("resource.k8s.io", "DeviceClass", "deviceclasses", False, ("v1",), lookup=True,
                controller_reads=True),
    Declaration("resource.k8s.io", "ResourceSlice", "resourceslices", False, ("v1",), lookup=True,
                controller_reads=True),
    Declaration("resource.k8s.io", "ResourceClaim", "resourceclaims", True, ("v1",), controller_reads=True),
    Declaration("scheduling.k8s.io", "PriorityClass", "priorityclasses", False, ("v1",), lookup=True,
                controller_reads=True),
    Declaration("", "Namespace", "namespaces", False, ("v1",), lookup=True, controller_reads=True),
    # policies may look Secrets up (an authSecretRef exists): metadata is all they can read
    Declaration("", "Secret", "secrets", True, ("v1",), lookup=True, lookup_metadata_only=True,
                controller_reads=True),
    Declaration("", "ConfigMap", "configmaps", True, ("v1",), lookup=True, lookup_names=("kubeai-config",)),
    # the pools' endpoints and endpoint pickers; Pods trimmed to labels, ports and phase as they
    # arrive (webhook.state.base.trim_pod), so a list of many Pods is never held whole
    Declaration("", "Pod", "pods", True, ("v1",), lookup=True, controller_reads=True),
    Declaration("", "Service", "services", True, ("v1",), lookup=True, controller_reads=True),
    Declaration("", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("v1",), controller_reads=True),
    Declaration("apps", "StatefulSet", "statefulsets", True, ("v1",), controller_reads=True),
    Declaration("apps", "Deployment", "deployments", True, ("v1",), controller_reads=True),
    Declaration("storage.k8s.io", "StorageClass", "storageclasses", False, ("v1",), controller_reads=True),
    Declaration("cert-manager.io", "ClusterIssuer", "clusterissuers", False, ("v1",), controller_reads=True),
    Declaration("deckhouse.io", "ModuleConfig", "moduleconfigs", False, ("v1alpha1",), controller_reads=True),
    # what the controller writes whole: the background audit's reports (OpenReports, else the
    # Policy WG's), its Lease, Events (core v1: what it writes; events.k8s.io/v1 is the same
    # objects, granted beside it)
    Declaration("openreports.io", "Report", "reports", True, ("v1alpha1",), written_by=_CONTROLLER),
    Declaration("openreports.io", "ClusterReport", "clusterreports", False, ("v1alpha1",), written_by=_CONTROLLER),
    Declaration("wgpolicyk8s.io", "PolicyReport", "policyreports", True, ("v1alpha2",), written_by=_CONTROLLER),
    Declaration("wgpolicyk8s.io", "ClusterPolicyReport", "clusterpolicyreports", False, ("v1alpha2",),
                written_by=_CONTROLLER),
    Declaration("coordination.k8s.io", "Lease", "leases", True, ("v1",), written_by=_CONTROLLER),
    Declaration("", "Event", "events", True, ("v1",), written_by=_CONTROLLER),
    Declaration("events.k8s.io", "Event", "events", True, ("v1",), written_by=_CONTROLLER),
    # the webhook's configurations (``infergate webhook-config``, the chart; their caBundle by
    # ``serve --cert-mode secret``), Kubernetes' own admission policies (read offline beside our
    # policies, written by ``infergate native-policies``) and the CRDs (the cluster's schema)
    Declaration(_ADMISSION, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False, ("v1",),
                written_by=_WEBHOOK_CONFIG),
    Declaration(_ADMISSION, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", False, ("v1",),
                written_by=_WEBHOOK_CONFIG),
    # (the VAPs and their bindings also audited with --audit-native-policies; their params are
    # whatever kind a policy's paramKind names: read by the policy, not declared here)
    Declaration(_ADMISSION, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False, ("v1",),
                written_by=_NATIVE_POLICIES, native_policy=True),
    Declaration(_ADMISSION, "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", False, ("v1",),
                written_by=_NATIVE_POLICIES, native_policy=True),
    Declaration(_ADMISSION, "MutatingAdmissionPolicy", "mutatingadmissionpolicies", False, ("v1",),
                written_by=_NATIVE_POLICIES),
    Declaration(_ADMISSION, "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", False, ("v1",),
                written_by=_NATIVE_POLICIES),
    Declaration("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", False, ("v1",)),
    # the owner of what the controller generates with --native-policies (read by name, for its uid)
    Declaration("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", False, ("v1",)),
)

_BY_GROUP_KIND = {(d.group, d.kind): d for d in DECLARATIONS}


def declared(group: str, kind: str) -> Declaration | None:
    """The declaration of ``group``/``kind`` (None: infergate has no business with it)."""
    return _BY_GROUP_KIND.get((group, kind))


def _declaration(group: str, kind: str) -> Declaration:
    return _BY_GROUP_KIND[(group, kind)]


def served() -> tuple[Declaration, ...]:
    """The kinds in the webhook configurations' rules."""
    return tuple(d for d in DECLARATIONS if d.served)


def lookups() -> tuple[Declaration, ...]:
    """The kinds policies may look up (the webhook's watch cache)."""
    return tuple(d for d in DECLARATIONS if d.lookup)


def native_policies() -> tuple[Declaration, ...]:
    """The kinds of the cluster's own ValidatingAdmissionPolicies and their bindings."""
    return tuple(d for d in DECLARATIONS if d.native_policy)


# The controller's kinds, at the versions its reconcilers read and write.
KUBEAI_MODEL = _declaration("kubeai.org", "Model").status_kind
INFERENCE_MODEL = _declaration(_X, "InferenceModel").status_kind
INFERENCE_POOL = _declaration(_X, "InferencePool").status_kind
INFERENCE_SERVICE_CLASS = _declaration("ai.deckhouse.io", "InferenceServiceClass").status_kind
INFERENCE_SERVICE = _declaration("ai.deckhouse.io", "InferenceService").status_kind
CATALOG_MODEL = _declaration("ai.deckhouse.io", "Model").read_as
CATALOG_CLUSTER_MODEL = _declaration("ai.deckhouse.io", "ClusterModel").read_as
DEVICE_CLASS = _declaration("resource.k8s.io", "DeviceClass").read_as
RESOURCE_SLICE = _declaration("resource.k8s.io", "ResourceSlice").read_as
RESOURCE_CLAIM = _declaration("resource.k8s.io", "ResourceClaim").read_as
POD = _declaration("", "Pod").read_as
SECRET = _declaration("", "Secret").read_as
NAMESPACE = _declaration("", "Namespace").read_as
PVC = _declaration("", "PersistentVolumeClaim").read_as
SERVICE = _declaration("", "Service").read_as
STATEFUL_SET = _declaration("apps", "StatefulSet").read_as
DEPLOYMENT = _declaration("apps", "Deployment").read_as
PRIORITY_CLASS = _declaration("scheduling.k8s.io", "PriorityClass").read_as
STORAGE_CLASS = _declaration("storage.k8s.io", "StorageClass").read_as
CLUSTER_ISSUER = _declaration("cert-manager.io", "ClusterIssuer").read_as
MODULE_CONFIG = _declaration("deckhouse.io", "ModuleConfig").read_as

# What the controller writes whole, at the versions it writes.
REPORT = _declaration("openreports.io", "Report").read_as
CLUSTER_REPORT = _declaration("openreports.io", "ClusterReport").read_as
POLICY_REPORT = _declaration("wgpolicyk8s.io", "PolicyReport").read_as
CLUSTER_POLICY_REPORT = _declaration("wgpolicyk8s.io", "ClusterPolicyReport").read_as
LEASE = _declaration("coordination.k8s.io", "Lease").read_as
EVENT = _declaration("", "Event").read_as
# The admission configuration kinds, at the versions infergate writes and reads.
MUTATING_WEBHOOK_CONFIGURATION = _declaration(_ADMISSION, "MutatingWebhookConfiguration").read_as
VALIDATING_WEBHOOK_CONFIGURATION = _declaration(_ADMISSION, "ValidatingWebhookConfiguration").read_as
VALIDATING_ADMISSION_POLICY = _declaration(_ADMISSION, "ValidatingAdmissionPolicy").read_as
VALIDATING_ADMISSION_POLICY_BINDING = _declaration(_ADMISSION, "ValidatingAdmissionPolicyBinding").read_as
MUTATING_ADMISSION_POLICY = _declaration(_ADMISSION, "MutatingAdmissionPolicy").read_as
MUTATING_ADMISSION_POLICY_BINDING = _declaration(_ADMISSION, "MutatingAdmissionPolicyBinding").read_as
CUSTOM_RESOURCE_DEFINITION = _declaration("apiextensions.k8s.io", "CustomResourceDefinition").read_as
# ``--native-policies``: the ConfigMap of the controller's dry-run probe, and the Helm-managed
# ClusterRole that owns the generated objects (``webhook.controller.native_policies``)
CONFIG_MAP = _declaration("", "ConfigMap").read_as
CLUSTER_ROLE = _declaration("rbac.authorization.k8s.io", "ClusterRole").read_as

# Written (status) by the controller, when --status-writes lets it.
OWNED: tuple[Kind, ...] = tuple(d.status_kind for d in DECLARATIONS if d.status_kind is not None)
# What the controller watches: its own kinds, then what its reconcilers read.
WATCHED: tuple[Kind, ...] = OWNED + tuple(d.read_as for d in DECLARATIONS if d.controller_reads)

BY_KEY = {(k.api_version, k.kind): k for k in WATCHED}

# The label that ties a workload, its Service, claims and Secrets to their InferenceService.
INFERENCE_SERVICE_LABEL = "ai.deckhouse.io/inference-service"


def key_of(obj: dict) -> tuple[str, str, str | None, str]:
    """(apiVersion, kind, namespace, name) of an object."""
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace"), meta.get("name", "")
