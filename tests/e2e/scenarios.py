"""The admission scenarios: an object, the docs/decisions.md rules it proves, what must happen.

Pure data built from ``examples/manifests`` (every example is a scenario) plus variations
for the rules the examples do not reach. The e2e tests send each through the real apiserver;
the normal suite sends each through ``infergate validate`` offline, so an expectation that
does not even hold offline is caught here, without a cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .cluster import MANIFESTS_DIR, load_documents

KUBEAI = "KubeAI Model"
GATEWAY = "InferenceModel / InferencePool"
DECKHOUSE = "InferenceServiceClass / InferenceService"
SERVED = "API versions served"
WEBHOOK_DENIAL = 'admission webhook "'  # ... "mutate.infergate.io" or "validate.infergate.io" denied the request


def denied_by_infergate(message: str) -> bool:
    """Whether a denial is the webhook's, or in a native run (``INFERGATE_E2E_NATIVE_POLICIES=1``)
    that of a ValidatingAdmissionPolicy infergate generated from its policies (the apiserver's
    words: ``ValidatingAdmissionPolicy 'infergate-<policy>' with binding ...``)."""
    from .selection import native_policies

    return WEBHOOK_DENIAL in message or (native_policies() and "ValidatingAdmissionPolicy 'infergate-" in message)


def webhook_probe() -> str:
    """A manifest the webhook alone denies: in a native run (``INFERGATE_E2E_NATIVE_POLICIES=1``)
    one whose rule stays with the webhook (a ``dataKey`` param), since the apiserver's generated
    policies deny the other before the webhook is called."""
    from .selection import native_policies

    if native_policies():
        return "denied-by-webhook/kubeai-model-unknown-resource-profile.yaml"
    return "denied-by-webhook/kubeai-model-ollama-url-with-vllm.yaml"
# the rows and rules of "Current upstream versions" (a part of "API versions served")
POOL_V1 = "| InferencePool | inference.networking.k8s.io/v1"
OBJECTIVES = "| InferenceObjective, InferenceModelRewrite |"
HTTPROUTE = "| HTTPRoute, Gateway |"
KUBEAI_CURRENT = "| Model | kubeai.org/v1 | KubeAI ≈v0.23"
CLUSTER_SCHEMA = "In a cluster, the schema is the CRD the cluster serves"
STATUS_OWNERS = "Status: infergate writes only where no other controller owns the field"
CURRENT_WEBHOOK = "Webhook, the current kinds"
KUBEAI_STATUS_OPT_IN = "The KubeAI Model status rule below"


@dataclass(frozen=True)
class Case:
    id: str
    obj: dict[str, Any]
    decisions: tuple[tuple[str, str], ...]
    allowed: bool
    # denied: phrases the apiserver's message must contain; by the webhook or by the CRD (the apiserver itself)
    message: tuple[str, ...] = ()
    by_webhook: bool = False
    # admitted: (dotted path, value) the stored object must show; None: the field must be absent
    stored: tuple[tuple[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()  # phrases some warning must contain

    @property
    def kind(self) -> str:
        return self.obj["kind"]


def example(relative: str) -> dict[str, Any]:
    (doc,) = load_documents(MANIFESTS_DIR / relative)
    return doc


def first_line(relative: str) -> str:
    """What an example's first line says it is denied for (``# denied: ...``) or warned of
    (``# warns: ...``)."""
    return (MANIFESTS_DIR / relative).read_text().splitlines()[0].removeprefix("# denied:").removeprefix(
        "# warns:").strip()


def said_phrases(relative: str) -> tuple[str, ...]:
    """The first line as phrases the apiserver's message must contain: ``field: message`` of a
    CRD denial (both parts), or the one word a webhook denial names."""
    said = first_line(relative)
    return tuple(p.strip() for p in said.split(": ", 1)) if relative.startswith("invalid/") else (said,)


def crd_only_cases() -> list[Case]:
    """The examples the CRDs alone deny: what the apiserver answers with no webhook at all."""
    return [Case(relative, example(relative), decisions, False, message=said_phrases(relative))
            for relative, decisions in EXAMPLE_DECISIONS.items() if relative.startswith("invalid/")]


def variant(relative: str, name: str, change: Callable[[dict], None]) -> dict[str, Any]:
    obj = copy.deepcopy(example(relative))
    obj["metadata"]["name"] = name
    change(obj)
    return obj


def dig(obj: Mapping[str, Any], dotted: str) -> Any:
    """The value at ``a.b.c`` (None when absent)."""
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return change


def _drop(path: str) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        *parents, last = path.split(".")
        node = obj
        for part in parents:
            node = node[part]
        node.pop(last, None)
    return change


def _all(*changes: Callable[[dict], None]) -> Callable[[dict], None]:
    def change(obj: dict) -> None:
        for c in changes:
            c(obj)
    return change


# Which rule each example proves (by file name); the outcome comes from its folder and first line.
EXAMPLE_DECISIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "valid/kubeai-model-vllm.yaml": ((SERVED, "| Model | kubeai.org/v1 | Namespaced"),),
    "valid/kubeai-model-faster-whisper.yaml": ((KUBEAI, "Webhook validation beyond the CRD"),),
    "valid/kubeai-model-ollama.yaml": ((KUBEAI, "Webhook validation beyond the CRD"),),
    "valid/inferencepool.yaml": ((SERVED, "| InferencePool | inference.networking.x-k8s.io/v1alpha1"),),
    "valid/inferencemodel.yaml": ((SERVED, "| InferenceModel |"), (GATEWAY, "`poolRef.group` and `poolRef.kind`")),
    "valid/inferenceserviceclass.yaml": ((SERVED, "| InferenceServiceClass |"),),
    "valid/inferenceservice-catalog.yaml": ((SERVED, "| InferenceService |"), (DECKHOUSE, "10. `launchStrategy`")),
    "valid/inferenceservice-clustermodel.yaml": ((SERVED, "| Model, ClusterModel (ai-models catalog)"),),
    "valid/inferenceservice-huggingface.yaml": ((DECKHOUSE, "`authSecretRef.key` defaults to `token`"),),
    "valid/inferenceservice-default-class.yaml": ((DECKHOUSE, "1. Missing `inferenceServiceClassName`"),),
    "invalid/kubeai-model-bad-url.yaml": ((KUBEAI, "CRD: exactly v0.12.0's"),),
    "invalid/kubeai-model-s3-without-cache.yaml": ((KUBEAI, "CRD: exactly v0.12.0's"),),
    "invalid/inferencemodel-criticality-default.yaml": ((GATEWAY, "`criticality` is never defaulted"),),
    "invalid/inferencepool-port-out-of-range.yaml": ((SERVED, "| InferencePool | inference.networking.x-k8s.io/v1alpha1"),),
    "invalid/inferenceserviceclass-share-range.yaml": ((DECKHOUSE, "Allow-lists in the class are sets"),),
    "invalid/inferenceserviceclass-https-mode.yaml": ((SERVED, "| InferenceServiceClass |"),),
    "invalid/inferenceserviceclass-no-exposure.yaml": ((SERVED, "| InferenceServiceClass |"),),
    "invalid/inferenceserviceclass-bad-namespace.yaml": ((DECKHOUSE, "Allow-lists in the class are sets"),),
    "invalid/inferenceservice-authsecret-on-catalog.yaml": ((SERVED, "| InferenceService |"),),
    "invalid/inferenceservice-clustermodel-namespace.yaml": ((SERVED, "| InferenceService |"),),
    "invalid/inferenceservice-launch-strategy.yaml": ((DECKHOUSE, "10. `launchStrategy`"),),
    "invalid/inferenceservice-huggingface-with-kind.yaml": ((SERVED, "| InferenceService |"),),
    "denied-by-webhook/kubeai-model-ollama-url-with-vllm.yaml": ((KUBEAI, "Webhook validation beyond the CRD"),),
    "denied-by-webhook/kubeai-model-unknown-resource-profile.yaml": ((KUBEAI, "Webhook validation beyond the CRD"),),
    "warned-by-webhook/kubeai-model-speech-on-vllm.yaml": ((KUBEAI, "Webhook validation beyond the CRD"),),
    "denied-by-webhook/inferencemodel-zero-weights.yaml": ((GATEWAY, "`targetModels` weights all zero"),),
    "denied-by-webhook/inferenceservice-namespace-not-allowed.yaml": ((DECKHOUSE, "7. Denials happen in both places"),),
    "denied-by-webhook/inferenceservice-claim-device-missing.yaml": ((DECKHOUSE, "7. Denials happen in both places"),),
    "denied-by-webhook/inferenceservice-model-namespace-mismatch.yaml": ((DECKHOUSE, "7. Denials happen in both places"),),
    "denied-by-webhook/inferenceservice-format-not-allowed.yaml": ((DECKHOUSE, "7. Denials happen in both places"),),
    "denied-by-webhook/inferenceservice-parameter-count-exceeded.yaml": ((DECKHOUSE, "5. `maxParameterCount`"),),
    # the current upstream kinds, on their upstream CRDs (installed by the run when the cluster lacks them)
    "valid/inferencepool-v1.yaml": ((SERVED, POOL_V1),),
    "valid/httproute-inferencepool.yaml": ((SERVED, HTTPROUTE),),
    "valid/inferenceobjective.yaml": ((SERVED, OBJECTIVES),),
    "valid/inferencemodelrewrite.yaml": ((SERVED, OBJECTIVES),),
    "valid/inferencepoolimport.yaml": ((SERVED, "| InferencePoolImport |"),),
    "invalid/inferencepool-v1-duplicate-port.yaml": ((SERVED, POOL_V1), (SERVED, CLUSTER_SCHEMA)),
    "warned-by-webhook/httproute-inferencepool-port.yaml": ((SERVED, HTTPROUTE),),
    "warned-by-webhook/inferencemodelrewrite-mixed-weights.yaml": ((SERVED, OBJECTIVES),),
    "warned-by-webhook/kubeai-model-text-generation-on-infinity.yaml": ((SERVED, KUBEAI_CURRENT), (SERVED, CURRENT_WEBHOOK)),
}

# With the webhook in place its mutating pass answers first (before the CRD's enum), with a hint.
EXAMPLE_DENIALS_WITH_WEBHOOK: dict[str, tuple[str, ...]] = {
    "invalid/inferencemodel-criticality-default.yaml": ("spec.criticality", '"Default": use Standard'),
}

# Defaults the stored object of a valid example shows (written by the webhook or the CRD).
EXAMPLE_DEFAULTS: dict[str, tuple[tuple[str, Any], ...]] = {
    "valid/kubeai-model-ollama.yaml": (("spec.minReplicas", 0), ("spec.targetRequests", 100),
                                       ("spec.scaleDownDelaySeconds", 30)),
    "valid/inferencemodel.yaml": (("spec.poolRef.group", "inference.networking.x-k8s.io"),
                                  ("spec.poolRef.kind", "InferencePool")),
    "valid/inferenceservice-catalog.yaml": (("spec.launchStrategy", "Latency"),),
    "valid/inferenceservice-huggingface.yaml": (("spec.model.authSecretRef.key", "token"),),
    "valid/inferenceservice-default-class.yaml": (("spec.inferenceServiceClassName", "general"),),
}


def example_cases() -> list[Case]:
    cases = []
    for relative, decisions in EXAMPLE_DECISIONS.items():
        folder = relative.split("/")[0]
        obj = example(relative)
        if folder == "valid":
            cases.append(Case(relative, obj, decisions, True, stored=EXAMPLE_DEFAULTS.get(relative, ())))
            continue
        if folder == "warned-by-webhook":
            cases.append(Case(relative, obj, decisions, True, warnings=(first_line(relative),)))
            continue
        if relative in EXAMPLE_DENIALS_WITH_WEBHOOK:
            cases.append(Case(relative, obj, decisions, False, message=EXAMPLE_DENIALS_WITH_WEBHOOK[relative],
                              by_webhook=True))
            continue
        cases.append(Case(relative, obj, decisions, False, message=said_phrases(relative),
                          by_webhook=folder == "denied-by-webhook"))
    return cases


def variation_cases() -> list[Case]:
    ollama, hf = "valid/kubeai-model-ollama.yaml", "valid/inferenceservice-huggingface.yaml"
    im, cls = "valid/inferencemodel.yaml", "valid/inferenceserviceclass.yaml"
    pool, route = "valid/inferencepool-v1.yaml", "valid/httproute-inferencepool.yaml"
    objective, rewrite = "valid/inferenceobjective.yaml", "valid/inferencemodelrewrite.yaml"
    return [
        # the current kinds: admitted with a warning through kubectl
        Case("inferencepool-v1-selects-no-pod-warns",
             variant(pool, "e2e-pool-no-pods", _set("spec.selector.matchLabels", {"app": "e2e-nobody"})),
             ((SERVED, POOL_V1), (SERVED, CURRENT_WEBHOOK)), True, warnings=("no Pod matches", "app=e2e-nobody")),
        Case("inferencepool-v1-pods-without-the-port-warns",
             variant(pool, "e2e-pool-wrong-port", _set("spec.selector.matchLabels", {"app": "vllm-mistral"})),
             ((SERVED, POOL_V1), (SERVED, CURRENT_WEBHOOK)), True, warnings=("container port 8000",)),
        Case("inferencepool-v1-endpoint-picker-missing-warns",
             variant(pool, "e2e-pool-no-picker", _set("spec.endpointPickerRef.name", "e2e-no-such-picker")),
             ((SERVED, POOL_V1), (SERVED, CURRENT_WEBHOOK)), True, warnings=('Service "e2e-no-such-picker" not found',)),
        Case("httproute-to-a-missing-pool-warns",
             variant(route, "e2e-route-missing-pool", _set("spec.rules", [{"backendRefs": [
                 {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "e2e-no-such-pool"}]}])),
             ((SERVED, HTTPROUTE), (SERVED, CURRENT_WEBHOOK)), True, warnings=('InferencePool "e2e-no-such-pool" not found',)),
        Case("inferenceobjective-pool-missing-warns",
             variant(objective, "e2e-objective-missing-pool", _set("spec.poolRef.name", "e2e-no-such-pool")),
             ((SERVED, OBJECTIVES), (SERVED, CURRENT_WEBHOOK)), True, warnings=('InferencePool "e2e-no-such-pool"',)),
        Case("inferenceobjective-priority-beyond-int32",
             variant(objective, "e2e-objective-priority", _set("spec.priority", 2 ** 31)),
             ((SERVED, OBJECTIVES), (SERVED, CURRENT_WEBHOOK)), False, message=("spec.priority", "32-bit integer"), by_webhook=True),
        Case("inferencemodelrewrite-model-of-another-rewrite-warns",
             variant(rewrite, "e2e-rewrite-overlap", _set("spec.rules", [{"matches": [{"model": {"value": "qwen3"}}],
                                                                         "targets": [{"modelRewrite": "qwen3-8b"}]}])),
             ((SERVED, OBJECTIVES), (SERVED, CURRENT_WEBHOOK)), True, warnings=('also rewritten by "qwen3-canary"',)),
        Case("inferencepool-v1alpha1-names-its-replacement",
             variant("valid/inferencepool.yaml", "e2e-legacy-pool", lambda obj: None),
             ((SERVED, "| InferencePool | inference.networking.x-k8s.io/v1alpha1"), (SERVED, CURRENT_WEBHOOK)), True,
             warnings=("removed upstream", "InferencePool inference.networking.k8s.io/v1")),
        Case("kubeai-maxreplicas-without-minreplicas",
             variant(ollama, "e2e-max-without-min", _set("spec.maxReplicas", 3)),
             ((KUBEAI, "Webhook defaulting"),), True, stored=(("spec.minReplicas", 0), ("spec.maxReplicas", 3))),
        Case("kubeai-ollama-engine-with-hf-url",
             variant(ollama, "e2e-ollama-hf", _set("spec.url", "hf://google/gemma-2-2b")),
             ((KUBEAI, "Webhook validation beyond the CRD"),), False, message=("OLlama",), by_webhook=True),
        Case("kubeai-resource-profile-without-count",
             variant(ollama, "e2e-profile-format", _set("spec.resourceProfile", "cpu")),
             ((KUBEAI, "Webhook validation beyond the CRD"),), False, message=("resourceProfile",), by_webhook=True),
        Case("kubeai-resource-profile-count-zero",
             variant(ollama, "e2e-profile-zero", _set("spec.resourceProfile", "cpu:0")),
             ((KUBEAI, "Webhook validation beyond the CRD"),), True, warnings=('count 0 in "cpu:0"',)),
        Case("kubeai-unknown-cache-profile",
             variant("valid/kubeai-model-vllm.yaml", "e2e-cache-profile", _set("spec.cacheProfile", "no-such-cache")),
             ((KUBEAI, "Webhook validation beyond the CRD"),), False, message=("no-such-cache",), by_webhook=True),
        Case("kubeai-replicas-outside-bounds",
             variant(ollama, "e2e-replicas", _all(_set("spec.autoscalingDisabled", True), _set("spec.minReplicas", 1),
                                                  _set("spec.maxReplicas", 2), _set("spec.replicas", 5))),
             ((KUBEAI, "Webhook validation beyond the CRD"),), True, warnings=("spec.replicas: 5 is outside",)),
        Case("kubeai-owner-deprecated",
             variant(ollama, "e2e-owner", _set("spec.owner", "someone")),
             ((KUBEAI, "`owner` is deprecated"),), True, warnings=("owner",)),
        Case("inferencemodel-criticality-unset-stays-unset",
             variant(im, "e2e-no-criticality", _all(_drop("spec.criticality"), _set("spec.modelName", "e2e-no-crit"))),
             ((GATEWAY, "`criticality` is never defaulted"),), True, stored=(("spec.criticality", None),)),
        Case("inferencemodel-pool-missing-warns",
             variant(im, "e2e-missing-pool", _all(_set("spec.poolRef.name", "no-such-pool"),
                                                  _set("spec.modelName", "e2e-missing-pool"))),
             ((GATEWAY, "Webhook: the referenced pool should exist"),), True, warnings=("no-such-pool",)),
        Case("inferencemodel-model-name-in-use-warns",
             variant(im, "e2e-name-in-use", _set("spec.modelName", "llama-3.1-8b-instruct")),
             ((GATEWAY, "Controller: condition `Accepted`"),), True, warnings=("llama-3.1-8b-instruct",)),
        Case("huggingface-without-parameter-count-warns",
             variant(hf, "e2e-hf-no-size", _drop("spec.model.parameterCount")),
             ((DECKHOUSE, "5. `maxParameterCount`"),), True, warnings=("parameterCount",)),
        Case("huggingface-parameter-count-over-class-limit",
             variant(hf, "e2e-hf-too-big", _set("spec.model.parameterCount", "70B")),
             ((DECKHOUSE, "5. `maxParameterCount`"),), False, message=("9B",), by_webhook=True),
        Case("class-https-on-cluster-local-warns",
             variant(cls, "e2e-https-cluster-local", _all(_set("spec.exposurePolicy.type", "ClusterLocal"))),
             ((DECKHOUSE, "9. `https` on a `ClusterLocal` class"),), True, warnings=("ClusterLocal",)),
        Case("class-allow-list-is-a-set",
             variant(cls, "e2e-duplicate-namespaces", _set("spec.admissionPolicy.allowedNamespaces", ["ml-team", "ml-team"])),
             ((DECKHOUSE, "Allow-lists in the class are sets"),), False, message=("Duplicate value",)),
        Case("class-without-accelerator-policy",
             variant(cls, "e2e-no-accelerator-policy", _drop("spec.acceleratorPolicy")),
             ((DECKHOUSE, "2. Class without `acceleratorPolicy`"),), True),
        Case("launch-strategy-throughput-kept",
             variant("valid/inferenceservice-catalog.yaml", "e2e-throughput", _set("spec.launchStrategy", "Throughput")),
             ((DECKHOUSE, "10. `launchStrategy`"),), True, stored=(("spec.launchStrategy", "Throughput"),)),
    ]


def all_cases() -> list[Case]:
    return example_cases() + variation_cases()


# The UPDATE scenarios: immutable fields (docs/decisions.md, InferenceService 6), each changed into an
# otherwise valid object, so that immutability is the one thing denied.
IMMUTABLE_CHANGES: dict[str, tuple[str, Callable[[dict], None]]] = {
    "inferenceServiceClassName": ("spec.inferenceServiceClassName",
                                  _set("spec.inferenceServiceClassName", "h100-dedicated")),
    "model.src": ("spec.model.src", _all(_set("spec.model.src", "ai-models"),
                                         _set("spec.model.ref", {"kind": "ClusterModel", "name": "qwen3-8b"}),
                                         _drop("spec.model.authSecretRef"), _drop("spec.model.parameterCount"))),
}


def immutable_change(stored: Mapping[str, Any], which: str) -> dict[str, Any]:
    changed = copy.deepcopy(dict(stored))
    IMMUTABLE_CHANGES[which][1](changed)
    return changed
