"""Pod facts the reconcilers share."""

from __future__ import annotations

from collections.abc import Mapping


def pod_is_ready(pod: Mapping) -> bool:
    """The Pod's ``Ready`` condition is True (what ``podutil.IsPodReady`` checks)."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False
