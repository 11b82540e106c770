"""Whose status is whose: which kinds the controller writes status for, and what it owns there.

The controller writes status through server-side apply under its own field manager
(``FIELD_MANAGER``), so the apiserver records which fields are its own: a condition type it
applies is its own entry of the ``conditions`` list-map (keyed by ``type``), and another
writer's conditions and fields are never touched. On its own kinds it forces the apply
(``FORCED``): it sends only the fields that are its by definition (its condition types, its
status fields), whichever manager holds them; on KubeAI's
Model it never forces, so a field KubeAI's controller owns is refused by the apiserver and left
to it. Where another controller owns a kind's status, the default is not to write at all:

| kind | status written by | infergate writes (default) |
|---|---|---|
| Model (kubeai.org/v1) | KubeAI's model controller | nothing (``models.kubeai.org=on``: ``replicas``, ``cache``, for clusters without KubeAI's controller) |
| InferencePool (inference.networking.k8s.io/v1) | Gateway implementations (``status.parents``) | nothing |
| InferenceObjective (llm-d.ai, inference.networking.x-k8s.io v1alpha2) | the endpoint picker | nothing |
| InferenceModelRewrite, InferencePoolImport | the endpoint picker; GIE's multi-cluster controller | nothing |
| InferenceModel (inference.networking.x-k8s.io/v1alpha1) | infergate | its ``Accepted`` condition |
| InferencePool (inference.networking.x-k8s.io/v1alpha1) | infergate | its ``Ready`` condition |
| InferenceServiceClass, InferenceService (ai.deckhouse.io) | infergate | their whole status |

(docs/status-ownership.md says the same for readers of the chart.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.apiversion import group_of
from webhook import kinds

FIELD_MANAGER = "infergate-controller"

# the kinds whose status the controller may write, by the name kubectl gives them
# (<plural>.<group>): two kinds are called Model
WRITABLE: dict[str, kinds.Kind] = {d.crd_name: d.status_kind for d in kinds.DECLARATIONS if d.status_kind}
# off unless asked: another controller owns the status (decisions.md, "Current upstream versions")
OFF_BY_DEFAULT = frozenset(d.status_kind for d in kinds.DECLARATIONS if d.status_kind and not d.status_by_default)
# the kinds whose status fields infergate defines: an apply of them takes them from any manager
# (an earlier infergate wrote them as "OpenAPI-Generator"); never another controller's kind
FORCED = frozenset(kinds.OWNED) - OFF_BY_DEFAULT


# the kinds whose status another controller writes, by (group, kind), and who that is; the
# seed-era v1alpha1 InferencePool (infergate's Ready) is the one version of its group it writes
OTHER_WRITERS: dict[tuple[str, str], str] = {
    (d.group, d.kind): d.status_writer for d in kinds.DECLARATIONS if d.status_writer not in ("", kinds.INFERGATE)}


def other_writer(obj: Mapping[str, Any], writes: frozenset[kinds.Kind]) -> str | None:
    """Who writes ``obj``'s status when infergate does not (None: infergate writes it)."""
    kind = kinds.BY_KEY.get((obj.get("apiVersion", ""), obj.get("kind", "")))
    if kind is not None and kind in writes:
        return None
    group = group_of(obj.get("apiVersion"))
    return OTHER_WRITERS.get((group, str(obj.get("kind", ""))))


class StatusWritesError(ValueError):
    """A ``--status-writes`` value that names no writable kind or no mode."""


def status_writes(settings: Iterable[str] = ()) -> frozenset[kinds.Kind]:
    """The kinds to write status for: the defaults, changed by ``<plural>.<group>=on|off`` items."""
    enabled = {k for k in kinds.OWNED if k not in OFF_BY_DEFAULT}
    for item in settings:
        name, sep, mode = item.partition("=")
        kind = WRITABLE.get(name.strip())
        if not sep or kind is None or mode.strip() not in ("on", "off"):
            known = ", ".join(sorted(WRITABLE))
            raise StatusWritesError(f"--status-writes {item!r}: expected <kind>=on|off, kind one of {known}")
        (enabled.add if mode.strip() == "on" else enabled.discard)(kind)
    return frozenset(enabled)


def _own_fields(obj: Mapping[str, Any]) -> set[str] | None:
    """The top-level status fields the object's managedFields give this controller (None:
    managedFields absent, e.g. a view that drops them)."""
    entries = (obj.get("metadata") or {}).get("managedFields")
    if entries is None:
        return None
    owned: set[str] = set()
    for entry in entries:
        if entry.get("manager") == FIELD_MANAGER and entry.get("subresource") == "status":
            status = ((entry.get("fieldsV1") or {}).get("f:status")) or {}
            owned |= {key[2:] for key in status if key.startswith("f:")}
    return owned


def applied_unchanged(obj: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether applying ``desired`` would change nothing: each of its fields is stored as it
    is (conditions compared by type, only the types it applies: others are other writers'),
    and no field this controller applied before is left out of it (an apply drops those)."""
    stored = obj.get("status") or {}
    for field, value in desired.items():
        if field == "conditions" and isinstance(value, list):
            theirs = {c.get("type"): c for c in stored.get("conditions") or () if isinstance(c, Mapping)}
            if any(theirs.get(c.get("type")) != c for c in value):
                return False
        elif stored.get(field) != value:
            return False
    own = _own_fields(obj)
    return own is None or own <= set(desired)
