"""``InferenceService`` (ai.deckhouse.io/v1alpha1): from an order to its status.

The steps of docs/design.md, "InferenceService status, step by step", in order, each a small function returning a condition and
the status fields it owns:

R1 ClassResolved  the class (named, or the default class) exists, admits the namespace, is valid
R2 constraints    replica bounds, PriorityClass, model scope from the class
R3 ModelResolved  catalog facts (or the HuggingFace inputs) against the class's modelPolicy
R4 Planned        the placement planner, with replans on a stuck ResourceClaim (R5)
R6 WorkloadReady  the StatefulSet/Deployment labelled with the order's name
R7 endpoint       URL by exposure type, ``toolCallingSupported`` once planned
R8 Ready, phase   all of the above
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook import kinds
from webhook.controller.conditions import FALSE, TRUE, UNKNOWN, Condition, merge_conditions
from webhook.controller.context import ReconcileContext
from webhook.controller.planner import AcceleratorPolicy, Placement, memory_need_gib, plan, stuck_claim
from webhook.controller.reconcilers.service_class import class_verdict, default_classes
from webhook.state.selectors import selector_string
from webhook.quantity import QuantityError, parse_parameter_count

CONDITION_TYPES = ("ClassResolved", "ModelResolved", "Planned", "WorkloadReady", "Ready", "ScalingHealthy")
# Reasons that wait for something to appear or become ready: the order stays Pending.
# Every other False reason on ClassResolved/ModelResolved/Planned is a verdict: Failed.
TRANSIENT_REASONS = frozenset(
    {"Pending", "ClassNotFound", "ClassNotValidated", "ModelNotFound", "ModelNotReady",
     "AuthSecretNotFound", "AuthSecretKeyMissing"}
)
DEFAULT_AUTH_KEY = "token"
DEFAULT_SERVICE_PORT = 80


def api_key_secret_name(order_name: str) -> str:
    """The Secret holding the order's generated API key (authentication ``Token``)."""
    return f"{order_name}-api-key"


@dataclass
class ModelFacts:
    endpoint_type: str
    parameter_count: int | None = None
    quantization: str | None = None
    features: frozenset[str] = field(default_factory=frozenset)


def _waiting(type_: str, on: str) -> Condition:
    return Condition(type_, UNKNOWN, "Pending", f"waiting for {on}")


# R1 ----------------------------------------------------------------------------------------


def resolve_class(order: Mapping, ctx: ReconcileContext) -> tuple[dict | None, Condition]:
    """The order's class (None when there is none) and ClassResolved."""
    namespace = (order.get("metadata") or {}).get("namespace")
    name = (order.get("spec") or {}).get("inferenceServiceClassName")
    if name:
        service_class = ctx.get(kinds.INFERENCE_SERVICE_CLASS, name)
        if service_class is None:
            return None, Condition("ClassResolved", FALSE, "ClassNotFound", f"InferenceServiceClass {name} not found")
    else:
        defaults = default_classes(ctx)
        if len(defaults) != 1:
            problem = "no class is" if not defaults else f"{len(defaults)} classes are"
            return None, Condition(
                "ClassResolved", FALSE, "ClassNotFound",
                f"spec.inferenceServiceClassName is not set and {problem} annotated "
                f'ai.deckhouse.io/is-default-class: "true"',
            )
        service_class = defaults[0]
        name = service_class["metadata"]["name"]
    allowed = ((service_class.get("spec") or {}).get("admissionPolicy") or {}).get("allowedNamespaces")
    if allowed is not None and "*" not in allowed and namespace not in allowed:
        return service_class, Condition(
            "ClassResolved", FALSE, "NamespaceNotAllowed",
            f"InferenceServiceClass {name} does not admit namespace {namespace} "
            f"(allowedNamespaces: {', '.join(allowed)})",
        )
    verdict = class_verdict(service_class, ctx)
    if not verdict.valid:
        return service_class, Condition(
            "ClassResolved", FALSE, "ClassNotValidated", f"InferenceServiceClass {name} is not valid: {verdict.message}"
        )
    return service_class, Condition("ClassResolved", TRUE, "ClassResolved", f"InferenceServiceClass {name}")


# R2 ----------------------------------------------------------------------------------------


def constraints_of(order: Mapping, class_spec: Mapping, ctx: ReconcileContext) -> dict:
    scaling = class_spec.get("scalingPolicy")
    if scaling is None:
        low = high = 1
    else:
        low = scaling.get("minReplicas") or 1
        high = scaling.get("maxReplicas") or low
    names = (scaling or {}).get("allowedPriorityClassNames") or []
    if names:
        priority = names[0]
    else:
        defaults = sorted(
            (p.get("metadata") or {}).get("name", "") for p in ctx.list(kinds.PRIORITY_CLASS) if p.get("globalDefault")
        )
        priority = defaults[0] if defaults else ""
    constraints = {"minReplicas": low, "maxReplicas": high, "priorityClassName": priority}
    model = (order.get("spec") or {}).get("model") or {}
    if model.get("src") == "ai-models":
        constraints["modelScope"] = "Cluster" if (model.get("ref") or {}).get("kind") == "ClusterModel" else "Namespaced"
    return constraints


# R3 ----------------------------------------------------------------------------------------


def _max_parameter_count(model_policy: Mapping | None) -> int | None:
    limit = (model_policy or {}).get("maxParameterCount")
    return parse_parameter_count(limit) if limit else None  # validity checked by class_verdict


def _catalog_model(order: Mapping, model_policy: Mapping | None, ctx: ReconcileContext) -> ModelFacts | Condition:
    namespace = (order.get("metadata") or {}).get("namespace")
    ref = ((order.get("spec") or {}).get("model") or {}).get("ref") or {}
    kind, name = ref.get("kind"), ref.get("name", "")
    if kind == "ClusterModel":
        entry, described = ctx.get(kinds.CATALOG_CLUSTER_MODEL, name), f"ClusterModel {name}"
    else:
        if ref.get("namespace") not in (None, namespace):
            return Condition(
                "ModelResolved", FALSE, "ModelNotFound",
                f"spec.model.ref.namespace {ref['namespace']} must equal the order's namespace {namespace}",
            )
        entry, described = ctx.get(kinds.CATALOG_MODEL, name, namespace), f"Model {namespace}/{name}"
    if entry is None:
        return Condition("ModelResolved", FALSE, "ModelNotFound", f"catalog {described} not found")
    status = entry.get("status") or {}
    if status.get("phase") != "Ready":
        return Condition(
            "ModelResolved", FALSE, "ModelNotReady", f"catalog {described} is in phase {status.get('phase') or 'unknown'}"
        )
    facts = status.get("resolved") or {}
    formats = (model_policy or {}).get("allowedFormats")
    if formats and facts.get("format") not in formats:
        found = facts.get("format") or "not published"
        return Condition(
            "ModelResolved", FALSE, "FormatNotAllowed",
            f"format of {described} is {found}; the class allows {', '.join(formats)}",
        )
    count = facts.get("parameterCount")
    limit = _max_parameter_count(model_policy)
    if limit is not None:
        if not isinstance(count, int) or isinstance(count, bool):
            return Condition(
                "ModelResolved", FALSE, "ParameterCountUnknown",
                f"{described} publishes no parameterCount; the class limits it to {model_policy['maxParameterCount']}",
            )
        if count > limit:
            return Condition(
                "ModelResolved", FALSE, "ParameterCountExceeded",
                f"{described} has {count} parameters; the class allows at most "
                f"{model_policy['maxParameterCount']} ({limit})",
            )
    if model_policy:
        supported = facts.get("supportedEndpointTypes") or []
        candidates = [t for t in model_policy.get("allowedEndpointTypes") or [] if t in supported]
        if not candidates:
            return Condition(
                "ModelResolved", FALSE, "EndpointTypeNotAllowed",
                f"{described} supports {', '.join(supported) or 'no endpoint type'}; the class allows "
                f"{', '.join(model_policy.get('allowedEndpointTypes') or [])}",
            )
        endpoint_type = candidates[0]
    else:
        endpoint_type = "Chat"
    return ModelFacts(
        endpoint_type=endpoint_type,
        parameter_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        quantization=facts.get("quantization"),
        features=frozenset(facts.get("supportedFeatures") or ()),
    )


def _huggingface_model(order: Mapping, model_policy: Mapping | None, ctx: ReconcileContext) -> ModelFacts | Condition:
    namespace = (order.get("metadata") or {}).get("namespace")
    model = (order.get("spec") or {}).get("model") or {}
    count = None
    if model.get("parameterCount") is not None:
        try:
            count = parse_parameter_count(model["parameterCount"])
        except QuantityError as exc:
            return Condition("ModelResolved", FALSE, "ParameterCountUnknown", f"spec.model.parameterCount: {exc}")
        limit = _max_parameter_count(model_policy)
        if limit is not None and count > limit:
            return Condition(
                "ModelResolved", FALSE, "ParameterCountExceeded",
                f"spec.model.parameterCount {model['parameterCount']} exceeds the class's maxParameterCount "
                f"{model_policy['maxParameterCount']}",
            )
    auth = model.get("authSecretRef")
    if auth:
        secret = ctx.get(kinds.SECRET, auth.get("name", ""), namespace)
        if secret is None:
            return Condition(
                "ModelResolved", FALSE, "AuthSecretNotFound", f"Secret {namespace}/{auth.get('name')} not found"
            )
        key = auth.get("key") or DEFAULT_AUTH_KEY
        # The state layer keeps a Secret's key names (``dataKeys``), never its values.
        fields = ("dataKeys", "data", "stringData")
        keys = {k for f in fields for k in (secret.get(f) or ())}
        if any(f in secret for f in fields) and key not in keys:
            return Condition(
                "ModelResolved", FALSE, "AuthSecretKeyMissing",
                f"Secret {namespace}/{auth.get('name')} has no key {key}",
            )
    endpoint_type = ((model_policy or {}).get("allowedEndpointTypes") or ["Chat"])[0]
    return ModelFacts(endpoint_type=endpoint_type, parameter_count=count)


def resolve_model(order: Mapping, class_spec: Mapping, ctx: ReconcileContext) -> ModelFacts | Condition:
    """The model's facts, or ModelResolved=False saying which rule of the class it breaks."""
    src = ((order.get("spec") or {}).get("model") or {}).get("src")
    resolve = _catalog_model if src == "ai-models" else _huggingface_model
    return resolve(order, class_spec.get("modelPolicy"), ctx)


# R4 / R5 -----------------------------------------------------------------------------------


def _placement_message(placement: Placement, need: int | None) -> str:
    need_text = f"needs {need} GiB" if need is not None else "size unknown: smallest allocation"
    product = f" {placement.product_name}" if placement.product_name else ""
    if placement.sharing_mode == "Shared":
        what = f"{placement.share_percent}% of one{product} device"
    else:
        what = f"{placement.count} whole{product} device(s)" if placement.placement_mode == "WholeDevice" else (
            f"{placement.count}{product} partition(s)"
        )
    return (
        f"DeviceClass {placement.device_class}: {placement.placement_mode}, {placement.sharing_mode}, {what} "
        f"with {placement.accelerator_memory_gib} GiB (model {need_text})"
    )


def plan_order(order: Mapping, class_spec: Mapping, facts: ModelFacts, ctx: ReconcileContext) -> tuple[dict | None, Condition]:
    meta, spec = order.get("metadata") or {}, order.get("spec") or {}
    previous = (order.get("status") or {}).get("resolved") or {}
    excluded = list(previous.get("excludedDeviceClasses") or [])
    replans = int(previous.get("replanCount") or 0)
    current = previous.get("deviceClass")
    if current:
        claims = ctx.list(
            kinds.RESOURCE_CLAIM, meta.get("namespace"),
            selector_string({kinds.INFERENCE_SERVICE_LABEL: meta.get("name", "")}),
        )
        stuck = stuck_claim(claims, current, ctx.now, ctx.settings.replan_timeout)
        if stuck is not None:
            claim_name = (stuck.get("metadata") or {}).get("name")
            if replans >= ctx.settings.replan_limit:
                return dict(previous), Condition(
                    "Planned", FALSE, "ReplanLimitReached",
                    f"ResourceClaim {claim_name} for DeviceClass {current} is unallocated after "
                    f"{replans} replan(s); the limit is {ctx.settings.replan_limit}",
                )
            excluded.append(current)
            replans += 1
    need = memory_need_gib(facts.parameter_count, facts.quantization, spec.get("launchStrategy"))
    order_classes = ((spec.get("resources") or {}).get("accelerator") or {}).get("deviceClasses")
    result = plan(order_classes, AcceleratorPolicy.of_class(class_spec), ctx.inventory, need, excluded)
    bookkeeping = {"replanCount": replans}
    if excluded:
        bookkeeping["excludedDeviceClasses"] = excluded
    if not isinstance(result, Placement):
        return (bookkeeping if replans or excluded else None), Condition("Planned", FALSE, result.reason, result.message)
    resolved = {
        "deviceClass": result.device_class,
        "placementMode": result.placement_mode,
        "sharingMode": result.sharing_mode,
        "sharePercent": result.share_percent,
        "acceleratorMemoryGiB": result.accelerator_memory_gib,
    }
    if result.product_name:
        resolved["acceleratorProductName"] = result.product_name
    resolved.update(bookkeeping)
    return resolved, Condition("Planned", TRUE, "Planned", _placement_message(result, need))


# R6 ----------------------------------------------------------------------------------------


def workload_condition(order: Mapping, constraints: dict | None, ctx: ReconcileContext) -> tuple[Condition, int | None]:
    """WorkloadReady and the ready replica count (None without a workload)."""
    meta = order.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    selector = selector_string({kinds.INFERENCE_SERVICE_LABEL: name})
    workloads = ctx.list(kinds.STATEFUL_SET, namespace, selector) + ctx.list(kinds.DEPLOYMENT, namespace, selector)
    if not workloads:
        return Condition(
            "WorkloadReady", UNKNOWN, "WorkloadNotFound",
            f"no StatefulSet or Deployment labelled {kinds.INFERENCE_SERVICE_LABEL}={name}",
        ), None
    ready = sum(int((w.get("status") or {}).get("readyReplicas") or 0) for w in workloads)
    wanted = max(1, (constraints or {}).get("minReplicas") or 1)
    if ready >= wanted:
        return Condition("WorkloadReady", TRUE, "WorkloadReady", f"{ready} replica(s) ready (minimum {wanted})"), ready
    pending = sorted(
        (c.get("metadata") or {}).get("name", "")
        for c in ctx.list(kinds.RESOURCE_CLAIM, namespace, selector)
        if not (c.get("status") or {}).get("allocation")
    )
    if pending:
        return Condition(
            "WorkloadReady", FALSE, "ClaimPending",
            f"{ready} of {wanted} replica(s) ready; ResourceClaim {', '.join(pending)} not allocated yet",
        ), ready
    return Condition("WorkloadReady", FALSE, "WorkloadProgressing", f"{ready} of {wanted} replica(s) ready"), ready


# R7 ----------------------------------------------------------------------------------------


def _global_setting(ctx: ReconcileContext) -> tuple[str | None, str]:
    """Deckhouse ``publicDomainTemplate`` and global https mode (ModuleConfig ``global``)."""
    module_config = ctx.get(kinds.MODULE_CONFIG, "global") or {}
    modules = (((module_config.get("spec") or {}).get("settings") or {}).get("modules")) or {}
    template = modules.get("publicDomainTemplate") or ctx.settings.public_domain_template
    mode = (modules.get("https") or {}).get("mode") or ctx.settings.https_mode
    return template, mode


def endpoint_of(order: Mapping, class_spec: Mapping, facts: ModelFacts, ctx: ReconcileContext) -> tuple[dict, str | None]:
    """``status.endpoint`` and, when no URL can be given, why."""
    meta = order.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    exposure = class_spec.get("exposurePolicy") or {}
    kind = exposure.get("type") or "ClusterLocal"
    endpoint: dict = {"type": kind}
    problem = None
    if kind == "External":
        template, global_mode = _global_setting(ctx)
        if template and "%s" in template:
            mode = (exposure.get("https") or {}).get("mode") or global_mode
            scheme = "http" if mode == "Disabled" else "https"
            endpoint["url"] = f"{scheme}://{template.replace('%s', f'{name}-{namespace}')}"
        else:
            problem = "no Deckhouse publicDomainTemplate is known (ModuleConfig global)"
    else:
        services = ctx.list(kinds.SERVICE, namespace, selector_string({kinds.INFERENCE_SERVICE_LABEL: name}))
        service = min(services, key=lambda s: (s.get("metadata") or {}).get("name", ""), default=None)
        service_name, port = name, DEFAULT_SERVICE_PORT
        if service is not None:
            service_name = service["metadata"]["name"]
            ports = (service.get("spec") or {}).get("ports") or []
            port = ports[0].get("port", DEFAULT_SERVICE_PORT) if ports else DEFAULT_SERVICE_PORT
        endpoint["url"] = f"http://{service_name}.{namespace}.svc:{port}"
    endpoint["toolCallingSupported"] = facts.endpoint_type == "Chat" and "ToolCalling" in facts.features
    return endpoint, problem


# R8 ----------------------------------------------------------------------------------------


def _ready(conditions: dict[str, Condition], endpoint: dict | None, problem: str | None) -> Condition:
    for type_ in ("ClassResolved", "ModelResolved", "Planned", "WorkloadReady"):
        condition = conditions[type_]
        if condition.status != TRUE:
            status = FALSE if condition.status == FALSE else UNKNOWN
            return Condition("Ready", status, condition.reason, f"{type_}: {condition.message}")
    if not endpoint or not endpoint.get("url"):
        return Condition("Ready", FALSE, "EndpointNotPublished", problem or "no endpoint URL")
    return Condition("Ready", TRUE, "EndpointPublished", f"serving at {endpoint['url']}")


def _phase(conditions: dict[str, Condition], previous_phase: str | None, ready_replicas: int | None, minimum: int) -> str:
    for type_ in ("ClassResolved", "ModelResolved", "Planned"):
        condition = conditions[type_]
        if condition.status == FALSE and condition.reason not in TRANSIENT_REASONS:
            return "Failed"
    scaling_unhealthy = conditions["ScalingHealthy"].status == FALSE
    if conditions["Ready"].status == TRUE and not scaling_unhealthy:
        return "Ready"
    was_serving = previous_phase in ("Ready", "Degraded")
    if was_serving and (scaling_unhealthy or (ready_replicas or 0) < minimum):
        return "Degraded"
    return "Pending"


def reconcile_inference_service(order: Mapping, ctx: ReconcileContext) -> dict:
    meta = order.get("metadata") or {}
    previous = order.get("status") or {}
    status: dict = {}
    conditions: dict[str, Condition] = {}

    service_class, conditions["ClassResolved"] = resolve_class(order, ctx)
    class_spec = (service_class or {}).get("spec") or {}
    constraints = None
    if service_class is not None:
        constraints = constraints_of(order, class_spec, ctx)
        status["constraints"] = constraints

    facts = None
    if service_class is None:
        conditions["ModelResolved"] = _waiting("ModelResolved", "the InferenceServiceClass")
    else:
        resolved_model = resolve_model(order, class_spec, ctx)
        if isinstance(resolved_model, Condition):
            conditions["ModelResolved"] = resolved_model
        else:
            facts = resolved_model
            conditions["ModelResolved"] = Condition(
                "ModelResolved", TRUE, "ModelResolved", f"endpoint type {facts.endpoint_type}"
            )
            status["model"] = {"endpointType": facts.endpoint_type}

    endpoint, problem = None, None
    if conditions["ClassResolved"].status != TRUE:
        conditions["Planned"] = _waiting("Planned", "ClassResolved")
    elif facts is None:
        conditions["Planned"] = _waiting("Planned", "ModelResolved")
    else:
        resolved, conditions["Planned"] = plan_order(order, class_spec, facts, ctx)
        if resolved is not None:
            status["resolved"] = resolved
        if conditions["Planned"].status == TRUE:
            endpoint, problem = endpoint_of(order, class_spec, facts, ctx)
            status["endpoint"] = endpoint

    conditions["WorkloadReady"], ready_replicas = workload_condition(order, constraints, ctx)
    conditions["Ready"] = _ready(conditions, endpoint, problem)
    if constraints is None:
        conditions["ScalingHealthy"] = _waiting("ScalingHealthy", "ClassResolved")
    else:
        conditions["ScalingHealthy"] = Condition(
            "ScalingHealthy", TRUE, "ScalingHealthy",
            f"replicas within [{constraints['minReplicas']}, {constraints['maxReplicas']}]",
        )

    if (class_spec.get("exposurePolicy") or {}).get("authentication") == "Token":
        secret_name = api_key_secret_name(meta.get("name", ""))
        if ctx.get(kinds.SECRET, secret_name, meta.get("namespace")) is not None:
            status["authSecretName"] = secret_name

    minimum = max(1, (constraints or {}).get("minReplicas") or 1)
    status["phase"] = _phase(conditions, previous.get("phase"), ready_replicas, minimum)
    status["conditions"] = merge_conditions(
        previous.get("conditions"), [conditions[t] for t in CONDITION_TYPES],
        generation=meta.get("generation"), now=ctx.now,
    )
    if meta.get("generation") is not None:
        status["observedGeneration"] = meta["generation"]  # last: everything above is for it
    return status
