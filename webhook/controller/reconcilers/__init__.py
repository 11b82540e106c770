"""Reconcilers: pure functions ``(object, ReconcileContext) -> desired status``, one per kind."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from webhook import kinds
from webhook.controller.context import ReconcileContext
from webhook.controller.reconcilers.gateway import reconcile_inference_model, reconcile_inference_pool
from webhook.controller.reconcilers.inference_service import reconcile_inference_service
from webhook.controller.reconcilers.kubeai import reconcile_kubeai_model
from webhook.controller.reconcilers.service_class import reconcile_service_class

Reconciler = Callable[[Mapping, ReconcileContext], dict]

RECONCILERS: dict[kinds.Kind, Reconciler] = {
    kinds.KUBEAI_MODEL: reconcile_kubeai_model,
    kinds.INFERENCE_MODEL: reconcile_inference_model,
    kinds.INFERENCE_POOL: reconcile_inference_pool,
    kinds.INFERENCE_SERVICE_CLASS: reconcile_service_class,
    kinds.INFERENCE_SERVICE: reconcile_inference_service,
}


def reconcile(obj: Mapping, ctx: ReconcileContext) -> dict:
    """The desired status of ``obj`` (any owned kind)."""
    kind = kinds.BY_KEY[(obj.get("apiVersion", ""), obj.get("kind", ""))]
    return RECONCILERS[kind](obj, ctx)


__all__ = ["RECONCILERS", "Reconciler", "reconcile"]
