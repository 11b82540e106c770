"""Every condition and reason of every kind, each from a snapshot."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest

from webhook.controller.context import ReconcileContext, Settings
from webhook.controller.reconcilers import reconcile
from webhook.state.memory import MemoryState
from webhook.controller.timeutil import rfc3339

from tests.controller.helpers import NOW, cluster_objects, order
from tests.support.cel import EVALUATOR

LATER = NOW + timedelta(hours=1)


def run(obj, objects, now=NOW, **settings):
    state = MemoryState([*objects, obj])
    return reconcile(obj, ReconcileContext(state=state, now=now, settings=Settings(**settings), evaluator=EVALUATOR))


def conditions(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def cluster_without(*names):
    return [o for o in cluster_objects() if o["metadata"]["name"] not in names]


def the_class(objects):
    return next(o for o in objects if o["kind"] == "InferenceServiceClass")


def pod(name, labels, ready, namespace="ns"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


# -- KubeAI Model ------------------------------------------------------------------------------

def kubeai_model(cache_profile=None):
    spec = {"url": "hf://org/m", "engine": "VLLM", "features": ["TextGeneration"]}
    if cache_profile:
        spec["cacheProfile"] = cache_profile
    return {"apiVersion": "kubeai.org/v1", "kind": "Model",
            "metadata": {"name": "m", "namespace": "ns", "uid": "1234567-uid"}, "spec": spec}


def test_kubeai_model_counts_labelled_pods():
    pods = [pod("a", {"model": "m"}, True), pod("b", {"model": "m"}, False), pod("c", {"model": "other"}, True),
            pod("d", {"model": "m"}, True, namespace="elsewhere")]
    assert run(kubeai_model(), pods) == {"replicas": {"all": 2, "ready": 1}}


def test_kubeai_cache_loaded_from_the_loaders_pvc_annotation():
    def pvc(uid):
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "shared-model-cache-fs", "namespace": "ns",
                             "annotations": {"models.kubeai.org/m": json.dumps({"uid": uid, "timestamp": "2026-01-01T00:00:00Z"})}}}
    assert run(kubeai_model("fs"), [])["cache"] == {"loaded": False}
    assert run(kubeai_model("fs"), [pvc("older-uid")])["cache"] == {"loaded": False}
    assert run(kubeai_model("fs"), [pvc("1234567-uid")]) == {"replicas": {"all": 0, "ready": 0}, "cache": {"loaded": True}}


# -- InferenceModel / InferencePool -------------------------------------------------------------

POOL = {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferencePool",
        "metadata": {"name": "pool", "namespace": "ns", "generation": 3},
        "spec": {"selector": {"app": "vllm"}, "targetPortNumber": 8000}}


def inference_model(name, created, model_name="llama", namespace="ns", generation=1):
    return {"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "InferenceModel",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created, "generation": generation},
            "spec": {"modelName": model_name, "poolRef": {"name": "pool"}}}


def test_inference_model_accepted_and_oldest_wins():
    old, young = inference_model("b", "2026-01-01T00:00:00Z"), inference_model("a", "2026-01-02T00:00:00Z")
    other = inference_model("c", "2025-01-01T00:00:00Z", model_name="mistral")
    assert conditions(run(old, [POOL, young, other])) == {"Accepted": ("True", "Accepted")}
    status = run(young, [POOL, old, other])
    assert conditions(status) == {"Accepted": ("False", "ModelNameInUse")}
    assert "ns/b" in status["conditions"][0]["message"]
    assert status["conditions"][0]["observedGeneration"] == 1


def test_inference_model_tie_goes_to_the_smaller_name():
    first, second = inference_model("alpha", "2026-01-01T00:00:00Z"), inference_model("beta", "2026-01-01T00:00:00Z")
    assert conditions(run(first, [POOL, second]))["Accepted"] == ("True", "Accepted")
    assert conditions(run(second, [POOL, first]))["Accepted"] == ("False", "ModelNameInUse")


def test_inference_model_waits_for_its_pool():
    assert conditions(run(inference_model("a", "2026-01-01T00:00:00Z"), [])) == {"Accepted": ("Unknown", "Pending")}


def test_last_transition_time_moves_only_when_the_status_changes():
    model = inference_model("a", "2026-01-01T00:00:00Z")
    first = run(model, [POOL])
    model["status"] = first
    again = run(model, [POOL], now=LATER)
    assert again == first  # same status, same time: nothing to write
    rival = inference_model("0-older", "2025-01-01T00:00:00Z")
    flipped = run(model, [POOL, rival], now=LATER)
    assert flipped["conditions"][0]["lastTransitionTime"] == rfc3339(LATER)
    model["status"] = flipped
    model["metadata"]["generation"] = 2
    bumped = run(model, [POOL, rival], now=LATER + timedelta(hours=1))
    assert bumped["conditions"][0]["lastTransitionTime"] == rfc3339(LATER)
    assert bumped["conditions"][0]["observedGeneration"] == 2


def test_inference_pool_ready_reflects_matching_pods():
    assert conditions(run(POOL, [])) == {"Ready": ("False", "NoMatchingPods")}
    assert conditions(run(POOL, [pod("p", {"app": "vllm"}, False)])) == {"Ready": ("False", "NoReadyPods")}
    status = run(POOL, [pod("p", {"app": "vllm"}, True), pod("q", {"app": "other"}, True)])
    assert conditions(status) == {"Ready": ("True", "PodsReady")}
    assert status["conditions"][0]["observedGeneration"] == 3


# -- InferenceServiceClass ----------------------------------------------------------------------

def class_status(mutate, objects=None):
    objects = objects if objects is not None else cluster_objects()
    service_class = copy.deepcopy(the_class(objects))
    mutate(service_class["spec"])
    return run(service_class, [o for o in objects if o["kind"] != "InferenceServiceClass"])


def test_valid_class():
    status = class_status(lambda spec: None)
    assert conditions(status) == {"Validated": ("True", "Valid"), "Ready": ("True", "Ready")}
    assert status["phase"] == "Ready" and status["observedGeneration"] == 1


@pytest.mark.parametrize(
    "mutate, reason, needle",
    [
        (lambda s: s["acceleratorPolicy"].update(minSharePercent=60), "InvalidSpec", "minSharePercent 60"),
        (lambda s: s["scalingPolicy"].update(minReplicas=3), "InvalidSpec", "minReplicas 3"),
        (lambda s: s["acceleratorPolicy"]["allowedDeviceClasses"].append("gone"), "DeviceClassNotFound", "DeviceClass gone"),
        (lambda s: s["exposurePolicy"].update(type="External", https={"mode": "CertManager", "certManager": {"clusterIssuerName": "le"}}),
         "ClusterIssuerNotFound", "ClusterIssuer le"),
        (lambda s: s["exposurePolicy"].update(type="External", https={"mode": "CustomCertificate", "customCertificate": {"secretName": "tls"}}),
         "CustomCertificateSecretNotFound", "d8-system/tls"),
        (lambda s: s["scalingPolicy"].update(allowedPriorityClassNames=["inference-low", "gold"]), "PriorityClassNotFound", "PriorityClass gold"),
        (lambda s: s.update(modelStorageClassName="fast"), "StorageClassNotFound", "StorageClass fast"),
    ],
)
def test_invalid_class(mutate, reason, needle):
    status = class_status(mutate)
    assert conditions(status) == {"Validated": ("False", reason), "Ready": ("False", reason)}
    assert needle in status["conditions"][0]["message"]
    assert status["phase"] == "Failed"


def test_class_references_found():
    extra = [
        {"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer", "metadata": {"name": "le"}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"}},
    ]

    def mutate(spec):
        spec["exposurePolicy"].update(type="External", https={"mode": "CertManager", "certManager": {"clusterIssuerName": "le"}})
        spec["modelStorageClassName"] = "fast"

    assert class_status(mutate, cluster_objects() + extra)["phase"] == "Ready"


# -- InferenceService: R1 ClassResolved, R2 constraints -----------------------------------------------

def test_worked_example_all_resolved():
    status = run(order(), cluster_objects())
    assert conditions(status) == {
        "ClassResolved": ("True", "ClassResolved"), "ModelResolved": ("True", "ModelResolved"),
        "Planned": ("True", "Planned"), "WorkloadReady": ("Unknown", "WorkloadNotFound"),
        "Ready": ("Unknown", "WorkloadNotFound"), "ScalingHealthy": ("True", "ScalingHealthy"),
    }
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    assert status["observedGeneration"] == 1 and status["phase"] == "Pending"


def test_class_not_found():
    status = run(order(), cluster_without("a30-shared"))
    assert conditions(status)["ClassResolved"] == ("False", "ClassNotFound")
    assert conditions(status)["ModelResolved"] == ("Unknown", "Pending")
    assert conditions(status)["Planned"] == ("Unknown", "Pending")
    assert "constraints" not in status and status["phase"] == "Pending"


def test_default_class_when_the_order_names_none():
    objects = cluster_objects()
    the_class(objects)["metadata"]["annotations"] = {"ai.deckhouse.io/is-default-class": "true"}
    unnamed = order()
    del unnamed["spec"]["inferenceServiceClassName"]
    assert conditions(run(unnamed, objects))["Planned"] == ("True", "Planned")
    second = copy.deepcopy(the_class(objects))
    second["metadata"]["name"] = "another"
    status = run(unnamed, objects + [second])
    assert conditions(status)["ClassResolved"] == ("False", "ClassNotFound")
    assert "2 classes are annotated" in status["conditions"][0]["message"]
    status = run(unnamed, cluster_objects())
    assert "no class is annotated" in status["conditions"][0]["message"]


def test_namespace_not_allowed_is_failed():
    foreign = order()
    foreign["metadata"]["namespace"] = "elsewhere"
    status = run(foreign, cluster_objects())
    assert conditions(status)["ClassResolved"] == ("False", "NamespaceNotAllowed")
    assert status["phase"] == "Failed"


def test_class_not_validated_keeps_the_order_pending():
    objects = cluster_objects()
    the_class(objects)["spec"]["scalingPolicy"]["allowedPriorityClassNames"] = ["gold"]
    status = run(order(), objects)
    assert conditions(status)["ClassResolved"] == ("False", "ClassNotValidated")
    assert "PriorityClass gold not found" in status["conditions"][0]["message"]
    assert status["phase"] == "Pending"


def test_constraints_defaults():
    objects = cluster_objects()
    spec = the_class(objects)["spec"]
    del spec["scalingPolicy"]
    objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "base"},
                    "value": 0, "globalDefault": True})
    assert run(order(), objects)["constraints"] == {
        "minReplicas": 1, "maxReplicas": 1, "priorityClassName": "base", "modelScope": "Namespaced"}
    spec["scalingPolicy"] = {"minReplicas": 2}
    assert run(order(), objects[:-1])["constraints"] == {
        "minReplicas": 2, "maxReplicas": 2, "priorityClassName": "", "modelScope": "Namespaced"}


# -- R3 ModelResolved ---------------------------------------------------------------------------------

def catalog_entry(objects, name="qwen3-embedding-4b-w4a16"):
    return next(o for o in objects if o["kind"] == "Model" and o["metadata"]["name"] == name)


@pytest.mark.parametrize(
    "mutate, reason, phase",
    [
        (lambda objects: objects.remove(catalog_entry(objects)), "ModelNotFound", "Pending"),
        (lambda objects: catalog_entry(objects)["status"].update(phase="Publishing"), "ModelNotReady", "Pending"),
        (lambda objects: catalog_entry(objects)["status"]["resolved"].update(format="GGUF"), "FormatNotAllowed", "Failed"),
        (lambda objects: catalog_entry(objects)["status"]["resolved"].pop("format"), "FormatNotAllowed", "Failed"),
        (lambda objects: catalog_entry(objects)["status"]["resolved"].update(parameterCount=8_190_735_360), "ParameterCountExceeded", "Failed"),
        (lambda objects: catalog_entry(objects)["status"]["resolved"].pop("parameterCount"), "ParameterCountUnknown", "Failed"),
        (lambda objects: catalog_entry(objects)["status"]["resolved"].update(supportedEndpointTypes=["Chat"]), "EndpointTypeNotAllowed", "Failed"),
    ],
)
def test_catalog_model_against_the_class(mutate, reason, phase):
    objects = cluster_objects()
    mutate(objects)
    status = run(order(), objects)
    assert conditions(status)["ModelResolved"] == ("False", reason)
    assert conditions(status)["Planned"] == ("Unknown", "Pending")
    assert "model" not in status and status["phase"] == phase


def test_parameter_count_limit_is_strict():
    objects = cluster_objects()
    catalog_entry(objects)["status"]["resolved"]["parameterCount"] = 8_000_000_000
    assert conditions(run(order(), objects))["ModelResolved"] == ("True", "ModelResolved")
    catalog_entry(objects)["status"]["resolved"]["parameterCount"] = 8_000_000_001
    assert conditions(run(order(), objects))["ModelResolved"] == ("False", "ParameterCountExceeded")


def test_endpoint_type_is_the_first_class_entry_the_model_supports():
    objects = cluster_objects()
    catalog_entry(objects)["status"]["resolved"]["supportedEndpointTypes"] = ["Rerank", "Embeddings"]
    assert run(order(), objects)["model"] == {"endpointType": "Embeddings"}


def cluster_model_order(objects):
    the_class(objects)["spec"].pop("modelPolicy")
    the_class(objects)["spec"]["acceleratorPolicy"]["allowedDeviceClasses"] = []
    the_class(objects)["spec"]["acceleratorPolicy"]["allowedPlacementTypes"] = ["WholeDevice"]
    objects.append({"apiVersion": "ai.deckhouse.io/v1alpha1", "kind": "ClusterModel", "metadata": {"name": "qwen3-8b"},
                    "status": {"phase": "Ready", "resolved": {
                        "format": "Safetensors", "parameterCount": 8_190_735_360, "supportedEndpointTypes": ["Chat"],
                        "supportedFeatures": ["ToolCalling"]}}})
    chat = order()
    chat["spec"]["model"]["ref"] = {"kind": "ClusterModel", "name": "qwen3-8b"}
    del chat["spec"]["resources"]
    return chat


def test_cluster_model_without_model_policy_is_chat_with_tool_calling():
    objects = cluster_objects()
    chat = cluster_model_order(objects)
    status = run(chat, objects)
    assert status["model"] == {"endpointType": "Chat"}
    assert status["constraints"]["modelScope"] == "Cluster"
    assert status["endpoint"]["toolCallingSupported"] is True
    # 8.19e9 × 2 × 1.2 = 19.66e9 B = 18.3 GiB -> 19 GiB: one whole H100
    assert status["resolved"]["deviceClass"] == "nvidia-h100-physical"
    assert status["resolved"]["acceleratorMemoryGiB"] == 80


def huggingface_order(**model):
    hf = order()
    hf["spec"]["model"] = {"src": "HuggingFace", "ref": {"name": "Qwen/Qwen3-Embedding-4B"}, **model}
    return hf


def test_huggingface_path():
    status = run(huggingface_order(parameterCount="4B"), cluster_objects())
    assert status["model"] == {"endpointType": "Embeddings"}  # first allowed entry
    assert "modelScope" not in status["constraints"]
    # 4e9 × 2 × 1.2 = 9.6e9 B = 8.94 GiB -> 9: 77% of 11.75 GiB is above the 50% bound
    assert conditions(status)["Planned"] == ("False", "NoFeasiblePlacement")
    assert "needs 9 GiB" in next(c for c in status["conditions"] if c["type"] == "Planned")["message"]
    status = run(huggingface_order(), cluster_objects())  # size unknown: the smallest allocation
    assert status["resolved"]["sharePercent"] == 25
    assert conditions(run(huggingface_order(parameterCount="9B"), cluster_objects()))["ModelResolved"] == (
        "False", "ParameterCountExceeded")


def test_huggingface_auth_secret():
    ref = {"authSecretRef": {"name": "hf-token"}}
    assert conditions(run(huggingface_order(**ref), cluster_objects()))["ModelResolved"] == ("False", "AuthSecretNotFound")
    # the state layer keeps a Secret's key names only (dataKeys), never the values
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token", "namespace": "hardfest-demo"},
              "data": {"HF_TOKEN": "c2VjcmV0"}}
    assert conditions(run(huggingface_order(**ref), cluster_objects() + [secret]))["ModelResolved"] == (
        "False", "AuthSecretKeyMissing")
    keyed = {"authSecretRef": {"name": "hf-token", "key": "HF_TOKEN"}}
    assert conditions(run(huggingface_order(**keyed), cluster_objects() + [secret]))["ModelResolved"] == (
        "True", "ModelResolved")


# -- R4/R5 Planned and replans ------------------------------------------------------------------------

def test_claim_device_missing_is_failed():
    narrowed = order("hf-embedding-h100")
    status = run(narrowed, cluster_objects())
    assert conditions(status)["Planned"] == ("False", "ClaimDeviceMissing")
    assert "resolved" not in status and "endpoint" not in status and status["phase"] == "Failed"


def stuck(name, device_class, minutes):
    created = rfc3339(NOW - timedelta(minutes=minutes))
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "hardfest-demo", "creationTimestamp": created,
                         "labels": {"ai.deckhouse.io/inference-service": "hf-embedding"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}


def test_replan_on_a_stuck_claim_then_exhaustion():
    objects = cluster_objects()
    widened = order()
    widened["spec"]["resources"]["accelerator"]["deviceClasses"] = ["nvidia-a30-mig-2g12-mps", "nvidia-a30-mig-2g12"]
    first = run(widened, objects)
    assert first["resolved"]["deviceClass"] == "nvidia-a30-mig-2g12-mps"
    widened["status"] = first
    # young claim: wait
    assert run(widened, objects + [stuck("c1", "nvidia-a30-mig-2g12-mps", 4)]) == first
    # stuck for longer than the timeout: exclude the class, replan
    second = run(widened, objects + [stuck("c1", "nvidia-a30-mig-2g12-mps", 6)])
    assert second["resolved"] == {
        "deviceClass": "nvidia-a30-mig-2g12", "placementMode": "Partition", "sharingMode": "Dedicated",
        "sharePercent": 100, "acceleratorMemoryGiB": 11, "acceleratorProductName": "a30-pcie",
        "replanCount": 1, "excludedDeviceClasses": ["nvidia-a30-mig-2g12-mps"]}
    widened["status"] = second
    # the old claim no longer counts; a stuck claim on the new class excludes it too: nothing left
    third = run(widened, objects + [stuck("c1", "nvidia-a30-mig-2g12-mps", 9), stuck("c2", "nvidia-a30-mig-2g12", 6)])
    assert conditions(third)["Planned"] == ("False", "ClaimDeviceMissing")
    assert third["resolved"] == {"replanCount": 2, "excludedDeviceClasses": ["nvidia-a30-mig-2g12-mps", "nvidia-a30-mig-2g12"]}
    assert third["phase"] == "Failed"


def test_replan_limit_reached():
    objects = cluster_objects()
    planned = order()
    planned["spec"]["resources"]["accelerator"]["deviceClasses"] = ["nvidia-a30-mig-2g12-mps", "nvidia-a30-mig-2g12"]
    planned["status"] = run(planned, objects)
    planned["status"]["resolved"]["replanCount"] = 3
    status = run(planned, objects + [stuck("c", "nvidia-a30-mig-2g12-mps", 6)])
    assert conditions(status)["Planned"] == ("False", "ReplanLimitReached")
    assert status["resolved"] == planned["status"]["resolved"]  # kept as it was: stable
    assert status["phase"] == "Failed"
    limited = run(planned, objects + [stuck("c", "nvidia-a30-mig-2g12-mps", 6)], replan_limit=5)
    assert conditions(limited)["Planned"] == ("True", "Planned") and limited["resolved"]["replanCount"] == 4
    patient = run(planned, objects + [stuck("c", "nvidia-a30-mig-2g12-mps", 6)], replan_timeout=timedelta(minutes=10))
    assert conditions(patient)["Planned"] == ("True", "Planned")


# -- R6 WorkloadReady, R7 endpoint, R8 Ready / phase -----------------------------------------------------

def workload(ready, kind="StatefulSet"):
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "hf-embedding", "namespace": "hardfest-demo",
                         "labels": {"ai.deckhouse.io/inference-service": "hf-embedding"}},
            "spec": {"replicas": 1}, "status": {"readyReplicas": ready}}


def test_workload_progressing_claim_pending_ready():
    objects = cluster_objects()
    assert conditions(run(order(), objects + [workload(0)]))["WorkloadReady"] == ("False", "WorkloadProgressing")
    young = stuck("c", "nvidia-a30-mig-2g12-mps", 1)
    assert conditions(run(order(), objects + [workload(0), young]))["WorkloadReady"] == ("False", "ClaimPending")
    status = run(order(), objects + [workload(1, kind="Deployment")])
    assert conditions(status)["WorkloadReady"] == ("True", "WorkloadReady")
    assert conditions(status)["Ready"] == ("True", "EndpointPublished")
    assert status["phase"] == "Ready"


def test_degraded_after_serving():
    objects = cluster_objects()
    serving = order()
    serving["status"] = run(serving, objects + [workload(1)])
    assert serving["status"]["phase"] == "Ready"
    status = run(serving, objects + [workload(0)], now=LATER)
    assert status["phase"] == "Degraded"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] == rfc3339(LATER)


def test_cluster_local_endpoint_uses_the_labelled_service():
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "hf-embedding-svc", "namespace": "hardfest-demo",
                            "labels": {"ai.deckhouse.io/inference-service": "hf-embedding"}},
               "spec": {"ports": [{"port": 8000}]}}
    status = run(order(), cluster_objects() + [service])
    assert status["endpoint"] == {"type": "ClusterLocal", "url": "http://hf-embedding-svc.hardfest-demo.svc:8000",
                                  "toolCallingSupported": False}


def test_external_endpoint_from_deckhouse_global_settings():
    objects = cluster_objects()
    the_class(objects)["spec"]["exposurePolicy"] = {"type": "External", "authentication": "None"}
    status = run(order(), objects + [workload(1)])
    assert status["endpoint"] == {"type": "External", "toolCallingSupported": False}
    assert conditions(status)["Ready"] == ("False", "EndpointNotPublished")
    assert "authSecretName" not in status  # authentication None
    global_config = {"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig", "metadata": {"name": "global"},
                     "spec": {"settings": {"modules": {"publicDomainTemplate": "%s.example.com", "https": {"mode": "CertManager"}}}}}
    status = run(order(), objects + [workload(1), global_config])
    assert status["endpoint"]["url"] == "https://hf-embedding-hardfest-demo.example.com"
    the_class(objects)["spec"]["exposurePolicy"]["https"] = {"mode": "Disabled"}
    status = run(order(), objects + [workload(1), global_config])
    assert status["endpoint"]["url"] == "http://hf-embedding-hardfest-demo.example.com"
    assert status["phase"] == "Ready"


def test_auth_secret_name_only_when_the_secret_exists():
    assert run(order(), cluster_objects())["authSecretName"] == "hf-embedding-api-key"
    assert "authSecretName" not in run(order(), cluster_without("hf-embedding-api-key"))
