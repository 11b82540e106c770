"""KubeAI ``Model`` (kubeai.org/v1): replica counts and cache state (docs/decisions.md).

* ``status.replicas.all`` / ``.ready``: Pods labelled ``model=<name>`` / those Ready;
* ``status.cache.loaded`` (only with ``spec.cacheProfile``): a PersistentVolumeClaim of the
  namespace carries KubeAI's annotation ``models.kubeai.org/<name>`` naming this Model's UID —
  the mark KubeAI's cache loader leaves once the model is on the volume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from webhook import kinds
from webhook.controller.context import ReconcileContext
from webhook.controller.reconcilers.pods import pod_is_ready


def _cache_loaded(model: Mapping, ctx: ReconcileContext) -> bool:
    meta = model.get("metadata") or {}
    uid, annotation = meta.get("uid"), f"models.kubeai.org/{meta.get('name', '')}"
    if not uid:
        return False
    for pvc in ctx.list(kinds.PVC, meta.get("namespace")):
        text = ((pvc.get("metadata") or {}).get("annotations") or {}).get(annotation)
        try:
            if text and json.loads(text).get("uid") == uid:
                return True
        except (ValueError, AttributeError):
            continue
    return False


def reconcile_kubeai_model(model: Mapping, ctx: ReconcileContext) -> dict:
    meta = model.get("metadata") or {}
    pods = ctx.list(kinds.POD, meta.get("namespace"), f"model={meta.get('name', '')}")
    status: dict = {"replicas": {"all": len(pods), "ready": sum(1 for pod in pods if pod_is_ready(pod))}}
    if (model.get("spec") or {}).get("cacheProfile"):
        status["cache"] = {"loaded": _cache_loaded(model, ctx)}
    return status
