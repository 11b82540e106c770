"""Kubernetes timestamps (RFC 3339) in and out."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_time(text: str | None) -> datetime | None:
    if not text or not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def rfc3339(moment: datetime) -> str:
    """The apiserver's metav1.Time wire form: second precision, UTC, ``Z``."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
