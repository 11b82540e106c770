"""Pods as the state keeps them: one small record each, dicts only when they are read.

A cluster holds many Pods and the rules read few of their fields (labels for selection, container
ports, phase and readiness: :func:`webhook.state.base.trim_pod`). Kept as dicts, even trimmed, a
Pod costs a few KiB of Python objects; most of it is the same from Pod to Pod of one workload (the
labels, the containers and their ports, the status). A :class:`PodRecord` keeps what is the Pod's
own (its name, uid, versions, timestamps) and references those shared parts, interned per store
(:class:`PodParts`). :func:`expand` gives the dict that :func:`~webhook.state.base.trim_pod` would
have kept, which is what a lookup hands to CEL: the parts are shared between the dicts, and, as
every object of the state, never mutated.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Mapping, NamedTuple

import orjson

__all__ = ["PodParts", "PodRecord", "expand", "pod_parts_of"]

_NO_LABELS: dict[str, str] = {}


class PodRecord(NamedTuple):
    """One Pod: its own fields, and references to interned shared ones (a tuple: no per-object dict)."""

    namespace: str
    name: str
    uid: str | None
    resource_version: str | None
    generation: int | None
    created: str | None
    deleted: str | None
    labels: dict[str, str] | None
    spec: dict[str, Any]
    status: dict[str, Any] | None


def pod_parts_of(trimmed: Mapping[str, Any]) -> tuple[Mapping[str, Any], Any, dict[str, Any], Any]:
    """(metadata, labels, spec, status) of a trimmed Pod."""
    metadata = trimmed.get("metadata") or {}
    return metadata, metadata.get("labels"), trimmed["spec"], trimmed.get("status")


class PodParts:
    """The interned parts of a store's Pods: labels, spec (containers and ports), status, and
    the strings many Pods repeat (namespaces, creation timestamps). Parts no record uses any
    more are dropped by :meth:`prune`, which the store calls as the table grows."""

    def __init__(self) -> None:
        self._labels: dict[tuple, dict[str, str]] = {}
        self._specs: dict[bytes, dict[str, Any]] = {}
        self._statuses: dict[bytes, dict[str, Any]] = {}
        self._strings: dict[str, str] = {}
        self._pruned_at = 0

    def __len__(self) -> int:
        return len(self._labels) + len(self._specs) + len(self._statuses) + len(self._strings)

    def _string(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return self._strings.setdefault(text, text)

    def record(self, trimmed: Mapping[str, Any]) -> PodRecord:
        """The record of a Pod already trimmed (``trim_pod``'s shape)."""
        metadata, labels, spec, status = pod_parts_of(trimmed)
        if isinstance(labels, dict):
            labels = self._labels.setdefault(tuple(labels.items()), labels) if labels else _NO_LABELS
        # the containers and the status are JSON values: their text is their identity
        spec = self._specs.setdefault(orjson.dumps(spec), spec)
        if status is not None:
            status = self._statuses.setdefault(orjson.dumps(status), status)
        return PodRecord(
            sys.intern(metadata["namespace"]) if isinstance(metadata.get("namespace"), str) else metadata.get("namespace"),
            metadata.get("name"), metadata.get("uid"), metadata.get("resourceVersion"), metadata.get("generation"),
            self._string(metadata.get("creationTimestamp")), self._string(metadata.get("deletionTimestamp")),
            labels if "labels" in metadata else None, spec, status,
        )

    def should_prune(self) -> bool:
        return len(self) > 2 * self._pruned_at + 256

    def prune(self, records: Iterable[PodRecord]) -> None:
        """Keep only the parts ``records`` (every record of the store) reference."""
        used: set[int] = set()
        for record in records:
            used.update((id(record.labels), id(record.spec), id(record.status), id(record.created),
                         id(record.deleted)))
        for table in (self._labels, self._specs, self._statuses, self._strings):
            for key in [k for k, v in table.items() if id(v) not in used]:
                del table[key]
        self._pruned_at = len(self)


_METADATA_FIELDS = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "deletionTimestamp", "labels")


def expand(record: PodRecord) -> dict[str, Any]:
    """The Pod as ``trim_pod`` keeps it (a new outer dict and metadata; shared parts below)."""
    values = (record.name, record.namespace, record.uid, record.resource_version, record.generation,
              record.created, record.deleted, record.labels)
    metadata = {k: v for k, v in zip(_METADATA_FIELDS, values) if v is not None}
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": record.spec}
    if record.status is not None:
        pod["status"] = record.status
    return pod
