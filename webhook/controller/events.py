"""Kubernetes Events for the transitions users care about.

An Event is emitted when a notable condition changes status (or first appears not True):
``kubectl describe`` then shows why an order stopped being Ready or could not be placed.
Which conditions are notable is per kind; the Event's reason and message are the
condition's. Events are best effort: a failed Event is logged, never retried.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timezone

from webhook import logs
from webhook import kinds
from webhook.controller.conditions import FALSE, TRUE, find
from webhook.kinds import Kind
from webhook.controller.kubeapi import ApiError, KubeApi
from webhook.controller.leader import micro_time
from webhook.controller.timeutil import rfc3339

EVENT = kinds.EVENT
COMPONENT = "infergate-controller"

NOTABLE: dict[Kind, tuple[str, ...]] = {
    kinds.INFERENCE_SERVICE: ("Planned", "Ready"),
    kinds.INFERENCE_SERVICE_CLASS: ("Validated",),
    kinds.INFERENCE_MODEL: ("Accepted",),
    kinds.INFERENCE_POOL: ("Ready",),
}

log = logs.get("controller.events")


def transitions(kind: Kind, old_status: Mapping | None, new_status: Mapping) -> list[dict]:
    """The notable conditions of ``new_status`` whose status differs from ``old_status``."""
    changed = []
    for type_ in NOTABLE.get(kind, ()):
        new = find(new_status.get("conditions"), type_)
        if new is None:
            continue
        old = find((old_status or {}).get("conditions"), type_)
        if (old is None and new.get("status") != TRUE) or (old is not None and old.get("status") != new.get("status")):
            changed.append(dict(new))
    return changed


def event_for(obj: Mapping, condition: Mapping, instance: str) -> dict:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"  # cluster-scoped objects: Events go to default
    now = rfc3339(datetime.now(timezone.utc))
    return {
        "apiVersion": "v1",
        "kind": EVENT.kind,
        "metadata": {"name": f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
            "namespace": meta.get("namespace"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": condition.get("reason"),
        "message": f"{condition.get('type')}={condition.get('status')}: {condition.get('message', '')}"[:1024],
        "type": "Warning" if condition.get("status") == FALSE else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": micro_time(),
        "action": "Reconcile",
        "count": 1,
    }


class EventRecorder:
    def __init__(self, api: KubeApi, instance: str):
        self.api, self.instance = api, instance
        self.emitted = 0

    def record(self, kind: Kind, obj: Mapping, old_status: Mapping | None, new_status: Mapping) -> None:
        """Blocking: call from a worker thread."""
        for condition in transitions(kind, old_status, new_status):
            event = event_for(obj, condition, self.instance)
            try:
                self.api.create(EVENT, event, event["metadata"]["namespace"])
                self.emitted += 1
            except ApiError as exc:
                log.warning("event for %s %s not recorded: %s", obj.get("kind"), (obj.get("metadata") or {}).get("name"), exc)
