"""``InferenceServiceClass`` (ai.deckhouse.io/v1alpha1): Validated, Ready, phase.

docs/design.md, "InferenceServiceClass status": ``Validated=True`` iff the spec's cross-field rules hold and every object
it names exists — DeviceClasses in ``allowedDeviceClasses``, the cert-manager ClusterIssuer,
the TLS Secret in ``d8-system``, the PriorityClasses, the StorageClass. ``Ready`` follows
``Validated``. Phase: Failed / Ready / Pending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook import kinds
from webhook.controller.conditions import FALSE, TRUE, Condition, merge_conditions
from webhook.controller.context import ReconcileContext
from webhook.quantity import QuantityError, parse_parameter_count

CERTIFICATE_NAMESPACE = "d8-system"
DEFAULT_CLASS_ANNOTATION = "ai.deckhouse.io/is-default-class"


@dataclass(frozen=True)
class ClassVerdict:
    valid: bool
    reason: str
    message: str


def _spec_problems(spec: Mapping) -> list[str]:
    """The stateless rules (docs/design.md, "The Deckhouse CRDs") the CRD may not have caught (e.g. old objects)."""
    problems = []
    accelerator = spec.get("acceleratorPolicy") or {}
    low, high = accelerator.get("minSharePercent"), accelerator.get("maxSharePercent")
    if low is not None and high is not None and low > high:
        problems.append(f"acceleratorPolicy.minSharePercent {low} exceeds maxSharePercent {high}")
    scaling = spec.get("scalingPolicy") or {}
    low, high = scaling.get("minReplicas"), scaling.get("maxReplicas")
    if low is not None and high is not None and low > high:
        problems.append(f"scalingPolicy.minReplicas {low} exceeds maxReplicas {high}")
    model_policy = spec.get("modelPolicy")
    if model_policy is not None:
        if not model_policy.get("allowedEndpointTypes"):
            problems.append("modelPolicy.allowedEndpointTypes must not be empty")
        limit = model_policy.get("maxParameterCount")
        if limit is not None:
            try:
                parse_parameter_count(limit)
            except QuantityError as exc:
                problems.append(f"modelPolicy.maxParameterCount: {exc}")
    https = (spec.get("exposurePolicy") or {}).get("https") or {}
    mode = https.get("mode")
    if mode == "CertManager" and not (https.get("certManager") or {}).get("clusterIssuerName"):
        problems.append("exposurePolicy.https.certManager.clusterIssuerName is required with mode CertManager")
    if mode == "CustomCertificate" and not (https.get("customCertificate") or {}).get("secretName"):
        problems.append("exposurePolicy.https.customCertificate.secretName is required with mode CustomCertificate")
    return problems


def class_verdict(service_class: Mapping, ctx: ReconcileContext) -> ClassVerdict:
    """Whether a class is valid right now, and if not the first reason and every problem."""
    name = (service_class.get("metadata") or {}).get("name", "")
    memo_key = ("class", name, (service_class.get("metadata") or {}).get("resourceVersion"))
    if memo_key in ctx.memo:
        return ctx.memo[memo_key]
    spec = service_class.get("spec") or {}
    found: list[tuple[str, str]] = [("InvalidSpec", problem) for problem in _spec_problems(spec)]

    for device_class in (spec.get("acceleratorPolicy") or {}).get("allowedDeviceClasses") or ():
        if ctx.get(kinds.DEVICE_CLASS, device_class) is None:
            found.append(("DeviceClassNotFound", f"DeviceClass {device_class} not found"))
    https = (spec.get("exposurePolicy") or {}).get("https") or {}
    issuer = (https.get("certManager") or {}).get("clusterIssuerName")
    if issuer and https.get("mode") in (None, "CertManager") and ctx.get(kinds.CLUSTER_ISSUER, issuer) is None:
        found.append(("ClusterIssuerNotFound", f"ClusterIssuer {issuer} not found"))
    secret = (https.get("customCertificate") or {}).get("secretName")
    if secret and https.get("mode") in (None, "CustomCertificate") and (
        ctx.get(kinds.SECRET, secret, CERTIFICATE_NAMESPACE) is None
    ):
        found.append(("CustomCertificateSecretNotFound", f"Secret {CERTIFICATE_NAMESPACE}/{secret} not found"))
    for priority_class in (spec.get("scalingPolicy") or {}).get("allowedPriorityClassNames") or ():
        if ctx.get(kinds.PRIORITY_CLASS, priority_class) is None:
            found.append(("PriorityClassNotFound", f"PriorityClass {priority_class} not found"))
    storage_class = spec.get("modelStorageClassName")
    if storage_class and ctx.get(kinds.STORAGE_CLASS, storage_class) is None:
        found.append(("StorageClassNotFound", f"StorageClass {storage_class} not found"))

    if found:
        verdict = ClassVerdict(False, found[0][0], "; ".join(message for _, message in found))
    else:
        verdict = ClassVerdict(True, "Valid", "the class is valid and every object it names exists")
    ctx.memo[memo_key] = verdict
    return verdict


def reconcile_service_class(service_class: Mapping, ctx: ReconcileContext) -> dict:
    meta = service_class.get("metadata") or {}
    verdict = class_verdict(service_class, ctx)
    if verdict.valid:
        validated = Condition("Validated", TRUE, "Valid", verdict.message)
        ready = Condition("Ready", TRUE, "Ready", "orders of this class can be planned")
        phase = "Ready"
    else:
        validated = Condition("Validated", FALSE, verdict.reason, verdict.message)
        ready = Condition("Ready", FALSE, verdict.reason, "the class is not valid: " + verdict.message)
        phase = "Failed"
    previous = (service_class.get("status") or {}).get("conditions")
    status = {
        "conditions": merge_conditions(previous, [validated, ready], generation=meta.get("generation"), now=ctx.now),
        "phase": phase,
    }
    if meta.get("generation") is not None:
        status["observedGeneration"] = meta["generation"]
    return status


def default_classes(ctx: ReconcileContext) -> list[dict]:
    """Classes annotated ``ai.deckhouse.io/is-default-class: "true"``, by name."""
    classes = [
        c for c in ctx.list(kinds.INFERENCE_SERVICE_CLASS)
        if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
    ]
    return sorted(classes, key=lambda c: (c.get("metadata") or {}).get("name", ""))
