"""Gateway API Inference Extension: ``InferenceModel`` and ``InferencePool`` (v1alpha1).

InferenceModel ``Accepted`` (docs/decisions.md): False/``ModelNameInUse`` when another
InferenceModel of the same pool serves the same ``modelName`` and is older — the oldest
``creationTimestamp`` wins, ties go to the lexicographically smaller namespace/name, so every
replica of the controller picks the same winner. Unknown/``Pending`` while the pool it
references does not exist (GitOps may create it later).

InferencePool ``Ready``: whether Pods matching ``spec.selector`` are there and Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from webhook import kinds
from webhook.controller.conditions import FALSE, TRUE, UNKNOWN, Condition, merge_conditions
from webhook.controller.context import ReconcileContext
from webhook.controller.reconcilers.pods import pod_is_ready
from webhook.state.selectors import selector_string
from webhook.controller.timeutil import parse_time


_NEVER = datetime.max.replace(tzinfo=timezone.utc)


def _seniority(obj: Mapping) -> tuple[datetime, str, str]:
    meta = obj.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp")) or _NEVER  # no timestamp: youngest
    return created, meta.get("namespace") or "", meta.get("name") or ""


def accepted_condition(model: Mapping, ctx: ReconcileContext) -> Condition:
    meta, spec = model.get("metadata") or {}, model.get("spec") or {}
    namespace, pool = meta.get("namespace"), (spec.get("poolRef") or {}).get("name", "")
    model_name = spec.get("modelName", "")
    if ctx.get(kinds.INFERENCE_POOL, pool, namespace) is None:
        return Condition("Accepted", UNKNOWN, "Pending", f"waiting for InferencePool {namespace}/{pool}")
    rivals = [
        other
        for other in ctx.list(kinds.INFERENCE_MODEL, namespace)
        if (other.get("spec") or {}).get("modelName") == model_name
        and ((other.get("spec") or {}).get("poolRef") or {}).get("name") == pool
        and not (other.get("metadata") or {}).get("deletionTimestamp")
    ]
    winner = min(rivals + [model], key=_seniority)
    if _seniority(winner) != _seniority(model):
        winner_meta = winner.get("metadata") or {}
        return Condition(
            "Accepted", FALSE, "ModelNameInUse",
            f"modelName {model_name!r} is already served in InferencePool {pool} by the older "
            f"InferenceModel {winner_meta.get('namespace')}/{winner_meta.get('name')}",
        )
    return Condition("Accepted", TRUE, "Accepted", f"modelName {model_name!r} is served by InferencePool {pool}")


def reconcile_inference_model(model: Mapping, ctx: ReconcileContext) -> dict:
    meta = model.get("metadata") or {}
    previous = (model.get("status") or {}).get("conditions")
    return {
        "conditions": merge_conditions(
            previous, [accepted_condition(model, ctx)], generation=meta.get("generation"), now=ctx.now
        )
    }


def ready_condition(pool: Mapping, ctx: ReconcileContext) -> Condition:
    meta, spec = pool.get("metadata") or {}, pool.get("spec") or {}
    selector = spec.get("selector") or {}
    if not selector:
        return Condition("Ready", FALSE, "NoMatchingPods", "spec.selector is empty")
    pods = ctx.list(kinds.POD, meta.get("namespace"), selector_string(selector))
    ready = sum(1 for pod in pods if pod_is_ready(pod))
    described = selector_string(selector)
    if not pods:
        return Condition("Ready", FALSE, "NoMatchingPods", f"no Pod matches the selector {described}")
    if not ready:
        return Condition("Ready", FALSE, "NoReadyPods", f"{len(pods)} Pod(s) match the selector {described}, none Ready")
    return Condition("Ready", TRUE, "PodsReady", f"{ready} of {len(pods)} Pod(s) matching {described} are Ready")


def reconcile_inference_pool(pool: Mapping, ctx: ReconcileContext) -> dict:
    meta = pool.get("metadata") or {}
    previous = (pool.get("status") or {}).get("conditions")
    return {
        "conditions": merge_conditions(
            previous, [ready_condition(pool, ctx)], generation=meta.get("generation"), now=ctx.now
        )
    }
