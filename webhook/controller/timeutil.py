"""Kubernetes timestamps (RFC 3339) in and out."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_time(value: str | datetime | None) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime; YAML loaders may already have made it one."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def rfc3339(moment: datetime) -> str:
    """The apiserver's metav1.Time wire form: second precision, UTC, ``Z``."""
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
