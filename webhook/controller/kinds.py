"""The API kinds the controller reads and writes, named once."""

from __future__ import annotations

from typing import NamedTuple

from webhook.apiversion import group_of, version_of


class Kind(NamedTuple):
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


# Written (status) by the controller.
KUBEAI_MODEL = Kind("kubeai.org/v1", "Model", "models", True)
INFERENCE_MODEL = Kind("inference.networking.x-k8s.io/v1alpha1", "InferenceModel", "inferencemodels", True)
INFERENCE_POOL = Kind("inference.networking.x-k8s.io/v1alpha1", "InferencePool", "inferencepools", True)
INFERENCE_SERVICE_CLASS = Kind("ai.deckhouse.io/v1alpha1", "InferenceServiceClass", "inferenceserviceclasses", False)
INFERENCE_SERVICE = Kind("ai.deckhouse.io/v1alpha1", "InferenceService", "inferenceservices", True)

OWNED = (KUBEAI_MODEL, INFERENCE_MODEL, INFERENCE_POOL, INFERENCE_SERVICE_CLASS, INFERENCE_SERVICE)

# Read only.
CATALOG_MODEL = Kind("ai.deckhouse.io/v1alpha1", "Model", "models", True)
CATALOG_CLUSTER_MODEL = Kind("ai.deckhouse.io/v1alpha1", "ClusterModel", "clustermodels", False)
DEVICE_CLASS = Kind("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False)
RESOURCE_SLICE = Kind("resource.k8s.io/v1", "ResourceSlice", "resourceslices", False)
RESOURCE_CLAIM = Kind("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", True)
POD = Kind("v1", "Pod", "pods", True)
SECRET = Kind("v1", "Secret", "secrets", True)
NAMESPACE = Kind("v1", "Namespace", "namespaces", False)
PVC = Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True)
SERVICE = Kind("v1", "Service", "services", True)
STATEFUL_SET = Kind("apps/v1", "StatefulSet", "statefulsets", True)
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments", True)
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False)
STORAGE_CLASS = Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", False)
CLUSTER_ISSUER = Kind("cert-manager.io/v1", "ClusterIssuer", "clusterissuers", False)
MODULE_CONFIG = Kind("deckhouse.io/v1alpha1", "ModuleConfig", "moduleconfigs", False)

WATCHED = OWNED + (
    CATALOG_MODEL, CATALOG_CLUSTER_MODEL, DEVICE_CLASS, RESOURCE_SLICE, RESOURCE_CLAIM, POD, SECRET,
    NAMESPACE, PVC, SERVICE, STATEFUL_SET, DEPLOYMENT, PRIORITY_CLASS, STORAGE_CLASS, CLUSTER_ISSUER,
    MODULE_CONFIG,
)

BY_KEY = {(k.api_version, k.kind): k for k in WATCHED}

# The label that ties a workload, its Service, claims and Secrets to their InferenceService.
INFERENCE_SERVICE_LABEL = "ai.deckhouse.io/inference-service"


def key_of(obj: dict) -> tuple[str, str, str | None, str]:
    """(apiVersion, kind, namespace, name) of an object."""
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace"), meta.get("name", "")
