"""Reconcilers: pure functions ``(object, ReconcileContext) -> desired status``, one per kind."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

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

# What each reconciler reads of the cluster view besides its own kind (the class's checks are
# part of an order's): the controller watches these for the kinds whose status it writes.
_CLASS_READS = (kinds.DEVICE_CLASS, kinds.CLUSTER_ISSUER, kinds.SECRET, kinds.PRIORITY_CLASS, kinds.STORAGE_CLASS)
READS: dict[kinds.Kind, tuple[kinds.Kind, ...]] = {
    kinds.KUBEAI_MODEL: (kinds.POD, kinds.PVC),
    kinds.INFERENCE_MODEL: (kinds.INFERENCE_POOL,),
    kinds.INFERENCE_POOL: (kinds.POD,),
    kinds.INFERENCE_SERVICE_CLASS: _CLASS_READS,
    kinds.INFERENCE_SERVICE: _CLASS_READS + (
        kinds.INFERENCE_SERVICE_CLASS, kinds.CATALOG_MODEL, kinds.CATALOG_CLUSTER_MODEL, kinds.RESOURCE_SLICE,
        kinds.RESOURCE_CLAIM, kinds.STATEFUL_SET, kinds.DEPLOYMENT, kinds.SERVICE, kinds.MODULE_CONFIG),
}


def reads_of(written: Iterable[kinds.Kind]) -> tuple[kinds.Kind, ...]:
    """The kinds the controller reads when it writes the status of ``written``: those, and what
    their reconcilers read, in ``kinds.WATCHED``'s order."""
    wanted = set(written)
    for kind in tuple(wanted):
        wanted.update(READS.get(kind, ()))
    return tuple(k for k in kinds.WATCHED if k in wanted)


def reconcile(obj: Mapping, ctx: ReconcileContext) -> dict:
    """The desired status of ``obj`` (any owned kind)."""
    kind = kinds.BY_KEY[(obj.get("apiVersion", ""), obj.get("kind", ""))]
    return RECONCILERS[kind](obj, ctx)


__all__ = ["READS", "RECONCILERS", "Reconciler", "reads_of", "reconcile"]
