"""metav1.Condition lists: build them, keep lastTransitionTime honest, look them up.

A reconciler states what each condition *is* now (type, status, reason, message); the
previous list decides when it *became* so: ``lastTransitionTime`` moves only when the
status changes, exactly like ``meta.SetStatusCondition`` in apimachinery. The clock is an
argument, so everything here stays pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from webhook.controller.timeutil import rfc3339

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
MAX_MESSAGE = 32768  # metav1.Condition.message maxLength


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str = ""


def merge_conditions(
    previous: Iterable[Mapping] | None,
    current: Iterable[Condition],
    *,
    generation: int | None,
    now: datetime,
) -> list[dict]:
    """The condition list to write: ``current`` in its order, each with observedGeneration
    and a lastTransitionTime carried over from ``previous`` unless its status changed.

    Conditions of other types found in ``previous`` are dropped: this controller owns the
    whole list of the kinds it reconciles.
    """
    before = {c.get("type"): c for c in previous or () if isinstance(c, Mapping)}
    stamp = rfc3339(now)
    merged = []
    for condition in current:
        old = before.get(condition.type)
        since = old.get("lastTransitionTime") if old and old.get("status") == condition.status else None
        if isinstance(since, datetime):  # a YAML loader's reading of an unquoted timestamp
            since = rfc3339(since)
        entry = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message if len(condition.message) <= MAX_MESSAGE
            else condition.message[: MAX_MESSAGE - 3] + "...",
            "lastTransitionTime": since or stamp,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        merged.append(entry)
    return merged


def find(conditions: Iterable[Mapping] | None, type_: str) -> Mapping | None:
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == type_:
            return condition
    return None


def status_of(conditions: Iterable[Mapping] | None, type_: str) -> str | None:
    condition = find(conditions, type_)
    return condition.get("status") if condition else None
