"""Replanning on a stuck ResourceClaim (docs/decisions.md, InferenceService 8).

A claim of the order (labelled ``ai.deckhouse.io/inference-service: <name>``) that asks for the
currently resolved DeviceClass and has had no ``status.allocation`` for longer than the timeout
means the scheduler cannot place it: that DeviceClass is excluded and the order replanned,
at most ``limit`` times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from webhook.controller.timeutil import parse_time


def requested_device_classes(claim: Mapping) -> set[str]:
    """DeviceClass names a ResourceClaim asks for (``exactly`` and ``firstAvailable`` requests)."""
    names = set()
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        exactly = request.get("exactly") or {}
        if exactly.get("deviceClassName"):
            names.add(exactly["deviceClassName"])
        for sub in request.get("firstAvailable") or ():
            if sub.get("deviceClassName"):
                names.add(sub["deviceClassName"])
        if request.get("deviceClassName"):  # v1beta1 flat request
            names.add(request["deviceClassName"])
    return names


def stuck_claim(
    claims: Iterable[Mapping], device_class: str, now: datetime, timeout: timedelta
) -> Mapping | None:
    """The oldest claim for ``device_class`` left unallocated for longer than ``timeout``."""
    stuck = []
    for claim in claims:
        if (claim.get("status") or {}).get("allocation"):
            continue
        if device_class not in requested_device_classes(claim):
            continue
        created = parse_time((claim.get("metadata") or {}).get("creationTimestamp"))
        if created is not None and now - created > timeout:
            stuck.append((created, (claim.get("metadata") or {}).get("name", ""), claim))
    return min(stuck, key=lambda item: item[:2])[2] if stuck else None


def seconds_until_stuck(
    claims: Iterable[Mapping], device_class: str, now: datetime, timeout: timedelta
) -> float | None:
    """Seconds until the next unallocated claim for ``device_class`` counts as stuck (None: no
    claim is still within its timeout; those already stuck were handled by the reconcile)."""
    waits = []
    for claim in claims:
        if (claim.get("status") or {}).get("allocation") or device_class not in requested_device_classes(claim):
            continue
        created = parse_time((claim.get("metadata") or {}).get("creationTimestamp"))
        wait = (created + timeout - now).total_seconds() if created is not None else 0.0
        if wait > 0:
            waits.append(wait)
    return min(waits) if waits else None
