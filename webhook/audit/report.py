"""One object's audit as a report: an OpenReports ``Report`` (``ClusterReport`` for a
cluster-scoped object), or a wgpolicyk8s.io ``PolicyReport`` / ``ClusterPolicyReport`` where
only that API is served (the CRDs: ``chart/files/crds/reports/``).

A report is a function of the audit alone, so an object whose results do not change gives a
byte-identical report and a writer can skip the write:

- **name** ``infergate-<uid>`` (Kyverno names its reports by the resource uid; the prefix keeps
  them apart from Kyverno's in the same namespace); an object without a uid (a manifest) gets
  ``infergate-`` and a hash of its apiVersion, kind, namespace and name;
- **scope** the object; an **ownerReference** to it (with its uid) so that the garbage
  collector deletes the report with the object;
- **no timestamps**; results sorted (failures first, then by policy, rule and message);
- **size bound**: at most ``max_results`` results (default ``MAX_RESULTS``, 100) and each
  message at most ``MAX_MESSAGE`` characters (1,024), which keeps a report far below the
  apiserver's 1.5 MiB object limit. The summary counts every result, those left out included;
  an OpenReports report states the cap in ``configuration.limits.maxResults``, and both APIs
  carry the number left out in the annotation ``audit.infergate.io/results-omitted``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from webhook import kinds
from webhook.audit.results import RESULTS, AuditResult, ObjectAudit, ResourceRef, ordered

OPENREPORTS = kinds.REPORT.api_version
WGPOLICY = kinds.POLICY_REPORT.api_version
# (namespaced, cluster-scoped) kind of each report API
_KINDS = {OPENREPORTS: (kinds.REPORT.kind, kinds.CLUSTER_REPORT.kind),
          WGPOLICY: (kinds.POLICY_REPORT.kind, kinds.CLUSTER_POLICY_REPORT.kind)}
SOURCE = "infergate"
MAX_RESULTS = 100
MAX_MESSAGE = 1024
MANAGED_BY = ("app.kubernetes.io/managed-by", "infergate")
EXEMPT_LABEL = "audit.infergate.io/exempt"  # the object's namespace is excluded from admission
OMITTED = "audit.infergate.io/results-omitted"


def report_name(resource: ResourceRef) -> str:
    """The report's name: stable for the object (``infergate-<uid>``)."""
    if resource.uid:
        return f"infergate-{resource.uid}"
    identity = "\x00".join((resource.api_version, resource.kind, resource.namespace, resource.name))
    return "infergate-" + hashlib.sha256(identity.encode()).hexdigest()[:32]


def build_report(audit: ObjectAudit, *, api: str = OPENREPORTS, max_results: int = MAX_RESULTS,
                 exempt: bool = False) -> dict[str, Any]:
    """The report of ``audit`` in ``api`` (``OPENREPORTS`` or ``WGPOLICY``); ``exempt``: the
    object's namespace is excluded from admission (audited all the same, and marked so)."""
    if api not in _KINDS:
        raise ValueError(f"unknown report API {api!r} (expected {OPENREPORTS} or {WGPOLICY})")
    if max_results < 0:
        raise ValueError(f"max_results must be 0 or more, not {max_results}")
    resource = audit.resource
    namespaced, cluster = _KINDS[api]
    results = ordered(audit.results)
    kept = results[:max_results]
    summary = {name: 0 for name in ("pass", "fail", "warn", "error", "skip")}
    for result in results:
        summary[result.result if result.result in RESULTS else "error"] += 1
    scope = _reference(resource)
    labels = dict([MANAGED_BY])
    if exempt:
        labels[EXEMPT_LABEL] = "true"
    metadata: dict[str, Any] = {"name": report_name(resource)}
    if resource.namespace:
        metadata["namespace"] = resource.namespace
    metadata["labels"] = labels
    if len(results) > len(kept):
        metadata["annotations"] = {OMITTED: str(len(results) - len(kept))}
    if resource.uid:
        metadata["ownerReferences"] = [{"apiVersion": resource.api_version, "kind": resource.kind,
                                        "name": resource.name, "uid": resource.uid}]
    report: dict[str, Any] = {"apiVersion": api, "kind": namespaced if resource.namespace else cluster,
                              "metadata": metadata, "scope": scope}
    if api == OPENREPORTS:
        report["source"] = SOURCE
        report["configuration"] = {"limits": {"maxResults": max_results}}
    report["results"] = [_result(r, scope, exempt) for r in kept]
    report["summary"] = summary
    return report


def _reference(resource: ResourceRef) -> dict[str, str]:
    """An ObjectReference to the object (``scope``, ``resources``)."""
    ref = {"apiVersion": resource.api_version, "kind": resource.kind}
    if resource.namespace:
        ref["namespace"] = resource.namespace
    ref["name"] = resource.name
    if resource.uid:
        ref["uid"] = resource.uid
    return ref


def _result(result: AuditResult, scope: dict[str, str], exempt: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"source": SOURCE, "policy": result.policy}
    if result.rule:
        out["rule"] = result.rule
    out["result"] = result.result if result.result in RESULTS else "error"
    if result.message:
        message = result.message
        out["message"] = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 1] + "…"
    out["resources"] = [dict(scope)]
    properties = {"validationActions": ",".join(sorted(result.actions))}
    if exempt:
        properties["exempt"] = "true"
    out["properties"] = properties
    return out
