"""Where the background audit's reports go, and whether one needs writing.

Two report APIs, in order of preference (:data:`REPORT_APIS`): OpenReports
(``openreports.io/v1alpha1`` Report / ClusterReport) and, where only it is installed, the
Policy WG's ``wgpolicyk8s.io/v1alpha2`` PolicyReport / ClusterPolicyReport. :func:`choose` picks
the first the cluster serves (None: neither; the audit then keeps to metrics and logs).

A report is written only when it would change what is stored (:func:`unchanged`): its content
(``scope``, ``source``, ``results``, ``summary``, ...), its ownerReferences and the labels and
annotations it sets. A converged resync therefore makes no write. Reports are created (POST) or
replaced (PUT with the resourceVersion read, so a concurrent change is a 409, never lost), never
patched: the content is the controller's alone, the whole of it. Each report carries
``MANAGED_BY`` (``webhook.audit.report``) so the controller's watch of reports (:data:`SELECTOR`)
sees its own and no other tool's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from webhook import kinds
from webhook.audit.report import MANAGED_BY
from webhook.kinds import Kind

SELECTOR = f"{MANAGED_BY[0]}={MANAGED_BY[1]}"


@dataclass(frozen=True)
class ReportApi:
    """One report API: its kind for namespaced objects and its kind for cluster-scoped ones."""

    api_version: str
    namespaced: Kind
    cluster: Kind

    def kind_for(self, namespaced: bool) -> Kind:
        return self.namespaced if namespaced else self.cluster

    @property
    def kinds(self) -> tuple[Kind, Kind]:
        return self.namespaced, self.cluster

    def __str__(self) -> str:
        return f"{self.namespaced.kind}/{self.cluster.kind} ({self.api_version})"


OPENREPORTS = ReportApi(kinds.REPORT.api_version, kinds.REPORT, kinds.CLUSTER_REPORT)
WGPOLICY = ReportApi(kinds.POLICY_REPORT.api_version, kinds.POLICY_REPORT, kinds.CLUSTER_POLICY_REPORT)
REPORT_APIS = (OPENREPORTS, WGPOLICY)


def choose(served: Callable[[str], Collection[str]]) -> ReportApi | None:
    """The first report API whose two kinds the cluster serves; ``served(api_version)`` gives
    the plurals discovery lists for a group/version (empty when it is not installed)."""
    for api in REPORT_APIS:
        plurals = served(api.api_version)
        if all(kind.plural in plurals for kind in api.kinds):
            return api
    return None


# what the apiserver adds to a stored object and a writer never sets
_SERVER_FIELDS = frozenset({"apiVersion", "kind", "metadata", "status"})


def unchanged(stored: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` over ``stored`` would change nothing the controller sets."""
    if stored is None:
        return False
    fields = {k for k in desired if k not in _SERVER_FIELDS}
    if any(stored.get(k) != desired[k] for k in fields):
        return False
    if any(k not in fields for k in stored if k not in _SERVER_FIELDS):
        return False  # a field an earlier version wrote and this one no longer does
    have, want = stored.get("metadata") or {}, desired.get("metadata") or {}
    for part in ("labels", "annotations"):
        theirs = have.get(part) or {}
        if any(theirs.get(k) != v for k, v in (want.get(part) or {}).items()):
            return False
    return (have.get("ownerReferences") or []) == (want.get("ownerReferences") or [])


def for_writing(desired: Mapping[str, Any], stored: Mapping[str, Any] | None) -> dict[str, Any]:
    """The body of a create (``stored`` None) or of a replace of ``stored``: ``desired`` with
    the stored resourceVersion (a concurrent change is then a 409) and the labels and
    annotations others set kept."""
    body = dict(desired)
    if stored is None:
        return body
    have, want = stored.get("metadata") or {}, desired.get("metadata") or {}
    meta = dict(want)
    for part in ("labels", "annotations"):
        merged = {**(have.get(part) or {}), **(want.get(part) or {})}
        if merged:
            meta[part] = merged
    if have.get("resourceVersion"):
        meta["resourceVersion"] = have["resourceVersion"]
    body["metadata"] = meta
    return body


def scope_key(report: Mapping[str, Any]) -> tuple[str, str, str | None, str] | None:
    """(apiVersion, kind, namespace, name) of the object a report is about (its ``scope``)."""
    scope = report.get("scope") or {}
    if not isinstance(scope, Mapping) or not scope.get("name") or not scope.get("kind"):
        return None
    namespace = scope.get("namespace") or (report.get("metadata") or {}).get("namespace")
    return str(scope.get("apiVersion", "")), str(scope["kind"]), namespace, str(scope["name"])
