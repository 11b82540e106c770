"""Existing objects judged against the policies and the CRDs' schemas, and the reports built
from those judgements: ``Auditor`` (``auditor``), its results (``results``), OpenReports and
wgpolicyk8s.io reports (``report``). Pure: the objects come from the edge (a dump read by
``infergate audit``, the controller's watch cache) and the reports go back to it."""

from webhook.audit.auditor import AUDITOR, Auditor
from webhook.audit.report import (EXEMPT_LABEL, MANAGED_BY, MAX_MESSAGE, MAX_RESULTS, OPENREPORTS, WGPOLICY,
                                  build_report, report_name)
from webhook.audit.results import CRD_SCHEMA, AuditResult, ObjectAudit, ResourceRef, Verdict

__all__ = ["AUDITOR", "CRD_SCHEMA", "EXEMPT_LABEL", "MANAGED_BY", "MAX_MESSAGE", "MAX_RESULTS", "OPENREPORTS",
           "WGPOLICY", "AuditResult", "Auditor", "ObjectAudit", "ResourceRef", "Verdict", "build_report",
           "report_name"]
