"""Reports of an ``infergate test`` run for CI: JUnit XML and JSON.

One JUnit ``<testsuite>`` per suite file, one ``<testcase>`` per case; a failing case's
problems are the ``<failure>`` text, a suite that cannot be loaded is an ``<error>``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.offline.cases import CaseResult


@dataclass
class SuiteReport:
    file: Path
    title: str
    results: list[tuple[CaseResult, float]] = field(default_factory=list)  # (result, seconds)
    error: str | None = None  # the suite could not be loaded

    @property
    def failed(self) -> int:
        return sum(1 for r, _ in self.results if not r.passed) + (1 if self.error else 0)


def junit_xml(reports: list[SuiteReport]) -> str:
    root = ET.Element("testsuites", name="infergate test")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for report in reports:
        seconds = sum(t for _, t in report.results)
        failures = sum(1 for r, _ in report.results if not r.passed)
        suite = ET.SubElement(root, "testsuite", name=report.title, file=str(report.file),
                              tests=str(len(report.results) + (1 if report.error else 0)),
                              failures=str(failures), errors=str(1 if report.error else 0),
                              skipped="0", time=f"{seconds:.3f}")
        if report.error:
            case = ET.SubElement(suite, "testcase", classname=report.title, name="(load)", time="0")
            ET.SubElement(case, "error", message=report.error.splitlines()[0][:200]).text = report.error
        for result, took in report.results:
            case = ET.SubElement(suite, "testcase", classname=report.title, name=result.name, time=f"{took:.3f}")
            if not result.passed:
                ET.SubElement(case, "failure", message=result.problems[0][:200]).text = "\n".join(result.problems)
        totals["tests"] += int(suite.get("tests"))
        totals["failures"] += failures
        totals["errors"] += 1 if report.error else 0
        totals["time"] += seconds
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case_json(result: CaseResult, took: float) -> dict[str, Any]:
    out: dict[str, Any] = {"name": result.name, "passed": result.passed, "problems": result.problems,
                           "seconds": round(took, 4)}
    outcome = getattr(result, "outcome", None)
    if outcome is not None:  # policy suites: the whole answer
        out["answer"] = {"allowed": outcome.allowed, "status": outcome.status, "warnings": outcome.warnings,
                         "patch": outcome.patch, "object": outcome.object,
                         "auditAnnotations": outcome.audit_annotations}
    return out


def json_report(reports: list[SuiteReport], passed: int, failed: int, coverage: dict[str, Any] | None) -> str:
    out: dict[str, Any] = {
        "passed": passed,
        "failed": failed,
        "suites": [{"file": str(r.file), "name": r.title, "error": r.error,
                    "cases": [_case_json(res, took) for res, took in r.results]} for r in reports],
    }
    if coverage is not None:
        out["coverage"] = coverage
    return json.dumps(out, indent=2, ensure_ascii=False, default=str) + "\n"
